// kh_hub_set's keys and values (include/kernhub/kernhub.h): parsed,
// bounded, and applied to kernhub::Options.
#include "capi/setting.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/settings.hpp"
#include "common/text.hpp"

namespace kernhub::capi {
namespace {

// A setting value is a path, a URL, a token or a variant name: 4096 bytes
// (PATH_MAX on Linux) holds any of them.
constexpr std::size_t k_max_setting_bytes = 4096;
// Registry files or targets per handle; more is a caller's loop gone wrong.
constexpr std::size_t k_max_repeated_values = 256;

constexpr int k_usage = static_cast<int>(ErrorCode::usage);

// The boolean settings: "" -> the environment decides (nullopt).
std::optional<bool> parse_bool(const char* key, const char* value) {
    if (*value == '\0') return std::nullopt;
    if (std::strcmp(value, "1") == 0 || std::strcmp(value, "true") == 0) return true;
    if (std::strcmp(value, "0") == 0 || std::strcmp(value, "false") == 0) return false;
    throw Refusal{k_usage, "setting '" + std::string(key) +
                               "' takes \"1\", \"0\", \"true\" or \"false\" (or \"\" for the " +
                               "environment's choice), not " + quoted_name(value)};
}

void append(std::vector<std::string>& list, const char* key, const char* value) {
    if (*value == '\0') {
        list.clear();
        return;
    }
    if (list.size() >= k_max_repeated_values) {
        throw Refusal{k_usage, "setting '" + std::string(key) + "' holds at most " +
                                   std::to_string(k_max_repeated_values) +
                                   " values (k_max_repeated_values); set it to \"\" to clear the list"};
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

// The numeric settings: "" -> nullopt (the environment decides), else
// decimal digits only. The range of each is checked with the other
// settings when the next Client is made (kh_prewarm returns 2).
std::optional<std::uint64_t> parse_count(const char* key, const char* value, std::uint64_t max) {
    if (*value == '\0') return std::nullopt;
    constexpr std::size_t k_max_digits = 18;  // below UINT64_MAX
    std::uint64_t parsed = 0;
    bool ok = std::strlen(value) <= k_max_digits;
    for (const char* c = value; ok && *c != '\0'; ++c) {
        ok = *c >= '0' && *c <= '9';
        parsed = parsed * 10 + static_cast<std::uint64_t>(*c - '0');
    }
    if (!ok || parsed > max) {
        throw Refusal{k_usage, "setting '" + std::string(key) + "' takes a whole number from 0 to " +
                                   std::to_string(max) + " (or \"\" for the environment's choice), not " +
                                   quoted_name(value)};
    }
    return parsed;
}

std::optional<int> parse_int(const char* key, const char* value) {
    auto parsed = parse_count(key, value, static_cast<std::uint64_t>(std::numeric_limits<int>::max()));
    if (!parsed) return std::nullopt;
    return static_cast<int>(*parsed);
}

// "" -> nullopt (the environment decides), else the text.
std::optional<std::string> optional_text(const char* value) {
    if (*value == '\0') return std::nullopt;
    return std::string(value);
}

void set_token(Options& options, const char* value) {
    if (*value == '\0') {
        options.token.reset();
    } else if (trim(value).empty()) {
        throw Refusal{k_usage, "the token is only white space; pass \"\" to use HF_TOKEN or the token file"};
    } else if (!api::token_is_well_formed(trim(value))) {
        throw Refusal{k_usage,
                      "the token contains a space, a control character or a non-ASCII byte, which cannot go "
                      "into an HTTP header"};
    } else {
        options.token = value;
    }
}

// One key of kh_hub_set and how it changes Options.
struct SettingRule {
    const char* key;
    void (*apply)(Options& options, const char* key, const char* value);
};

// In the order the unknown-setting message lists them.
constexpr SettingRule k_rules[] = {
    {"endpoint", [](Options& o, const char*, const char* v) { o.endpoint = v; }},
    {"cache_dir", [](Options& o, const char*, const char* v) { o.cache_dir = v; }},
    {"registry", [](Options& o, const char* k, const char* v) { append(o.registries, k, v); }},
    {"project", [](Options& o, const char*, const char* v) { o.project_dir = v; }},
    {"offline", [](Options& o, const char* k, const char* v) { o.offline = parse_bool(k, v); }},
    {"target", [](Options& o, const char* k, const char* v) { append(o.targets, k, v); }},
    {"token", [](Options& o, const char*, const char* v) { set_token(o, v); }},
    {"verify_on_load", [](Options& o, const char* k, const char* v) { o.verify_on_load = parse_bool(k, v); }},
    {"allowed_orgs", [](Options& o, const char*, const char* v) { o.allowed_orgs = split_commas(v); }},
    {"require_signatures", [](Options& o, const char* k, const char* v) { o.require_signatures = parse_bool(k, v); }},
    {"sigstore_trusted_root", [](Options& o, const char*, const char* v) { o.sigstore_trusted_root = v; }},
    {"tvm_ffi_library", [](Options& o, const char*, const char* v) { o.tvm_ffi_library = v; }},
    {"torch_dir", [](Options& o, const char*, const char* v) { o.torch_dir = v; }},
    {"backend", [](Options& o, const char*, const char* v) { o.backend = v; }},
    {"local_kernels", [](Options& o, const char*, const char* v) { o.local_kernels = optional_text(v); }},
    {"trust_remote_code", [](Options& o, const char*, const char* v) { o.trust_remote_code = optional_text(v); }},
    {"host", [](Options& o, const char*, const char* v) { o.host = v; }},
    {"retries", [](Options& o, const char* k, const char* v) { o.retries = parse_int(k, v); }},
    {"max_wait_seconds", [](Options& o, const char* k, const char* v) { o.max_wait_seconds = parse_int(k, v); }},
    {"max_listing_entries", [](Options& o, const char* k, const char* v) { o.max_listing_entries = parse_int(k, v); }},
    {"max_listing_bytes", [](Options& o, const char* k, const char* v) { o.max_listing_bytes = parse_int(k, v); }},
    {"api_timeout_seconds", [](Options& o, const char* k, const char* v) { o.api_timeout_seconds = parse_int(k, v); }},
    {"min_rate", [](Options& o, const char* k, const char* v) { o.min_rate = parse_int(k, v); }},
    {"min_rate_window_seconds",
     [](Options& o, const char* k, const char* v) { o.min_rate_window_seconds = parse_int(k, v); }},
    {"max_connections", [](Options& o, const char* k, const char* v) { o.max_connections = parse_int(k, v); }},
    {"ref_ttl", [](Options& o, const char* k, const char* v) { o.ref_ttl_seconds = parse_int(k, v); }},
    {"archive_max_bytes",
     [](Options& o, const char* k, const char* v) {
         o.archive_max_bytes = parse_count(k, v, 999'999'999'999'999'999ull);  // 18 digits
     }},
    {"archive_max_entries", [](Options& o, const char* k, const char* v) { o.archive_max_entries = parse_int(k, v); }},
    {"archive_max_path", [](Options& o, const char* k, const char* v) { o.archive_max_path = parse_int(k, v); }},
};

}  // namespace

void apply_setting(Options& options, const char* key, const char* value) {
    if (strnlen(value, k_max_setting_bytes + 1) > k_max_setting_bytes) {
        throw Refusal{k_usage, "the value of setting " + quoted_name(key) + " is longer than " +
                                   std::to_string(k_max_setting_bytes) + " bytes (k_max_setting_bytes)"};
    }
    const std::string_view wanted(key);
    std::string known;
    for (const SettingRule& rule : k_rules) {
        if (wanted == rule.key) return rule.apply(options, key, value);
        known += (known.empty() ? "" : ", ") + std::string(rule.key);
    }
    throw Refusal{k_usage, "unknown setting " + quoted_name(key) + "; the settings are " + known};
}

}  // namespace kernhub::capi
