#include "registry/parse.hpp"

#include <algorithm>
#include <optional>
#include <unordered_set>

#include "common/text.hpp"
#include "kernhub/error.hpp"

namespace kernhub::registry::detail {

using nlohmann::json;

namespace {

constexpr int k_format = 1;
constexpr std::size_t k_max_name_length = 128;
constexpr std::size_t k_max_described_length = 40;

// nlohmann::json keeps the last of two equal keys without a word. In a
// registry that hides a kernel defined twice (a copy-paste slip), so the
// keys of the open objects are kept while the document is built, and the
// first duplicate is recorded. (nlohmann's callback parser could do this,
// but it rescans a parent object each time a child object closes:
// quadratic in the number of kernels.)
// Where the text stopped being JSON and nlohmann's words for it.
struct SyntaxError {
    std::size_t byte;  // 1-based, as nlohmann counts
    std::string what;
};

constexpr std::size_t k_max_registry_depth = 32;

class DuplicateKeyFinder {
public:
    bool null() { return true; }
    bool boolean(bool) { return true; }
    bool number_integer(json::number_integer_t) { return true; }
    bool number_unsigned(json::number_unsigned_t) { return true; }
    bool number_float(json::number_float_t, const std::string&) { return true; }
    bool string(std::string&) { return true; }
    bool binary(json::binary_t&) { return true; }
    bool start_object(std::size_t) { return enter(true); }
    bool start_array(std::size_t) { return enter(false); }
    bool end_object() {
        m_frames.pop_back();
        return true;
    }
    bool end_array() {
        m_frames.pop_back();
        return true;
    }
    bool key(std::string& key) {
        Frame& frame = m_frames.back();
        frame.current_key = key;
        if (!frame.keys.insert(key).second && m_problem.empty()) m_problem = describe_duplicate(key);
        return true;
    }
    bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& error) {
        // A parse_error knows its byte; others (a number too large for a
        // double: out_of_range) come at the position the lexer reached.
        const auto* parse = dynamic_cast<const json::parse_error*>(&error);
        m_syntax = SyntaxError{parse != nullptr ? parse->byte : position, error.what()};
        return false;
    }

    const std::string& problem() const { return m_problem; }
    bool too_deep() const { return m_too_deep; }
    const std::optional<SyntaxError>& syntax_error() const { return m_syntax; }

private:
    // A registry is three levels deep; a deeper document stops parsing
    // before it costs memory (each level is a frame here and a node there).
    bool enter(bool is_object) {
        if (m_frames.size() >= k_max_registry_depth) {
            m_too_deep = true;
            return false;
        }
        m_frames.push_back({is_object, {}, {}});
        return true;
    }

    struct Frame {
        bool is_object;
        std::unordered_set<std::string> keys;
        std::string current_key;
    };

    std::string describe_duplicate(const std::string& key) const {
        const std::size_t depth = m_frames.size();
        const bool in_kernels = depth >= 2 && m_frames[0].current_key == "kernels";
        if (depth == 1) return "key " + in_quotes(key) + " appears twice at the top level; keep one";
        if (depth == 2 && in_kernels) return "kernel " + in_quotes(key) + " is defined twice in this file; keep one";
        if (depth == 3 && in_kernels && m_frames[1].is_object)
            return "kernel " + in_quotes(m_frames[1].current_key) + ": field " + in_quotes(key) +
                   " appears twice; keep one";
        return "key " + in_quotes(key) + " appears twice in one object; keep one";
    }

    std::vector<Frame> m_frames;
    std::string m_problem;
    std::optional<SyntaxError> m_syntax;
    bool m_too_deep = false;
};

// nlohmann's own text already says what was expected; keep it but lead with
// the position, which is what an editor needs.
std::string describe_parse_error(const std::string& text, const SyntaxError& error) {
    const std::size_t offset = std::min<std::size_t>(error.byte == 0 ? 0 : error.byte - 1, text.size());
    const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<long>(offset), '\n');
    const std::size_t line_start = text.rfind('\n', offset == 0 ? 0 : offset - 1);
    const std::size_t column = line_start == std::string::npos || offset == 0 ? offset + 1 : offset - line_start;
    std::string detail = error.what;
    const std::size_t column_word = detail.find("column ");
    const std::size_t colon = detail.find(": ", column_word == std::string::npos ? 0 : column_word);
    if (colon != std::string::npos) {
        detail = detail.substr(colon + 2);
    } else if (const std::size_t tag_end = detail.find("] ");
               !detail.empty() && detail[0] == '[' && tag_end != std::string::npos) {
        detail = detail.substr(tag_end + 2);  // "[json.exception.out_of_range.406] number overflow ..."
    }
    return "invalid JSON at line " + std::to_string(line) + ", column " + std::to_string(column) + " (byte " +
           std::to_string(error.byte) + "): " + detail + "; fix the JSON syntax there";
}

// nlohmann's DOM builder with the key check beside it: one pass over the
// text builds the document and finds duplicates.
class CheckedDomBuilder {
public:
    explicit CheckedDomBuilder(json& document) : m_dom(document, false) {}

    bool null() { return m_dom.null(); }
    bool boolean(bool value) { return m_dom.boolean(value); }
    bool number_integer(json::number_integer_t value) { return m_dom.number_integer(value); }
    bool number_unsigned(json::number_unsigned_t value) { return m_dom.number_unsigned(value); }
    bool number_float(json::number_float_t value, const std::string& text) { return m_dom.number_float(value, text); }
    bool string(std::string& value) { return m_dom.string(value); }
    bool binary(json::binary_t& value) { return m_dom.binary(value); }
    bool start_object(std::size_t size) { return m_keys.start_object(size) && m_dom.start_object(size); }
    bool start_array(std::size_t size) { return m_keys.start_array(size) && m_dom.start_array(size); }
    bool end_object() { return m_keys.end_object() && m_dom.end_object(); }
    bool end_array() { return m_keys.end_array() && m_dom.end_array(); }
    bool key(std::string& name) { return m_keys.key(name) && m_dom.key(name); }
    bool parse_error(std::size_t position, const std::string& token, const nlohmann::detail::exception& error) {
        return m_keys.parse_error(position, token, error);
    }

    const DuplicateKeyFinder& keys() const { return m_keys; }

private:
    DuplicateKeyFinder m_keys;
    nlohmann::detail::json_sax_dom_parser<json> m_dom;
};

json parse_json(const std::string& text, const std::string& source) {
    json document;
    CheckedDomBuilder builder(document);
    if (!json::sax_parse(text, &builder)) {
        if (builder.keys().too_deep()) {
            fail(source, "nested deeper than " + std::to_string(k_max_registry_depth) +
                             " levels (k_max_registry_depth); a registry is three levels deep");
        }
        if (builder.keys().syntax_error()) fail(source, describe_parse_error(text, *builder.keys().syntax_error()));
        fail(source, "invalid JSON; fix the JSON syntax");
    }
    if (!builder.keys().problem().empty()) fail(source, builder.keys().problem());
    return document;
}

void check_format(const json& document, const std::string& source) {
    const auto format = document.find("format");
    if (format == document.end()) fail(source, "missing field \"format\"; add \"format\": 1 at the top level");
    if (!format->is_number_integer()) fail(source, "field \"format\": must be the integer 1, got " + describe(*format));
    if (*format != k_format)
        fail(source, "field \"format\": unsupported format " + format->dump() +
                         " (this kernhub reads format 1); upgrade kernhub or rewrite the file "
                         "for format 1");
}

void check_top_level_keys(const json& document, const std::string& source) {
    static const std::vector<std::string> allowed = {"format", "kernels", "$schema", "description"};
    for (const auto& [key, value] : document.items()) {
        if (std::find(allowed.begin(), allowed.end(), key) == allowed.end())
            fail(source, "unknown top-level key " + in_quotes(key) + " " + allowed_hint(key, allowed));
        if ((key == "$schema" || key == "description") && !value.is_string())
            fail(source, "field " + in_quotes(key) + ": must be a string, got " + describe(value));
    }
}

void check_name(const std::string& name, const std::string& source) {
    const bool safe_characters = std::all_of(name.begin(), name.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
               c == '-';
    });
    if (!name.empty() && name.size() <= k_max_name_length && safe_characters) return;
    fail(source,
         "kernel " + in_quotes(name) + ": invalid name in \"kernels\"; use 1-128 characters from A-Z a-z 0-9 . _ -");
}

}  // namespace

void fail(const std::string& source, const std::string& problem) {
    throw Error(ErrorCode::usage, "registry " + source + ": " + problem);  // Error keeps it printable
}

std::string in_quotes(const std::string& text) {
    // `replace` keeps invalid UTF-8 (possible in a source label) from throwing.
    return json(text).dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string describe(const json& value) {
    if (value.is_object() || value.is_array() || value.is_null()) return value.type_name();
    std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
    if (text.size() > k_max_described_length) text = text.substr(0, k_max_described_length) + "...";
    return std::string(value.type_name()) + " " + text;
}

std::string allowed_hint(const std::string& key, const std::vector<std::string>& allowed) {
    std::string list;
    std::vector<std::string_view> names;
    for (const auto& candidate : allowed) {
        list += (list.empty() ? "" : ", ") + candidate;
        names.emplace_back(candidate);
    }
    const std::string closest = nearest_name(key, names);
    std::string hint = "(allowed: " + list + ")";
    if (!closest.empty()) hint += "; did you mean " + in_quotes(closest) + "?";
    return hint;
}

std::map<std::string, KernelSpec> parse_document(const std::string& text, const std::string& source) {
    const json document = parse_json(text, source);
    if (!document.is_object())
        fail(source, "must be a JSON object with \"format\" and \"kernels\", got " + describe(document));
    check_format(document, source);
    check_top_level_keys(document, source);
    const auto kernels = document.find("kernels");
    if (kernels == document.end()) fail(source, "missing field \"kernels\"; add \"kernels\": { \"<name>\": {...} }");
    if (!kernels->is_object())
        fail(source, "field \"kernels\": must be an object mapping names to kernels, got " + describe(*kernels));

    std::map<std::string, KernelSpec> entries;
    for (const auto& [name, value] : kernels->items()) {
        check_name(name, source);
        entries.emplace(name, parse_entry(name, value, source));
    }
    return entries;
}

}  // namespace kernhub::registry::detail
