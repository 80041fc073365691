// The C++ API names an error's hint (the setting or operation its advice
// refers to) as an Options field or a Client method, in message() and
// what(), and gives it structured in Error::hint().
#include <catch2/catch.hpp>

#include <string>

#include "kernhub/kernhub.hpp"
#include "support/build_paths.hpp"
#include "support/temp_dir.hpp"

using namespace kernhub;

namespace {

// Options with an empty cache, no registry (the reference names its repo)
// and no retries.
Options empty_cache(const test::TempDir& dir) {
    Options o;
    o.cache_dir = (dir.path() / "cache").string();
    o.project_dir = dir.path().string();
    o.no_default_registry = true;
    o.retries = 0;
    return o;
}

Error error_of_fetch(const Options& options) {
    try {
        Client(options).fetch("kernhub-demo/vector-add@main");
    } catch (const Error& e) {
        return e;
    }
    FAIL("the fetch succeeded");
    return Error(ErrorCode::ok, "");
}

}  // namespace

TEST_CASE("a setting hint reads as its Options field: an unreachable hub, or work offline", "[api]") {
    test::TempDir dir;
    Options o = empty_cache(dir);
    o.endpoint = "http://127.0.0.1:9";
    o.offline = false;
    const Error e = error_of_fetch(o);
    INFO(e.what());
    CHECK(e.code() == ErrorCode::network);
    CHECK(e.hint().kind == ErrorHint::Kind::setting);
    CHECK(e.hint().name == "offline");
    CHECK_THAT(e.message(), Catch::EndsWith("; check the endpoint and your network, or work offline from the cache "
                                            "(Options::offline)"));
    CHECK_THAT(std::string(e.what()), Catch::Contains("(Options::offline) ("));  // the context follows
    CHECK_THAT(e.plain_message(), Catch::EndsWith("or work offline from the cache"));
}

TEST_CASE("an action hint reads as its Client method: offline and not cached, fetch it", "[api]") {
    test::TempDir dir;
    Options o = empty_cache(dir);
    o.endpoint = std::string("file://") + KERNHUB_DEMO_HUB;
    o.offline = true;
    const Error e = error_of_fetch(o);
    INFO(e.what());
    CHECK(e.code() == ErrorCode::offline);
    CHECK(e.hint().kind == ErrorHint::Kind::action);
    CHECK(e.hint().name == "fetch");
    CHECK_THAT(e.message(), Catch::StartsWith("kernhub-demo/vector-add@main is not in the cache"));
    CHECK_THAT(e.message(), Catch::EndsWith("; offline mode is on: fetch it once while online (Client::fetch)"));
    CHECK(std::string(e.what()) == e.message());
}
