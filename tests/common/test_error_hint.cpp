// An Error's hint: the setting or operation its advice refers to, named by
// the C++ API in message() and what(), and in another vocabulary through
// what_with() (the CLI's flags, the C API's keys).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "common/hint.hpp"
#include "kernhub/error.hpp"
#include "support/build_paths.hpp"

using kernhub::Error;
using kernhub::ErrorCode;
using kernhub::ErrorHint;
namespace hint = kernhub::hint;
namespace fs = std::filesystem;

TEST_CASE("an Error names its hint after the advice: the C++ name, or the caller's", "[common]") {
    const Error e(ErrorCode::offline, "x is not cached; fetch it once while online", hint::action("fetch"), "why");
    CHECK(e.hint().kind == ErrorHint::Kind::action);
    CHECK(e.hint().name == "fetch");
    CHECK(e.plain_message() == "x is not cached; fetch it once while online");
    CHECK(e.message() == "x is not cached; fetch it once while online (Client::fetch)");
    CHECK(std::string(e.what()) == "x is not cached; fetch it once while online (Client::fetch) (why)");
    CHECK(e.what_with("`kernhub fetch`") == "x is not cached; fetch it once while online (`kernhub fetch`) (why)");
    CHECK(e.what_with("") == "x is not cached; fetch it once while online (why)");

    const Error setting(ErrorCode::network, "cannot reach the hub; or work offline", hint::setting("offline"));
    CHECK(setting.message() == "cannot reach the hub; or work offline (Options::offline)");
    CHECK(setting.what_with("--offline") == "cannot reach the hub; or work offline (--offline)");

    // No hint: message() is the message, and what_with() adds nothing.
    const Error plain(ErrorCode::usage, "bad value", "ctx");
    CHECK(plain.hint().kind == ErrorHint::Kind::none);
    CHECK(plain.message() == "bad value");
    CHECK(plain.plain_message() == "bad value");
    CHECK(plain.what_with("--offline") == "bad value (ctx)");

    // A message cut to 4 KiB keeps its end, the advice, and the hint after it.
    const Error long_one(ErrorCode::not_found, std::string(10000, 'x') + " gone; fetch it again",
                         hint::action("fetch"));
    CHECK(long_one.message().size() < 4200);
    CHECK_THAT(long_one.message(), Catch::EndsWith("fetch it again (Client::fetch)"));
    // The caller's name goes through printable() like the rest.
    CHECK(e.what_with("a\nb") == "x is not cached; fetch it once while online (a\\nb) (why)");
}

TEST_CASE("every hint src/ gives is one hint::known() names, of the same kind", "[common]") {
    const std::regex call(R"re(hint::(setting|action)\("([^"]*)"\))re");
    std::size_t calls = 0;
    for (const auto& entry : fs::recursive_directory_iterator(fs::path(KERNHUB_SOURCE_DIR) / "src")) {
        if (!entry.is_regular_file() || entry.path().extension() != ".cpp") continue;
        std::ifstream in(entry.path());
        std::ostringstream text;
        text << in.rdbuf();
        const std::string source = text.str();
        for (std::sregex_iterator it(source.begin(), source.end(), call), end; it != end; ++it) {
            ++calls;
            const auto kind = (*it)[1] == "setting" ? ErrorHint::Kind::setting : ErrorHint::Kind::action;
            const std::string name = (*it)[2];
            INFO(entry.path().string() << ": " << it->str());
            bool known = false;
            for (const hint::Known& k : hint::known()) known = known || (k.kind == kind && name == k.name);
            CHECK(known);
            CHECK(hint::cpp_name(ErrorHint{kind, name}) != name);
        }
    }
    CHECK(calls > 20);
}
