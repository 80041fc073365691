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

// The long options `kernhub COMMAND --help` lists.
std::set<std::string> help_options(const std::string& command) {
    std::vector<std::string> args;
    std::istringstream words(command);
    for (std::string word; words >> word;) args.push_back(word);
    args.push_back("--help");
    Sandbox box;
    ProcessResult help = box.run(args);
    INFO("kernhub " << command << " --help");
    REQUIRE(help.exit_code == 0);
    return long_options(help.out);
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
        CHECK(long_options(line->second) == help_options(command));
    }
}

TEST_CASE("every usage line elsewhere in README names only options its command takes", "[cli]") {
    // Usage lines in the other sections (lines starting "kernhub COMMAND"
    // with a "[--" in fenced blocks, and their indented continuations) may
    // show fewer options than the CLI block, never one the command refuses.
    const std::string readme = slurp(std::string(KERNHUB_SOURCE_DIR) + "/README.md");
    const std::size_t cli_block = readme.find("## CLI\n\n```\n");
    const std::size_t cli_end = readme.find("```\n", cli_block + 12);
    std::istringstream lines(readme.substr(0, cli_block) + readme.substr(cli_end + 4));
    std::map<std::string, std::set<std::string>> help;
    std::string line;
    std::string command;
    std::string usage;
    std::size_t checked = 0;
    const auto check = [&] {
        if (command.empty()) return;
        if (help.count(command) == 0) help[command] = help_options(command);
        for (const std::string& option : long_options(usage)) {
            INFO(usage);
            CHECK(help[command].count(option) == 1);
        }
        ++checked;
        command.clear();
    };
    bool in_block = false;
    while (std::getline(lines, line)) {
        if (line.rfind("```", 0) == 0) {
            check();
            in_block = !in_block;
            continue;
        }
        if (!in_block) continue;
        if (!command.empty() && line.rfind("  ", 0) == 0) {
            usage += " " + line;
            continue;
        }
        check();
        if (line.rfind("kernhub ", 0) != 0 || line.find("[--") == std::string::npos) continue;
        std::istringstream words(line.substr(8));
        std::string word;
        while (words >> word && std::regex_match(word, std::regex("[a-z][a-z-]*"))) {
            command += (command.empty() ? "" : " ") + word;
        }
        usage = line;
    }
    check();
    CHECK(checked >= 8);
}
