// README's usage lines (the block under "## CLI") list exactly the options
// each command takes: compared here, option by option, with the command's
// own --help, so the two cannot drift apart.
#include <regex>
#include <set>
#include <sstream>

#include "cli_support.hpp"
#include "support/build_paths.hpp"
#include "support/slurp.hpp"

using namespace kernhub::test;
using namespace kernhub::test::cli;

namespace {

std::set<std::string> long_options(const std::string& text) {
    std::set<std::string> found;
    static const std::regex option("--[a-z][a-z-]*");
    for (std::sregex_iterator it(text.begin(), text.end(), option), end; it != end; ++it) found.insert(it->str());
    found.erase("--help");
    return found;
}

// Each usage entry of README's CLI block, by command ("cache prune"), with
// its continuation lines joined.
std::map<std::string, std::string> readme_usage() {
    const std::string readme = slurp(std::string(KERNHUB_SOURCE_DIR) + "/README.md");
    const std::size_t start = readme.find("## CLI\n\n```\n");
    REQUIRE(start != std::string::npos);
    const std::size_t body = start + std::string("## CLI\n\n```\n").size();
    const std::size_t stop = readme.find("```\n", body);
    REQUIRE(stop != std::string::npos);
    std::map<std::string, std::string> usage;
    std::istringstream lines(readme.substr(body, stop - body));
    std::string line;
    std::string current;
    while (std::getline(lines, line)) {
        if (line.rfind("kernhub ", 0) == 0) {
            std::istringstream words(line.substr(8));
            std::string word;
            current.clear();
            while (words >> word && std::regex_match(word, std::regex("[a-z][a-z-]*"))) {
                current += (current.empty() ? "" : " ") + word;
            }
            REQUIRE_FALSE(current.empty());
            usage[current] = line;
        } else {
            REQUIRE_FALSE(current.empty());
            usage[current] += " " + line;
        }
    }
    return usage;
}

}  // namespace

TEST_CASE("README's usage lines name exactly the options each command's --help lists", "[cli]") {
    const auto usage = readme_usage();
    const std::vector<std::string> commands = {"fetch",       "load",        "info",         "list",
                                               "inspect",     "lock",        "prewarm",      "mirror",
                                               "verify",      "verify-blob", "cache ls",     "cache verify",
                                               "cache prune", "cache path",  "cache export", "cache import"};
    CHECK(usage.size() == commands.size());
    for (const std::string& command : commands) {
        INFO("kernhub " << command);
        const auto line = usage.find(command);
        REQUIRE(line != usage.end());
        std::vector<std::string> args;
        std::istringstream words(command);
        for (std::string word; words >> word;) args.push_back(word);
        args.push_back("--help");
        Sandbox box;
        ProcessResult help = box.run(args);
        REQUIRE(help.exit_code == 0);
        CHECK(long_options(line->second) == long_options(help.out));
    }
}
