// Validation of one kernel entry of a registry document.
#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdint>
#include <string_view>

#include "kernhub/error.hpp"
#include "registry/parse.hpp"

namespace kernhub::registry::detail {

using nlohmann::json;

namespace {

// A function-local static: a failed allocation reaches the caller instead of
// ending the process during static initialisation.
const std::vector<std::string>& entry_fields() {
    static const std::vector<std::string> fields = {"repo_id", "revision", "version",   "symbol",
                                                    "file",    "op",       "repo_type", "signature"};
    return fields;
}

bool is_control(char c) {
    auto byte = static_cast<unsigned char>(c);
    return byte < 0x20 || byte == 0x7f;
}

bool is_control_or_space(char c) {
    return c == ' ' || is_control(c);
}

// Names the source and the entry in every error about one kernel.
class EntryContext {
public:
    EntryContext(const std::string& name, const std::string& source) : m_name(name), m_source(source) {}

    [[noreturn]] void fail_entry(const std::string& problem) const {
        fail(m_source, "kernel " + in_quotes(m_name) + ": " + problem);
    }
    [[noreturn]] void fail_field(const std::string& field, const std::string& problem) const {
        fail_entry("field " + in_quotes(field) + ": " + problem);
    }

    // The field's string value, "" when absent; present but not a non-empty
    // string is an error.
    std::string optional_string(const json& entry, const std::string& field) const {
        const auto it = entry.find(field);
        if (it == entry.end()) return {};
        if (!it->is_string()) fail_field(field, "must be a string, got " + describe(*it));
        std::string text = it->get<std::string>();
        if (text.empty()) fail_field(field, "must not be empty; remove the field or fill it in");
        return text;
    }

    std::string required_string(const json& entry, const std::string& field, const std::string& example) const {
        if (!entry.contains(field))
            fail_entry("missing required field " + in_quotes(field) + "; add " + in_quotes(field) + ": " + example);
        return optional_string(entry, field);
    }

private:
    const std::string& m_name;
    const std::string& m_source;
};

// The file is looked up inside a variant directory; an absolute path or a
// ".." part would reach outside it, and "." or empty parts would make two
// spellings of one artifact.
std::string file_problem(const std::string& file) {
    if (file.front() == '/') return "must be relative to the variant directory, not start with '/'";
    if (std::any_of(file.begin(), file.end(), [](char c) { return c == '\\' || is_control(c); }))
        return "contains a backslash or control character";
    std::size_t start = 0;
    while (start <= file.size()) {
        std::size_t end = file.find('/', start);
        if (end == std::string::npos) end = file.size();
        const std::string_view part(file.data() + start, end - start);
        if (part.empty()) return "has an empty path part (\"//\" or a trailing '/')";
        if (part == "..") return "must not contain '..' parts";
        if (part == ".") return "must not contain '.' parts";
        start = end + 1;
    }
    return {};
}

std::optional<int> parse_version(const json& value, const EntryContext& context) {
    const std::string example = " (write e.g. \"version\": 1; N selects branch \"vN\")";
    if (!value.is_number_integer())
        context.fail_field("version", "must be a non-negative integer, got " + describe(value) + example);
    if (!value.is_number_unsigned())
        context.fail_field("version", "must not be negative, got " + value.dump() + example);
    const auto number = value.get<std::uint64_t>();
    if (number > static_cast<std::uint64_t>(INT_MAX))
        context.fail_field("version", "is too large, got " + value.dump() + example);
    return static_cast<int>(number);
}

void parse_revision_or_version(const json& entry, const EntryContext& context, KernelSpec& spec) {
    const bool has_revision = entry.contains("revision");
    const bool has_version = entry.contains("version");
    if (has_revision && has_version)
        context.fail_entry(
            "has both \"revision\" and \"version\"; keep only one "
            "(\"version\": N means branch \"vN\")");
    if (!has_revision && !has_version)
        context.fail_entry(
            "missing \"revision\" or \"version\"; add \"version\": N for a "
            "versioned kernel or \"revision\": \"main\" (a branch, tag or commit)");
    if (has_version) {
        spec.version = parse_version(entry.at("version"), context);
        return;
    }
    spec.revision = context.optional_string(entry, "revision");
    const std::string problem = revision_problem(spec.revision);
    if (!problem.empty()) context.fail_field("revision", in_quotes(spec.revision) + " " + problem);
}

std::string parse_symbol(const json& entry, const EntryContext& context) {
    std::string symbol = context.required_string(entry, "symbol", "\"<function or kernel name>\"");
    if (std::any_of(symbol.begin(), symbol.end(), is_control_or_space))
        context.fail_field("symbol", in_quotes(symbol) +
                                         " contains a space or control character; use the exact "
                                         "exported name");
    return symbol;
}

std::string parse_file(const json& entry, const EntryContext& context) {
    std::string file = context.optional_string(entry, "file");
    if (file.empty()) return file;
    const std::string problem = file_problem(file);
    if (!problem.empty())
        context.fail_field("file", in_quotes(file) + " " + problem +
                                       "; name an artifact relative to the variant directory, "
                                       "e.g. \"libvector_add.so\"");
    return file;
}

// A torch op inside the library's namespace: "name" or "name.overload",
// each part a C identifier.
std::string parse_op(const json& entry, const EntryContext& context) {
    std::string op = context.optional_string(entry, "op");
    const auto identifier = [](std::string_view part) {
        return !part.empty() && !(part.front() >= '0' && part.front() <= '9') &&
               std::all_of(part.begin(), part.end(), [](char c) {
                   return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
               });
    };
    const std::size_t dot = op.find('.');
    const std::string_view text(op);
    const bool ok = dot == std::string::npos ? identifier(text)
                                             : identifier(text.substr(0, dot)) && identifier(text.substr(dot + 1));
    if (!op.empty() && !ok)
        context.fail_field("op", in_quotes(op) +
                                     " is not an op name; name the op as its schema does, \"name\" or "
                                     "\"name.overload\"");
    return op;
}

RepoType parse_repo_type(const json& entry, const EntryContext& context) {
    const std::string repo_type = context.optional_string(entry, "repo_type");
    if (repo_type.empty() || repo_type == "kernel") return RepoType::kernel;
    if (repo_type == "model") return RepoType::model;
    context.fail_field("repo_type", "must be \"kernel\" or \"model\", got " + in_quotes(repo_type));
}

// A policy names plain text that is compared byte for byte with what a
// certificate holds: no control characters, and a bounded size.
constexpr std::size_t k_max_policy_identities = 64;
constexpr std::size_t k_max_policy_text = 1024;

std::string policy_text(const json& value, const std::string& field, const EntryContext& context) {
    if (!value.is_string() || value.get_ref<const std::string&>().empty())
        context.fail_field(field, "must be a non-empty string, got " + describe(value));
    const std::string& text = value.get_ref<const std::string&>();
    if (text.size() > k_max_policy_text)
        context.fail_field(field, "is longer than " + std::to_string(k_max_policy_text) + " bytes");
    if (std::any_of(text.begin(), text.end(), is_control_or_space))
        context.fail_field(field, in_quotes(text) + " contains a space or control character");
    return text;
}

// "signature": {"issuer": URL, "identities": [URI, ...], "repository": "org/repo"}.
std::optional<SignaturePolicy> parse_signature(const json& entry, const EntryContext& context) {
    const auto it = entry.find("signature");
    if (it == entry.end()) return std::nullopt;
    const std::string example =
        "; write e.g. \"signature\": {\"issuer\": \"https://token.actions.githubusercontent.com\", "
        "\"identities\": [\"https://github.com/ORG/REPO/.github/workflows/build.yaml@refs/heads/main\"]}";
    if (!it->is_object()) context.fail_field("signature", "must be an object, got " + describe(*it) + example);
    static const std::vector<std::string> fields = {"issuer", "identities", "repository"};
    for (const auto& item : it->items()) {
        if (std::find(fields.begin(), fields.end(), item.key()) == fields.end())
            context.fail_field("signature",
                               "unknown field " + in_quotes(item.key()) + " " + allowed_hint(item.key(), fields));
    }
    SignaturePolicy policy;
    if (!it->contains("issuer")) context.fail_field("signature", "missing \"issuer\"" + example);
    policy.issuer = policy_text(it->at("issuer"), "signature.issuer", context);
    const auto identities = it->find("identities");
    if (identities == it->end() || !identities->is_array() || identities->empty())
        context.fail_field("signature.identities", "must be a non-empty list of certificate identities" + example);
    if (identities->size() > k_max_policy_identities)
        context.fail_field("signature.identities",
                           "has more than " + std::to_string(k_max_policy_identities) + " identities");
    for (const auto& identity : *identities)
        policy.identities.push_back(policy_text(identity, "signature.identities", context));
    if (it->contains("repository"))
        policy.repository = policy_text(it->at("repository"), "signature.repository", context);
    return policy;
}

}  // namespace

KernelSpec parse_entry(const std::string& name, const json& entry, const std::string& source) {
    const EntryContext context(name, source);
    if (!entry.is_object())
        context.fail_entry(
            "must be an object with \"repo_id\", \"symbol\" and \"revision\" or \"version\", "
            "got " +
            describe(entry));
    for (const auto& item : entry.items()) {
        const auto& fields = entry_fields();
        if (std::find(fields.begin(), fields.end(), item.key()) == fields.end())
            context.fail_entry("unknown field " + in_quotes(item.key()) + " " + allowed_hint(item.key(), fields));
    }

    KernelSpec spec;
    spec.name = name;
    spec.source = source;
    spec.repo_id = context.required_string(entry, "repo_id", "\"ORG/NAME\"");
    try {
        validate_repo_id(spec.repo_id);
    } catch (const Error& error) {
        context.fail_field("repo_id", error.plain_message());
    }
    spec.symbol = parse_symbol(entry, context);
    parse_revision_or_version(entry, context, spec);
    spec.file = parse_file(entry, context);
    spec.op = parse_op(entry, context);
    spec.repo_type = parse_repo_type(entry, context);
    spec.signature = parse_signature(entry, context);
    return spec;
}

}  // namespace kernhub::registry::detail
