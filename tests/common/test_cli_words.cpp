// No CLI words in library messages: a program that embeds kernhub has no
// `--offline` to pass and no `kernhub lock` to run. The library says what
// to do in words and names the setting or operation in an ErrorHint, which
// each interface names in its own vocabulary (docs/embedding.md,
// "Hints: advice in each interface's words"). This test reads every string
// literal in src/ and fails on one that names a command-line flag or a
// kernhub command.
#include <catch2/catch.hpp>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "support/build_paths.hpp"

namespace fs = std::filesystem;

namespace {

// The kernhub commands (cli/main.cpp); "kernhub cache" covers its group.
const char* const k_commands[] = {"fetch",   "load",   "list",   "info",        "inspect", "lock",
                                  "prewarm", "mirror", "verify", "verify-blob", "cache"};

struct Literal {
    std::size_t line = 0;  // where it starts
    std::string text;      // adjacent literals joined, simple escapes decoded
};

bool is_word_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
}

// The text of a "..." literal starting at `at` (the quote); moves `at` past it.
std::string quoted_text(std::string_view src, std::size_t& at) {
    std::string text;
    for (++at; at < src.size() && src[at] != '"'; ++at) {
        if (src[at] != '\\' || at + 1 >= src.size()) {
            text += src[at];
            continue;
        }
        const char escaped = src[++at];
        text += escaped == 'n' ? '\n' : escaped == 't' ? '\t' : escaped;
    }
    ++at;
    return text;
}

// The text of a raw literal R"d(...)d" whose quote is at `at`; moves `at` past it.
std::string raw_text(std::string_view src, std::size_t& at) {
    const std::size_t open = src.find('(', at);
    const std::string close = ")" + std::string(src.substr(at + 1, open - at - 1)) + "\"";
    const std::size_t end = src.find(close, open);
    std::string text(src.substr(open + 1, end - open - 1));
    at = end + close.size();
    return text;
}

// What a comment or char literal at `at` spans; 0 when none starts there.
std::size_t skipped_length(std::string_view src, std::size_t at) {
    if (src.compare(at, 2, "//") == 0)
        return src.find('\n', at) == std::string_view::npos ? src.size() - at : src.find('\n', at) - at;
    if (src.compare(at, 2, "/*") == 0) return src.find("*/", at + 2) + 2 - at;
    if (src[at] != '\'' || (at > 0 && is_word_char(src[at - 1]))) return 0;  // not a digit separator (1'000)
    std::size_t end = at + 1;
    while (end < src.size() && src[end] != '\'') end += src[end] == '\\' ? 2 : 1;
    return end + 1 - at;
}

std::size_t lines_in(std::string_view text) {
    std::size_t count = 0;
    for (char c : text) count += c == '\n' ? 1 : 0;
    return count;
}

// Every string literal of C++ source `src`, with those separated only by
// white space and comments joined as the compiler joins them.
std::vector<Literal> string_literals(std::string_view src) {
    std::vector<Literal> out;
    std::size_t line = 1;
    bool joins = false;  // the last token was a string literal
    for (std::size_t at = 0; at < src.size();) {
        if (const std::size_t skip = skipped_length(src, at); skip > 0) {
            joins = joins && src[at] == '/';
            line += lines_in(src.substr(at, skip));
            at += skip;
            continue;
        }
        std::size_t word = at;
        while (word < src.size() && is_word_char(src[word])) ++word;
        const std::string_view prefix = src.substr(at, word - at);
        const bool raw = !prefix.empty() && prefix.back() == 'R' && prefix.size() <= 3;
        const bool encoded = prefix == "u8" || prefix == "u" || prefix == "U" || prefix == "L";
        if (word < src.size() && src[word] == '"' && (prefix.empty() || raw || encoded)) {
            std::size_t end = word;
            const std::string text = raw ? raw_text(src, end) : quoted_text(src, end);
            if (joins) {
                out.back().text += text;
            } else {
                out.push_back(Literal{line, text});
            }
            joins = true;
            line += lines_in(src.substr(at, end - at));
            at = end;
            continue;
        }
        if (word > at) {
            joins = false;
            at = word;
            continue;
        }
        if (src[at] == '\n') ++line;
        if (std::isspace(static_cast<unsigned char>(src[at])) == 0) joins = false;
        ++at;
    }
    return out;
}

// The CLI words in `text`: flags ("--offline") and commands ("kernhub lock").
std::vector<std::string> cli_words(const std::string& text) {
    std::vector<std::string> words;
    for (std::size_t at = text.find("--"); at != std::string::npos; at = text.find("--", at + 2)) {
        const bool starts = at == 0 || !(is_word_char(text[at - 1]) || text[at - 1] == '-');
        if (!starts || at + 2 >= text.size() || std::islower(static_cast<unsigned char>(text[at + 2])) == 0) continue;
        std::size_t end = at + 2;
        while (end < text.size() && (is_word_char(text[end]) || text[end] == '-')) ++end;
        words.push_back(text.substr(at, end - at));
    }
    for (const char* command : k_commands) {
        const std::string named = std::string("kernhub ") + command;
        for (std::size_t at = text.find(named); at != std::string::npos; at = text.find(named, at + 1)) {
            const std::size_t end = at + named.size();
            const bool whole = end == text.size() || !(is_word_char(text[end]) || text[end] == '-');
            if (whole && (at == 0 || !is_word_char(text[at - 1]))) words.push_back(named);
        }
    }
    return words;
}

struct Finding {
    std::string where;  // file:line
    std::string literal;
    std::string word;
};

std::vector<Finding> findings_in(const std::string& name, std::string_view src) {
    std::vector<Finding> found;
    for (const Literal& literal : string_literals(src)) {
        for (const std::string& word : cli_words(literal.text)) {
            found.push_back(Finding{name + ":" + std::to_string(literal.line), literal.text, word});
        }
    }
    return found;
}

std::string read_source(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

}  // namespace

TEST_CASE("the CLI-word scanner reads string literals only, and finds flags and commands in them", "[common]") {
    const std::string sample =
        "// run `kernhub lock` in a comment, or --offline\n"
        "/* kernhub fetch,\n   --target */\n"
        "throw Error(code, \"run `kernhub lock`\");\n"
        "f(\"pass \" /* joined */ \"--offline\", '\"', 1'000, \"\\\"--cache-dir\\\"\");\n"
        "g(R\"x(see kernhub list)x\", u8\"kernhub cache prune\");\n"
        "h(\"kernhub locks, lockfile, -----BEGIN, x--y, --9, kernhub list-like, --\");\n";
    const std::vector<Finding> found = findings_in("sample.cpp", sample);
    std::vector<std::string> described;
    for (const Finding& f : found) described.push_back(f.where + " " + f.word + " in \"" + f.literal + "\"");
    CHECK(described == std::vector<std::string>{
                           "sample.cpp:4 kernhub lock in \"run `kernhub lock`\"",
                           "sample.cpp:5 --offline in \"pass --offline\"",
                           "sample.cpp:5 --cache-dir in \"\"--cache-dir\"\"",
                           "sample.cpp:6 kernhub list in \"see kernhub list\"",
                           "sample.cpp:6 kernhub cache in \"kernhub cache prune\"",
                       });
    // A literal in a comment and a char literal holding a quote start nothing.
    CHECK(string_literals("// \"--x\"\nchar q = '\"'; /* \" */").empty());
}

TEST_CASE("no string literal in src/ names a CLI flag or a kernhub command", "[common]") {
    const fs::path root = KERNHUB_SOURCE_DIR;
    std::vector<std::string> offending;
    std::size_t files = 0;
    for (const auto& entry : fs::recursive_directory_iterator(root / "src")) {
        const std::string ext = entry.path().extension().string();
        if (!entry.is_regular_file() || (ext != ".cpp" && ext != ".hpp" && ext != ".h" && ext != ".c")) continue;
        ++files;
        const std::string name = entry.path().lexically_relative(root).generic_string();
        for (const Finding& f : findings_in(name, read_source(entry.path()))) {
            offending.push_back(f.where + ": \"" + f.literal + "\" names " + f.word);
        }
    }
    CHECK(files > 100);
    for (const std::string& line : offending) UNSCOPED_INFO(line);
    CHECK(offending.empty());
}
