#include "api/setting_table.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <stdexcept>

#include "api/settings.hpp"
#include "common/text.hpp"

namespace kernhub::api {
namespace {

// The parsers of kh_hub_set's values (capi/setting.cpp caps a value's
// length before it reaches them).
// Registry files or targets per handle; more is a caller's loop gone wrong.
constexpr std::size_t k_max_repeated_values = 256;
// Digits of a byte count: below UINT64_MAX.
constexpr std::size_t k_max_count_digits = 18;
constexpr std::uint64_t k_max_count = 999'999'999'999'999'999ull;

// The words the environment's switches take, any case.
std::optional<bool> parse_bool(const char* key, const char* value) {
    if (*value == '\0') return std::nullopt;
    const std::string word = ascii_lowercase(value);
    if (word == "1" || word == "true" || word == "yes" || word == "on") return true;
    if (word == "0" || word == "false" || word == "no" || word == "off") return false;
    throw Error(ErrorCode::usage, "setting '" + std::string(key) +
                                      "' takes 1, true, yes or on, or 0, false, no or off (or \"\" for the "
                                      "environment's choice), not " +
                                      quoted_name(value));
}

void append(std::vector<std::string>& list, const char* key, const char* value) {
    if (*value == '\0') {
        list.clear();
        return;
    }
    if (list.size() >= k_max_repeated_values) {
        throw Error(ErrorCode::usage, "setting '" + std::string(key) + "' holds at most " +
                                          std::to_string(k_max_repeated_values) +
                                          " values (k_max_repeated_values); set it to \"\" to clear the list");
    }
    list.emplace_back(value);
}

// "a, b" as {"a", "b"}; "" as nullopt (the environment decides). The
// names are checked when the next Client is made from the options.
std::optional<std::vector<std::string>> split_commas(const char* value) {
    if (*value == '\0') return std::nullopt;
    std::vector<std::string> names;
    std::string_view text(value);
    std::size_t begin = 0;
    while (begin <= text.size()) {
        std::size_t end = std::min(text.find(',', begin), text.size());
        names.emplace_back(text.substr(begin, end - begin));
        begin = end + 1;
    }
    return names;
}

// "" -> nullopt (the environment decides), else decimal digits only. The
// range of each is checked with the other settings when the next Client
// is made, with the setting's name.
std::optional<std::uint64_t> parse_count(const char* key, const char* value, std::uint64_t max) {
    if (*value == '\0') return std::nullopt;
    std::uint64_t parsed = 0;
    bool ok = std::strlen(value) <= k_max_count_digits;
    for (const char* c = value; ok && *c != '\0'; ++c) {
        ok = *c >= '0' && *c <= '9';
        parsed = parsed * 10 + static_cast<std::uint64_t>(*c - '0');
    }
    if (!ok || parsed > max) {
        throw Error(ErrorCode::usage, "setting '" + std::string(key) + "' takes a whole number from 0 to " +
                                          std::to_string(max) + " (or \"\" for the environment's choice), not " +
                                          quoted_name(value));
    }
    return parsed;
}

std::optional<int> parse_int(const char* key, const char* value) {
    auto parsed = parse_count(key, value, static_cast<std::uint64_t>(std::numeric_limits<int>::max()));
    if (!parsed) return std::nullopt;
    return static_cast<int>(*parsed);
}

std::optional<std::string> optional_text(const char* value) {
    if (*value == '\0') return std::nullopt;
    return std::string(value);
}

void set_token(Options& options, const char* value) {
    if (*value == '\0') {
        options.token.reset();
    } else if (trim(value).empty()) {
        throw Error(ErrorCode::usage, "the token is only white space; pass \"\" to use HF_TOKEN or the token file");
    } else if (!token_is_well_formed(trim(value))) {
        throw Error(ErrorCode::usage,
                    "the token contains a space, a control character or a non-ASCII byte, which cannot go "
                    "into an HTTP header");
    } else {
        options.token = value;
    }
}

using T = SettingType;

// One row per setting, in three groups. An integer row's min/max/fallback
// are what resolve_settings enforces; the docs show them as they are here.

// Where kernels come from, and what is selected and loaded.
std::vector<SettingSpec> source_rows() {
    return {
        {"endpoint", "KERNHUB_ENDPOINT", "endpoint", T::url, 0, 0, 0, "http://, https:// or file://",
         "HF_ENDPOINT, else https://huggingface.co",
         "the hub kernels come from: scheme://host[:port][/path], no query string or fragment",
         [](Options& o, const char*, const char* v) { o.endpoint = v; }},
        {"cache_dir", "KERNHUB_CACHE", "cache_dir", T::path, 0, 0, 0, "a folder",
         "KERNELS_CACHE, HF_HUB_CACHE, $HF_HOME/hub, $XDG_CACHE_HOME/huggingface/hub, ~/.cache/huggingface/hub",
         "the cache root, in the huggingface_hub layout",
         [](Options& o, const char*, const char* v) { o.cache_dir = v; }},
        {"registries", "KERNHUB_REGISTRY", "registry", T::list, 0, 0, 0,
         "registry files (the variable: separated by ':')", "none",
         "registry files stacked after the project's kernhub.json, in order",
         [](Options& o, const char* k, const char* v) { append(o.registries, k, v); }},
        {"project_dir", "", "project", T::path, 0, 0, 0, "a folder", "the working directory",
         "the folder searched for kernhub.json", [](Options& o, const char*, const char* v) { o.project_dir = v; }},
        {"no_default_registry", "", "", T::flag, 0, 0, 0, "true or false", "false",
         "skip the installed default registry", nullptr},
        {"targets", "", "target", T::list, 0, 0, 0, "variant names", "this host's variant",
         "the variants to use instead of selecting for this host",
         [](Options& o, const char* k, const char* v) { append(o.targets, k, v); }},
        {"host", "", "host", T::text, 0, 0, 0, "a host description: cpu=x86_64,os=linux,cuda=13.0,...", "this machine",
         "select for the described machine instead of this one; not with targets",
         [](Options& o, const char*, const char* v) { o.host = v; }},
        {"offline", "KERNHUB_OFFLINE", "offline", T::flag, 0, 0, 0,
         "1, true, yes, on / 0, false, no, off (the variable: anything else is off)", "HF_HUB_OFFLINE, else off",
         "no network at all: what the cache lacks is exit 6",
         [](Options& o, const char* k, const char* v) { o.offline = parse_bool(k, v); }},
        {"token", "HF_TOKEN", "token", T::text, 0, 0, 0, "visible ASCII", "the file $HF_HOME/token",
         "bearer token, sent only to the endpoint's own scheme, host and port",
         [](Options& o, const char*, const char* v) { set_token(o, v); }},
        {"verify_on_load", "KERNHUB_VERIFY_ON_LOAD", "verify_on_load", T::strict, 0, 0, 0,
         "1, true, yes, on / 0, false, no, off", "off", "re-hash the artifact and load exactly the verified bytes",
         [](Options& o, const char* k, const char* v) { o.verify_on_load = parse_bool(k, v); }},
    };
}

// Bounds on the hub's answers and on archive variants.
std::vector<SettingSpec> bound_rows() {
    return {
        {"retries", "KERNHUB_RETRIES", "retries", T::integer, 0, 10, 3, "", "",
         "retries after the first attempt for 408, 429, 5xx and broken transfers",
         [](Options& o, const char* k, const char* v) { o.retries = parse_int(k, v); }},
        {"max_wait_seconds", "KERNHUB_MAX_WAIT", "max_wait_seconds", T::integer, 0, 86400, 60, "", "",
         "the longest wait in seconds the hub may ask for before a retry; longer fails at once (exit 5)",
         [](Options& o, const char* k, const char* v) { o.max_wait_seconds = parse_int(k, v); }},
        {"max_listing_entries", "KERNHUB_MAX_LISTING_ENTRIES", "max_listing_entries", T::integer, 1, 100'000'000,
         100'000, "", "", "entries one tree listing may have, over all its pages; more is exit 5",
         [](Options& o, const char* k, const char* v) { o.max_listing_entries = parse_int(k, v); }},
        {"max_listing_bytes", "KERNHUB_MAX_LISTING_BYTES", "max_listing_bytes", T::integer, 1024, 512 << 20, 64 << 20,
         "", "", "body bytes one tree listing may have, over all its pages; more is exit 5",
         [](Options& o, const char* k, const char* v) { o.max_listing_bytes = parse_int(k, v); }},
        {"api_timeout_seconds", "KERNHUB_API_TIMEOUT", "api_timeout_seconds", T::integer, 1, 86400, 60, "", "",
         "seconds one API call may take, every attempt and retry wait included; then exit 5",
         [](Options& o, const char* k, const char* v) { o.api_timeout_seconds = parse_int(k, v); }},
        {"min_rate", "KERNHUB_MIN_RATE", "min_rate", T::integer, 0, 100'000'000, 1024, "", "",
         "the lowest average download rate in bytes/s over each window (0: off); slower is cut and retried",
         [](Options& o, const char* k, const char* v) { o.min_rate = parse_int(k, v); }},
        {"min_rate_window_seconds", "KERNHUB_MIN_RATE_WINDOW", "min_rate_window_seconds", T::integer, 1, 3600, 30, "",
         "", "the window of min_rate, in seconds",
         [](Options& o, const char* k, const char* v) { o.min_rate_window_seconds = parse_int(k, v); }},
        {"max_connections", "KERNHUB_MAX_CONNECTIONS", "max_connections", T::integer, 1, 64, 8, "", "",
         "files of a variant transferred at once, and the most downloads one Client runs with one host",
         [](Options& o, const char* k, const char* v) { o.max_connections = parse_int(k, v); }},
        {"ref_ttl_seconds", "KERNHUB_REF_TTL", "ref_ttl", T::integer, 0, 31'536'000, 0, "", "",
         "seconds a branch or tag resolved by this cache is used without asking the hub (0: ask every time)",
         [](Options& o, const char* k, const char* v) { o.ref_ttl_seconds = parse_int(k, v); }},
        {"archive_max_bytes", "KERNHUB_ARCHIVE_MAX_BYTES", "archive_max_bytes", T::bytes, 1, 0, 0, "at least 1",
         "max(512 MiB, 20 x the archive's size)", "file bytes one archive variant may unpack to; more is exit 4",
         [](Options& o, const char* k, const char* v) { o.archive_max_bytes = parse_count(k, v, k_max_count); }},
        {"archive_max_entries", "KERNHUB_ARCHIVE_MAX_ENTRIES", "archive_max_entries", T::integer, 1, 10'000'000,
         100'000, "", "", "entries one archive variant may hold; more is exit 4",
         [](Options& o, const char* k, const char* v) { o.archive_max_entries = parse_int(k, v); }},
        {"archive_max_path", "KERNHUB_ARCHIVE_MAX_PATH", "archive_max_path", T::integer, 1, 4096, 1024, "", "",
         "bytes of one archive entry's path; longer is exit 4",
         [](Options& o, const char* k, const char* v) { o.archive_max_path = parse_int(k, v); }},
    };
}

// Trust, and the runtimes kernels are loaded into.
std::vector<SettingSpec> policy_rows() {
    return {
        {"allowed_orgs", "KERNHUB_ALLOWED_ORGS", "allowed_orgs", T::names, 0, 0, 0,
         "organisation names, separated by commas", "every organisation",
         "the only organisations whose repos may be fetched or loaded (exit 4 for others)",
         [](Options& o, const char*, const char* v) { o.allowed_orgs = split_commas(v); }},
        {"trust_remote_code", "KERNHUB_TRUST_REMOTE_CODE", "trust_remote_code", T::names, 0, 0, 0,
         "1 (every repo), or ORG/REPO ids separated by commas", "none",
         "repos that pass the trusted-publisher check without asking the hub",
         [](Options& o, const char*, const char* v) { o.trust_remote_code = optional_text(v); }},
        {"require_signatures", "KERNHUB_REQUIRE_SIGNATURES", "require_signatures", T::strict, 0, 0, 0,
         "1, true, yes, on / 0, false, no, off", "off",
         "refuse every kernel whose registry entry has no signature policy (exit 4)",
         [](Options& o, const char* k, const char* v) { o.require_signatures = parse_bool(k, v); }},
        {"sigstore_trusted_root", "KERNHUB_SIGSTORE_TRUSTED_ROOT", "sigstore_trusted_root", T::path, 0, 0, 0,
         "a trusted_root.json", "the public-good root built in", "the Sigstore root signatures are checked against",
         [](Options& o, const char*, const char* v) { o.sigstore_trusted_root = v; }},
        {"tvm_ffi_library", "KERNHUB_TVM_FFI_LIBRARY", "tvm_ffi_library", T::path, 0, 0, 0,
         "a path, or a name for the dynamic loader", "searched (the process, the loader's path, Python)",
         "the tvm-ffi runtime to bind for tvm-ffi variants",
         [](Options& o, const char*, const char* v) { o.tvm_ffi_library = v; }},
        {"torch_dir", "KERNHUB_TORCH_DIR", "torch_dir", T::path, 0, 0, 0, "a torch package folder or a LibTorch root",
         "the torch of the Python environments", "the torch that torch variants are selected for",
         [](Options& o, const char*, const char* v) { o.torch_dir = v; }},
        {"backend", "KERNHUB_BACKEND", "backend", T::text, 0, 0, 0, "cpu", "detected",
         "cpu selects CPU variants even where torch or the driver says CUDA",
         [](Options& o, const char*, const char* v) { o.backend = v; }},
        {"local_kernels", "LOCAL_KERNELS", "local_kernels", T::text, 0, 0, 0, "ORG/REPO=PATH[:ORG/REPO=PATH...]",
         "none", "load those repos from local build folders, with no request and no cache write",
         [](Options& o, const char*, const char* v) { o.local_kernels = optional_text(v); }},
        {"", "UNSTABLE_KERNELS_ALL_LATEST", "", T::flag, 0, 0, 0, "1, true, yes, on (anything else is off)", "off",
         "development only, as in kernels: fetch, load and info take every kernel at its highest vN branch, over "
         "its version, revision and lock pins; lock and prewarm refuse to run (exit 2)",
         nullptr},
        {"", "KERNHUB_NO_FLOCK", "", T::flag, 0, 0, 0, "1, true, yes, on (anything else is off)", "off",
         "act as if the cache's filesystem had no working flock", nullptr},
        {"", "KERNHUB_CUDA_DRIVER", "", T::path, 0, 0, 0, "a path, or a name for the dynamic loader", "libcuda.so.1",
         "the CUDA driver library to bind", nullptr},
        {"", "SSL_CERT_FILE", "", T::path, 0, 0, 0, "a PEM file of at most 8 MiB", "the system's",
         "certificate authorities to trust for an HTTPS hub or CDN", nullptr},
    };
}

// The groups in the documentation's order.
std::vector<SettingSpec> make_table() {
    std::vector<SettingSpec> rows = source_rows();
    for (auto* part : {&bound_rows, &policy_rows}) {
        std::vector<SettingSpec> more = part();
        rows.insert(rows.end(), more.begin(), more.end());
    }
    return rows;
}

}  // namespace

const std::vector<SettingSpec>& setting_table() {
    static const std::vector<SettingSpec> table = make_table();
    return table;
}

const SettingSpec& setting_for_field(std::string_view field) {
    for (const SettingSpec& spec : setting_table()) {
        if (!field.empty() && spec.field == field) return spec;
    }
    throw std::logic_error("no setting for the Options field " + std::string(field));
}

const SettingSpec* setting_for_c_key(std::string_view key) {
    for (const SettingSpec& spec : setting_table()) {
        if (!key.empty() && spec.c_key == key) return &spec;
    }
    return nullptr;
}

const SettingSpec* setting_for_env(std::string_view name) {
    for (const SettingSpec& spec : setting_table()) {
        if (!name.empty() && spec.env == name) return &spec;
    }
    return nullptr;
}

std::string setting_range_text(const SettingSpec& spec) {
    if (spec.type == SettingType::integer) return std::to_string(spec.min) + " to " + std::to_string(spec.max);
    return std::string(spec.range);
}

std::string setting_default_text(const SettingSpec& spec) {
    if (spec.type == SettingType::integer) return std::to_string(spec.fallback);
    return std::string(spec.fallback_text);
}

namespace {

std::string upper(std::string_view text) {
    std::string out(text);
    for (char& c : out) {
        if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    }
    return out;
}

// `wanted` against every row's names (`spellings` of it), answered with
// the row's `answer`.
std::string nearest_answer(std::string_view wanted,
                           const std::vector<std::pair<std::string, std::string_view>>& spellings) {
    std::vector<std::string_view> names;
    names.reserve(spellings.size());
    for (const auto& spelling : spellings) names.emplace_back(spelling.first);
    const std::string found = nearest_name(wanted, names);
    for (const auto& spelling : spellings) {
        if (!found.empty() && spelling.first == found) return std::string(spelling.second);
    }
    return {};
}

}  // namespace

std::string nearest_c_key(std::string_view wanted) {
    std::vector<std::pair<std::string, std::string_view>> spellings;
    for (const SettingSpec& spec : setting_table()) {
        if (spec.c_key.empty()) continue;
        spellings.emplace_back(spec.c_key, spec.c_key);
        if (!spec.field.empty()) spellings.emplace_back(spec.field, spec.c_key);
        if (!spec.env.empty()) spellings.emplace_back(spec.env, spec.c_key);
    }
    return nearest_answer(wanted, spellings);
}

std::string nearest_variable(std::string_view wanted) {
    std::vector<std::pair<std::string, std::string_view>> spellings;
    for (const SettingSpec& spec : setting_table()) {
        if (spec.env.empty()) continue;
        spellings.emplace_back(spec.env, spec.env);
        if (!spec.field.empty()) spellings.emplace_back("KERNHUB_" + upper(spec.field), spec.env);
        if (!spec.c_key.empty()) spellings.emplace_back("KERNHUB_" + upper(spec.c_key), spec.env);
    }
    return nearest_answer(wanted, spellings);
}

std::vector<UnknownVariable> unknown_variables(const char* const* environment) {
    constexpr std::string_view k_prefix = "KERNHUB_";
    constexpr std::string_view k_test_prefix = "KERNHUB_TEST_";
    // A process with more variables than this is not one to scan whole.
    constexpr std::size_t k_max_variables = 100'000;
    std::vector<std::string_view> known;
    for (const SettingSpec& spec : setting_table()) {
        if (!spec.env.empty()) known.push_back(spec.env);
    }
    std::vector<UnknownVariable> unknown;
    for (std::size_t i = 0; environment != nullptr && environment[i] != nullptr && i < k_max_variables; ++i) {
        const std::string_view entry(environment[i]);
        const std::string_view name = entry.substr(0, entry.find('='));
        if (name.substr(0, k_prefix.size()) != k_prefix || name.substr(0, k_test_prefix.size()) == k_test_prefix) {
            continue;
        }
        if (std::find(known.begin(), known.end(), name) != known.end()) continue;
        std::string shown(name.substr(0, k_max_quoted_bytes));
        if (name.size() > k_max_quoted_bytes) shown += "...";
        unknown.push_back({std::move(shown), unknown.size() < k_max_named_variables ? nearest_variable(name) : ""});
    }
    return unknown;
}

}  // namespace kernhub::api
