// The usage lines of docs/commands.md (the block under "## Usage") list
// exactly the options each command takes: compared here, option by option,
// with the command's own --help, so the two cannot drift apart.
#include <algorithm>
#include <filesystem>
#include <regex>
#include <set>
#include <sstream>
#include <string_view>

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
std::set<std::string> usage_help_options(const std::string& command) {
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

// The page with the usage block, and the block's opening: the heading, a
// blank line and the fence.
std::string commands_page() {
    return std::string(KERNHUB_SOURCE_DIR) + "/docs/commands.md";
}
constexpr std::string_view k_usage_opening = "## Usage\n\n```\n";

// Each usage entry of docs/commands.md's usage block, by command ("cache
// prune"), with its continuation lines joined.
std::map<std::string, std::string> documented_usage() {
    const std::string page = slurp(commands_page());
    const std::size_t start = page.find(k_usage_opening);
    REQUIRE(start != std::string::npos);
    const std::size_t body = start + k_usage_opening.size();
    const std::size_t stop = page.find("```\n", body);
    REQUIRE(stop != std::string::npos);
    std::map<std::string, std::string> usage;
    std::istringstream lines(page.substr(body, stop - body));
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

TEST_CASE("docs/commands.md's usage lines name exactly the options each command's --help lists", "[cli]") {
    const auto usage = documented_usage();
    const std::vector<std::string> commands = {"fetch",       "load",        "info",         "list",
                                               "inspect",     "lock",        "prewarm",      "mirror",
                                               "verify",      "verify-blob", "cache ls",     "cache verify",
                                               "cache prune", "cache path",  "cache export", "cache import"};
    CHECK(usage.size() == commands.size());
    for (const std::string& command : commands) {
        INFO("kernhub " << command);
        const auto line = usage.find(command);
        REQUIRE(line != usage.end());
        CHECK(long_options(line->second) == usage_help_options(command));
    }
}

TEST_CASE("every usage line elsewhere in the docs names only options its command takes", "[cli]") {
    // Usage lines in README.md, CONTRIBUTING.md and the other sections of
    // docs/*.md (lines starting "kernhub COMMAND" with a "[--" in fenced
    // blocks, and their indented continuations) may show fewer options than
    // the usage block, never one the command refuses.
    const std::string source = KERNHUB_SOURCE_DIR;
    std::string docs = slurp(source + "/README.md") + slurp(source + "/CONTRIBUTING.md");
    std::vector<std::filesystem::path> pages;
    for (const auto& entry : std::filesystem::directory_iterator(source + "/docs")) {
        if (entry.path().extension() == ".md" && entry.path() != std::filesystem::path(commands_page())) {
            pages.push_back(entry.path());
        }
    }
    std::sort(pages.begin(), pages.end());
    for (const auto& page : pages) docs += slurp(page.string());
    const std::string commands = slurp(commands_page());
    const std::size_t usage_block = commands.find(k_usage_opening);
    REQUIRE(usage_block != std::string::npos);
    const std::size_t usage_end = commands.find("```\n", usage_block + k_usage_opening.size());
    REQUIRE(usage_end != std::string::npos);
    docs += commands.substr(0, usage_block) + commands.substr(usage_end + 4);
    std::istringstream lines(docs);
    std::map<std::string, std::set<std::string>> help;
    std::string line;
    std::string command;
    std::string usage;
    std::size_t checked = 0;
    const auto check = [&] {
        if (command.empty()) return;
        if (help.count(command) == 0) help[command] = usage_help_options(command);
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
