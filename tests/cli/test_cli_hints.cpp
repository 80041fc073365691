// The command line names an error's hint (the setting or operation its
// advice refers to) as a flag, a command or an environment variable it
// reads: the library's messages hold
// neither (tests/common/test_cli_words.cpp), the CLI adds them.
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "cli/hint.hpp"
#include "cli_support.hpp"
#include "common/hint.hpp"

using namespace kernhub::test;
using namespace kernhub::test::cli;

namespace {

// The long options `kernhub COMMAND --help` lists, with its exit code.
std::set<std::string> help_options(const std::string& command) {
    std::vector<std::string> args;
    std::istringstream words(command);
    for (std::string word; words >> word;) args.push_back(word);
    args.push_back("--help");
    Sandbox box;
    ProcessResult help = box.run(args);
    INFO("kernhub " << command << " --help");
    REQUIRE(help.exit_code == 0);
    std::set<std::string> found;
    static const std::regex option("--[a-z][a-z-]*");
    for (std::sregex_iterator it(help.out.begin(), help.out.end(), option), end; it != end; ++it) {
        found.insert(it->str());
    }
    return found;
}

// The command a setting belongs to: an operation's option ("mirror.to") to
// that operation's command, an Options field to fetch, which takes them all.
std::string command_of_setting(const std::string& name) {
    const std::string operation = name.substr(0, name.find('.'));
    if (operation == name) return "fetch";
    return operation == "prune" ? "cache prune" : operation;
}

const std::string& configuration_page() {
    static const std::string text = [] {
        std::ifstream in(fs::path(KERNHUB_SOURCE_DIR) / "docs" / "configuration.md");
        return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }();
    return text;
}

}  // namespace

TEST_CASE("the command line names every hint the library gives as a flag or a command it has", "[cli]") {
    std::map<std::string, std::set<std::string>> help;
    const auto options_of = [&](const std::string& command) -> const std::set<std::string>& {
        if (help.count(command) == 0) help[command] = help_options(command);
        return help[command];
    };
    for (const kernhub::hint::Known& known : kernhub::hint::known()) {
        const std::string named = kernhub::cli::hint_name(kernhub::ErrorHint{known.kind, known.name});
        INFO(known.name << " -> " << named);
        if (known.kind == kernhub::ErrorHint::Kind::setting) {
            // A setting the command line reads only from the environment
            // ("KERNHUB_BACKEND=cpu", "LOCAL_KERNELS=ORG/REPO=PATH") is a
            // variable docs/configuration.md's settings table lists.
            static const std::regex variable("([A-Z][A-Z_]+)=[A-Za-z0-9/=._-]+");
            if (std::smatch parts; std::regex_match(named, parts, variable)) {
                CHECK(configuration_page().find("| `" + parts[1].str() + "` |") != std::string::npos);
                continue;
            }
            CHECK(options_of(command_of_setting(known.name)).count(named) == 1);
            continue;
        }
        // "`kernhub cache verify --repair`": the command's words, then its flags.
        static const std::regex shape("`kernhub ([a-z -]+?)((?: --[a-z-]+)*)`");
        std::smatch parts;
        REQUIRE(std::regex_match(named, parts, shape));
        const std::set<std::string>& options = options_of(parts[1]);
        std::istringstream flags(parts[2]);
        for (std::string flag; flags >> flag;) CHECK(options.count(flag) == 1);
    }
}

TEST_CASE("an error's setting hint shows as the flag: an unreachable hub, or work offline (--offline)", "[cli]") {
    Sandbox box;
    ProcessResult r = box.kh("fetch", "vector-add", k_dead_endpoint, {"--quiet"});
    check_error(r, 5,
                {"127.0.0.1:9", "; check the endpoint and your network, or work offline from the cache (--offline)"});
    CHECK(r.err.find("Options::") == std::string::npos);

    r = box.kh("fetch", "vector-add", k_dead_endpoint, {"--json"});
    INFO(describe(r));
    CHECK(r.exit_code == 5);
    const std::string message = parse_stdout(r)["error"]["message"];
    CHECK_THAT(message, Catch::Contains("or work offline from the cache (--offline)"));
}

TEST_CASE("an error's action hint shows as the command: offline and not cached, fetch it (`kernhub fetch`)", "[cli]") {
    KernelHub hub;
    Sandbox box;
    ProcessResult r = box.kh("load", "vector-add", hub.server().endpoint(), {"--offline"});
    check_error(r, 6,
                {"kernhub-test/vector-add@main is not in the cache",
                 "; offline mode is on: fetch it once while online (`kernhub fetch`)"});
    CHECK(r.err.find("Client::") == std::string::npos);
    CHECK(hub.server().stats()["requests"].empty());
}

TEST_CASE("a KERNHUB_ variable that is no setting gets one warning naming the nearest setting", "[cli]") {
    Sandbox box;
    ProcessResult r = box.run({"list", "--registry", box.registry.string()},
                              {{"KERNHUB_RETRYS", "5"}, {"KERNHUB_COLOUR", "red"}, {"KERNHUB_TEST_ANYTHING", "1"}});
    INFO(describe(r));
    CHECK(r.exit_code == 0);
    const std::string typo =
        "warning: KERNHUB_RETRYS is set but is not a kernhub setting; did you mean KERNHUB_RETRIES? "
        "(docs/configuration.md lists the settings)";
    CHECK(r.err.find(typo) != std::string::npos);
    CHECK(r.err.find(typo) == r.err.rfind(typo));
    CHECK(r.err.find("warning: KERNHUB_COLOUR is set but is not a kernhub setting (docs/configuration.md") !=
          std::string::npos);
    CHECK(r.err.find("KERNHUB_TEST_ANYTHING") == std::string::npos);
    // Settings themselves are no warning.
    r = box.run({"list", "--registry", box.registry.string()}, {{"KERNHUB_MAX_CONNECTIONS", "2"}});
    CHECK(r.exit_code == 0);
    CHECK(r.err.find("warning") == std::string::npos);
}

TEST_CASE("many KERNHUB_ variables that are no setting: 16 warnings, then how many more", "[cli]") {
    Sandbox box;
    EnvChanges extra;
    for (int i = 0; i < 40; ++i) extra["KERNHUB_NOT_A_SETTING_" + std::to_string(i)] = "1";
    ProcessResult r = box.run({"list", "--registry", box.registry.string()}, extra);
    INFO(describe(r));
    CHECK(r.exit_code == 0);
    std::size_t warnings = 0;
    for (std::size_t at = r.err.find("is set but is not a kernhub setting"); at != std::string::npos;
         at = r.err.find("is set but is not a kernhub setting", at + 1)) {
        ++warnings;
    }
    CHECK(warnings == 16);
    CHECK(r.err.find("warning: 24 more KERNHUB_* variables are set that are no kernhub setting") != std::string::npos);
}
