#include "registry/parse.hpp"

#include <algorithm>
#include <optional>

#include "common/strict_json.hpp"
#include "common/text.hpp"
#include "kernhub/error.hpp"

namespace kernhub::registry::detail {

using nlohmann::json;

namespace {

constexpr int k_format = 1;
constexpr std::size_t k_max_name_length = 128;
constexpr std::size_t k_max_described_length = 40;

constexpr std::size_t k_max_registry_depth = 32;

// nlohmann::json keeps the last of two equal keys without a word. In a
// registry that hides a kernel defined twice (a copy-paste slip), so the
// strict reader refuses the first duplicate, and the message says where.
std::string describe_duplicate(const std::vector<strict_json::Step>& path) {
    const std::size_t depth = path.size();
    const std::string& key = path.back().key;
    const bool in_kernels = depth >= 2 && path[0].key == "kernels";
    if (depth == 1) return "key " + in_quotes(key) + " appears twice at the top level; keep one";
    if (depth == 2 && in_kernels) return "kernel " + in_quotes(key) + " is defined twice in this file; keep one";
    if (depth == 3 && in_kernels && path[1].object)
        return "kernel " + in_quotes(path[1].key) + ": field " + in_quotes(key) + " appears twice; keep one";
    return "key " + in_quotes(key) + " appears twice in one object; keep one";
}

json parse_json(const std::string& text, const std::string& source) {
    strict_json::Limits limits;
    // A registry is three levels deep; a deeper document stops parsing
    // before it costs memory.
    limits.max_depth = k_max_registry_depth;
    limits.depth_name = "k_max_registry_depth";
    strict_json::Parsed parsed = strict_json::parse(text, limits);
    if (!parsed.problem) return std::move(parsed.document);
    const strict_json::Problem& problem = *parsed.problem;
    if (problem.kind == strict_json::Problem::Kind::too_deep) {
        fail(source, strict_json::describe(problem, text) + "; a registry is three levels deep");
    }
    if (problem.kind == strict_json::Problem::Kind::duplicate_key) fail(source, describe_duplicate(problem.path));
    fail(source, strict_json::describe(problem, text));
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
