// The op namespace of a torch variant: _ops.py read as Python reads it,
// and checked against the library's bytes.
#include "loader/torch_namespace.hpp"

#include <algorithm>
#include <cstring>
#include <functional>
#include <string_view>
#include <vector>

#include "common/join.hpp"
#include "common/text.hpp"
#include "elf/elf_binding.hpp"
#include "kernhub/error.hpp"

namespace kernhub::loader {

namespace {

std::string_view strip(std::string_view text) {
    const std::size_t first = text.find_first_not_of(" \t\f\r");
    if (first == std::string_view::npos) return {};
    const std::size_t last = text.find_last_not_of(" \t\f\r");
    return text.substr(first, last - first + 1);
}

// One physical line as the tokenizer leaves it: its code without comments
// and strings' insides, and whether it starts a new statement at column 0.
struct Line {
    std::string code;
    bool statement = false;  // not inside brackets, a string or a continued line
    bool indented = false;
};

// Python's lexical state across lines: an open triple-quoted string, open
// brackets, a backslash continuation. Enough to tell a statement from text
// inside a string or an expression.
class Lines {
public:
    Line next(std::string_view line) {
        Line out;
        out.statement = m_triple == 0 && m_depth == 0 && !m_continued;
        out.indented = !line.empty() && (line[0] == ' ' || line[0] == '\t');
        m_continued = false;
        std::size_t i = 0;
        while (i < line.size()) {
            if (m_triple != 0) {
                i = close_triple(line, i);
                continue;
            }
            const char c = line[i];
            if (c == '#') break;
            if (c == '\'' || c == '"') {
                i = skip_string(line, i, out);
                continue;
            }
            if (c == '(' || c == '[' || c == '{') ++m_depth;
            if ((c == ')' || c == ']' || c == '}') && m_depth > 0) --m_depth;
            if (c == '\\' && i + 1 == line.size()) m_continued = true;
            out.code += c;
            ++i;
        }
        return out;
    }

private:
    std::size_t close_triple(std::string_view line, std::size_t i) {
        for (; i < line.size(); ++i) {
            if (line[i] == '\\') {
                ++i;
                continue;
            }
            if (line.compare(i, 3, std::string(3, m_triple)) == 0) {
                m_triple = 0;
                return i + 3;
            }
        }
        return i;
    }

    // A string literal in the code stands as "" there.
    std::size_t skip_string(std::string_view line, std::size_t i, Line& out) {
        const char quote = line[i];
        out.code += "\"\"";
        if (line.compare(i, 3, std::string(3, quote)) == 0) {
            m_triple = quote;
            return close_triple(line, i + 3);
        }
        for (++i; i < line.size(); ++i) {
            if (line[i] == '\\') {
                ++i;
            } else if (line[i] == quote) {
                return i + 1;
            }
        }
        return i;
    }

    char m_triple = 0;
    int m_depth = 0;
    bool m_continued = false;
};

// The right-hand side when `code` assigns `ops` ("ops = x", "ops: T = x";
// not "ops == x").
std::optional<std::string_view> ops_assignment(std::string_view code) {
    code = strip(code);
    if (code.substr(0, 3) != "ops") return std::nullopt;
    std::string_view rest = strip(code.substr(3));
    if (!rest.empty() && rest[0] == ':') {
        const std::size_t equals = rest.find('=');
        if (equals == std::string_view::npos) return std::nullopt;  // an annotation alone assigns nothing
        rest = rest.substr(equals);
    }
    if (rest.empty() || rest[0] != '=' || (rest.size() > 1 && rest[1] == '=')) return std::nullopt;
    return strip(rest.substr(1));
}

// The simple statements of one logical line: split at each ';' outside
// brackets (strings are already blanked).
std::vector<std::string_view> simple_statements(std::string_view code) {
    std::vector<std::string_view> out;
    int depth = 0;
    std::size_t start = 0;
    for (std::size_t i = 0; i <= code.size(); ++i) {
        const char c = i < code.size() ? code[i] : ';';
        if (c == '(' || c == '[' || c == '{') ++depth;
        if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
        if (c == ';' && depth == 0) {
            out.push_back(code.substr(start, i - start));
            start = i + 1;
        }
    }
    return out;
}

// The body of a one-line compound statement ("if x: ops = ..."): what
// follows its header's ':', which runs only sometimes; nullopt for any
// other statement.
std::optional<std::string_view> compound_body(std::string_view statement) {
    static const char* const keywords[] = {"if",  "elif",   "else",    "for", "while", "with",
                                           "try", "except", "finally", "def", "class", "async"};
    statement = strip(statement);
    for (const char* keyword : keywords) {
        const std::size_t length = std::strlen(keyword);
        if (statement.substr(0, length) != keyword ||
            (statement.size() > length && is_identifier(statement.substr(length, 1)))) {
            continue;
        }
        int depth = 0;
        for (std::size_t i = length; i < statement.size(); ++i) {
            const char c = statement[i];
            if (c == '(' || c == '[' || c == '{') ++depth;
            if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
            if (c == ':' && depth == 0) return statement.substr(i + 1);
        }
        return std::string_view();
    }
    return std::nullopt;
}

std::string names_of(const std::set<std::string>& names) {
    std::vector<std::string> quoted;
    quoted.reserve(names.size() + 1);
    for (const std::string& name : names) quoted.push_back(quoted_name(name));
    if (quoted.size() > 8) {
        const std::size_t more = quoted.size() - 8;
        quoted.resize(8);
        quoted.push_back(std::to_string(more) + " more");
    }
    return join(quoted);
}

std::string claim_words(const NamespaceClaim& claim) {
    return claim.from_ops_py ? "its _ops.py says the namespace is " + quoted_name(claim.name)
                             : "it has no _ops.py, and its file name says the namespace is " + quoted_name(claim.name);
}

}  // namespace

bool names_string(const std::uint8_t* data, std::size_t size, const std::string& file, const std::string& name) {
    const std::string needle = std::string(1, '\0') + name + std::string(1, '\0');
    const std::boyer_moore_horspool_searcher searcher(needle.begin(), needle.end());
    bool found = false;
    elf::for_each_read_only_section(data, size, file, [&](const std::uint8_t* bytes, std::size_t length) {
        const char* begin = reinterpret_cast<const char*>(bytes);
        const std::string_view block(begin, length);
        if (found || block.substr(0, name.size() + 1) == needle.substr(1)) {
            found = true;
            return;
        }
        found = std::search(begin, begin + length, searcher) != begin + length;
    });
    return found;
}

namespace {

// What one top-level assignment `ops = <value>` says.
OpsPy assigned(std::string_view value) {
    const std::string_view prefix = "torch.ops.";
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

constexpr const char* k_in_block =
    "assigns ops inside a block, which kernhub does not run; assign it once at the top level";

}  // namespace

OpsPy read_ops_py(const std::string& text) {
    OpsPy out;
    Lines lines;
    std::size_t start = 0;
    while (start <= text.size()) {
        std::size_t end = text.find('\n', start);
        if (end == std::string::npos) end = text.size();
        const Line line = lines.next(std::string_view(text).substr(start, end - start));
        start = end + 1;
        if (!line.statement) continue;
        // A compound header takes the rest of its line as its body
        // ("else: x = 1; ops = ..." assigns in the block).
        if (const std::optional<std::string_view> body = compound_body(line.code)) {
            for (const std::string_view inner : simple_statements(*body)) {
                if (ops_assignment(inner)) out = {{}, k_in_block};
            }
            continue;
        }
        for (const std::string_view statement : simple_statements(line.code)) {
            const std::optional<std::string_view> value = ops_assignment(statement);
            if (!value) continue;
            out = line.indented ? OpsPy{{}, k_in_block} : assigned(*value);
        }
    }
    return out;
}

TorchNamespace choose_namespace(const TorchOpListing& listing, const NamespaceClaim& claim, const std::uint8_t* data,
                                std::size_t size, const std::string& file) {
    const std::set<std::string>& defined = listing.defined_namespaces;
    if (!defined.empty()) {
        if (defined.count(claim.name) != 0) return {claim.name, defined};
        if (!claim.from_ops_py && defined.size() == 1) return {*defined.begin(), defined};
        throw Error(ErrorCode::verification,
                    "the torch op library " + file + " registers the op namespace " + names_of(defined) +
                        " (its symbols say so), and " + claim_words(claim) +
                        (claim.from_ops_py ? "" : "; with several, kernhub cannot tell which holds its ops") +
                        "; the publisher must make the two agree");
    }
    const bool op_name = std::binary_search(listing.ops.begin(), listing.ops.end(), claim.name);
    const bool held = !op_name && (listing.names.count(claim.name) != 0 ||
                                   (!listing.names_complete && names_string(data, size, file, claim.name)));
    if (held) return {claim.name, {claim.name}};
    throw Error(ErrorCode::verification,
                "the torch op library " + file + " does not name the op namespace " + quoted_name(claim.name) +
                    (op_name ? " (that is one of its ops)" : "") + ", and " + claim_words(claim) +
                    "; its bytes keep no TORCH_LIBRARY symbol to say which namespace it registers" +
                    (claim.from_ops_py ? "; the publisher must fix _ops.py or the library"
                                       : "; the library was renamed, or needs its _ops.py beside it"));
}

}  // namespace kernhub::loader
