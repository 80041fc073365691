// _ops.py read as Python runs it, as far as a reader that runs nothing can:
// the text is cut into logical lines as Python's tokenizer cuts it (strings,
// comments, brackets, backslash continuations, any of \n, \r\n, \r), and each
// statement that binds the name `ops` is read or refused.
#include <algorithm>
#include <cstring>
#include <optional>
#include <string_view>
#include <vector>

#include "common/text.hpp"
#include "loader/torch_namespace.hpp"

namespace kernhub::loader {

namespace {

std::string_view strip(std::string_view text) {
    const std::size_t first = text.find_first_not_of(" \t\f\r\n");
    if (first == std::string_view::npos) return {};
    const std::size_t last = text.find_last_not_of(" \t\f\r\n");
    return text.substr(first, last - first + 1);
}

bool is_word_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// One logical line: its code with comments dropped and every string
// literal standing as "", whether its first physical line is indented, and
// whether its code holds a byte outside ASCII (Python folds such
// identifiers, "ｏps" is ops, which this reader does not).
struct LogicalLine {
    std::string code;
    bool indented = false;
    bool non_ascii = false;
};

class Tokenizer {
public:
    explicit Tokenizer(std::string_view text) : m_text(text) {}

    std::optional<LogicalLine> next() {
        if (m_at >= m_text.size()) return std::nullopt;
        LogicalLine line;
        line.indented = m_text[m_at] == ' ' || m_text[m_at] == '\t' || m_text[m_at] == '\f';
        int depth = 0;
        while (m_at < m_text.size()) {
            const char c = m_text[m_at];
            if (c == '\n' || c == '\r') {
                skip_newline();
                if (depth == 0) return line;
                line.code += ' ';
                continue;
            }
            if (c == '\\' && m_at + 1 < m_text.size() && (m_text[m_at + 1] == '\n' || m_text[m_at + 1] == '\r')) {
                ++m_at;
                skip_newline();
                line.code += ' ';
                continue;
            }
            if (c == '#') {
                while (m_at < m_text.size() && m_text[m_at] != '\n' && m_text[m_at] != '\r') ++m_at;
                continue;
            }
            if (c == '\'' || c == '"') {
                skip_string();
                line.code += "\"\"";
                continue;
            }
            if (c == '(' || c == '[' || c == '{') ++depth;
            if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
            if (static_cast<unsigned char>(c) >= 0x80) line.non_ascii = true;
            line.code += c;
            ++m_at;
        }
        return line;
    }

private:
    void skip_newline() {
        if (m_text[m_at] == '\r' && m_at + 1 < m_text.size() && m_text[m_at + 1] == '\n') ++m_at;
        ++m_at;
    }

    // A string literal from its opening quote: a triple-quoted one runs to
    // its closing triple, a single-quoted one to its quote or an unescaped
    // line end (a backslash before the line end continues it).
    void skip_string() {
        const char quote = m_text[m_at];
        const bool triple = m_text.compare(m_at, 3, std::string(3, quote)) == 0;
        m_at += triple ? 3 : 1;
        while (m_at < m_text.size()) {
            const char c = m_text[m_at];
            if (c == '\\') {
                // The escaped character; \r\n is one line end.
                m_at += m_text.compare(m_at + 1, 2, "\r\n") == 0 ? 3 : 2;
                continue;
            }
            if (!triple && (c == '\n' || c == '\r')) return;
            if (c == quote && (!triple || m_text.compare(m_at, 3, std::string(3, quote)) == 0)) {
                m_at += triple ? 3 : 1;
                return;
            }
            ++m_at;
        }
    }

    std::string_view m_text;
    std::size_t m_at = 0;
};

// The parts of `code` between the top-level occurrences of `separator`
// (';' between statements, '=' between assignment targets: "==", "!=",
// "<=", ">=", ":=" and augmented operators are no separator).
std::vector<std::string_view> split_top_level(std::string_view code, char separator) {
    std::vector<std::string_view> out;
    int depth = 0;
    std::size_t start = 0;
    for (std::size_t i = 0; i < code.size(); ++i) {
        const char c = code[i];
        if (c == '(' || c == '[' || c == '{') ++depth;
        if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
        if (c != separator || depth != 0) continue;
        if (separator == '=') {
            const char before = i > 0 ? code[i - 1] : ' ';
            const char after = i + 1 < code.size() ? code[i + 1] : ' ';
            if (after == '=' || std::strchr("=!<>:+-*/%&|^@", before) != nullptr) {
                if (after == '=') ++i;
                continue;
            }
        }
        out.push_back(code.substr(start, i - start));
        start = i + 1;
    }
    out.push_back(code.substr(start));
    return out;
}

// Whether `text` names `ops` as a binding would: the word ops, not an
// attribute (x.ops) and not used through (ops.x, ops[...], ops(...)).
bool names_ops(std::string_view text) {
    for (std::size_t at = text.find("ops"); at != std::string_view::npos; at = text.find("ops", at + 1)) {
        if (at > 0 && (is_word_char(text[at - 1]) || text[at - 1] == '.')) continue;
        std::size_t after = at + 3;
        if (after < text.size() && is_word_char(text[after])) continue;
        while (after < text.size() && text[after] == ' ') ++after;
        if (after < text.size() && std::strchr(".[(", text[after]) != nullptr) continue;
        return true;
    }
    return false;
}

bool starts_with_word(std::string_view text, std::string_view word) {
    return text.substr(0, word.size()) == word && (text.size() == word.size() || !is_word_char(text[word.size()]));
}

// The header and body of a compound statement ("if x: ops = ..."); nullopt
// for any other statement.
struct Compound {
    std::string_view header, body;
};
std::optional<Compound> compound(std::string_view statement) {
    static const char* const keywords[] = {"if",     "elif",    "else", "for",   "while", "with",  "try",
                                           "except", "finally", "def",  "class", "async", "match", "case"};
    statement = strip(statement);
    if (!statement.empty() && statement[0] == '@') return Compound{statement, {}};  // a decorator
    for (const char* keyword : keywords) {
        if (!starts_with_word(statement, keyword)) continue;
        int depth = 0;
        for (std::size_t i = std::strlen(keyword); i < statement.size(); ++i) {
            const char c = statement[i];
            if (c == '(' || c == '[' || c == '{') ++depth;
            if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
            if (c == ':' && depth == 0 && (i + 1 >= statement.size() || statement[i + 1] != '=')) {
                return Compound{statement.substr(0, i), statement.substr(i + 1)};
            }
        }
        return Compound{statement, {}};
    }
    return std::nullopt;
}

constexpr const char* k_in_block =
    "assigns ops inside a block, which kernhub does not run; assign it once at the top level";
constexpr const char* k_other_binding =
    "binds ops in a form kernhub does not read (a tuple, starred or chained target, :=, an import, for, with, def, "
    "class, del or an augmented assignment); assign it once as ops = torch.ops.<namespace>";

// What one top-level `ops = <value>` says.
OpsPy assigned(std::string_view value) {
    const std::string_view prefix = "torch.ops.";
    value = strip(value);
    if (value.substr(0, prefix.size()) != prefix) return {{}, "assigns ops something other than torch.ops.<namespace>"};
    const std::string_view name = strip(value.substr(prefix.size()));
    if (name.size() > k_max_op_name || !is_identifier(name)) {
        return {{}, "assigns ops torch.ops." + quoted_name(name) + ", which is no namespace name"};
    }
    if (name.size() >= 4 && name.substr(0, 2) == "__" && name.substr(name.size() - 2) == "__") {
        return {{}, "assigns ops torch.ops." + std::string(name) + ", an attribute of torch.ops, not a namespace"};
    }
    return {std::string(name), {}};
}

// What one simple statement does to `ops`: nullopt when it binds it not.
std::optional<OpsPy> simple_statement(std::string_view statement) {
    statement = strip(statement);
    if (!names_ops(statement)) return std::nullopt;
    for (const char* binder : {"import", "from", "del", "global", "nonlocal"}) {
        if (starts_with_word(statement, binder)) return OpsPy{{}, k_other_binding};
    }
    if (statement.find(":=") != std::string_view::npos) return OpsPy{{}, k_other_binding};
    const std::vector<std::string_view> parts = split_top_level(statement, '=');
    if (parts.size() < 2) {
        // Not an assignment; an augmented one ("ops += x") rebinds too.
        const std::size_t at = statement.find("ops");
        const std::string_view rest = strip(statement.substr(at + 3));
        if (rest.size() >= 2 && rest[1] == '=' && std::strchr("+-*/%&|^@<>", rest[0]) != nullptr) {
            return OpsPy{{}, k_other_binding};
        }
        return std::nullopt;
    }
    std::optional<OpsPy> out;
    for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
        std::string_view target = strip(parts[i]);
        if (const std::size_t colon = target.find(':'); colon != std::string_view::npos && i == 0) {
            target = strip(target.substr(0, colon));  // an annotated assignment
        }
        if (target == "ops" && parts.size() == 2) return assigned(parts.back());
        if (names_ops(target)) out = OpsPy{{}, k_other_binding};
    }
    return out;
}

// Whether a compound statement's header binds ops: def ops, class ops,
// for ops in, with ... as ops, except ... as ops, case ops. A condition
// (if, elif, while, match) only reads it.
bool binds_in_header(std::string_view header) {
    for (const char* reader : {"if", "elif", "while", "match", "else", "try", "finally"}) {
        if (starts_with_word(header, reader)) return false;
    }
    if (starts_with_word(header, "async")) header = strip(header.substr(5));
    for (const char* definer : {"def", "class"}) {
        if (starts_with_word(header, definer)) {
            const std::string_view name = strip(header.substr(std::strlen(definer)));
            return starts_with_word(name, "ops");
        }
    }
    return names_ops(header);
}

}  // namespace

OpsPy read_ops_py(const std::string& text) {
    OpsPy out;
    bool unreadable = false;
    Tokenizer tokenizer(text);
    while (std::optional<LogicalLine> line = tokenizer.next()) {
        if (line->non_ascii) unreadable = true;
        const std::string_view code = line->code;
        if (const std::optional<Compound> block = compound(code)) {
            // A header that binds ops (for ops in, with x as ops, def ops),
            // or a body that assigns it, which runs only sometimes.
            if (binds_in_header(strip(block->header))) out = {{}, k_other_binding};
            for (const std::string_view inner : split_top_level(block->body, ';')) {
                if (simple_statement(inner)) out = {{}, k_in_block};
            }
            continue;
        }
        for (const std::string_view statement : split_top_level(code, ';')) {
            if (std::optional<OpsPy> found = simple_statement(statement)) {
                out = line->indented ? OpsPy{{}, k_in_block} : std::move(*found);
            }
        }
    }
    if (unreadable) {
        return {{},
                "holds code outside ASCII, whose names Python folds (a fullwidth letter is a plain one) and kernhub "
                "does not"};
    }
    return out;
}

}  // namespace kernhub::loader
