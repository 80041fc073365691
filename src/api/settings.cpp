#include "api/settings.hpp"

#include <cerrno>
#include <string_view>

#include "api/setting_table.hpp"
#include "common/hint.hpp"
#include "common/text.hpp"
#include "select/variant.hpp"

namespace kernhub::api {

namespace {

std::optional<std::string> non_empty(const cache::EnvLookup& env, const std::string& name) {
    auto value = env(name);
    if (value && value->empty()) return std::nullopt;
    return value;
}

// The environment variable of an Options field, from the table.
std::string variable(const char* field) {
    return std::string(setting_for_field(field).env);
}

// Larger is not a token file: huggingface_hub's tokens are under 100 bytes.
constexpr std::size_t k_max_token_file_bytes = 4096;

const char* const k_token_malformed =
    " contains a space, a control character or a non-ASCII byte, which cannot go into an HTTP header; make it "
    "hold only the token";

// The token and where it came from; `problem` says why it cannot be used
// (never quoting it). An unreadable token file (another user's, a
// directory, a FIFO) means no token, as for huggingface_hub.
std::string token_from_sources(const Options& options, const cache::EnvLookup& env, std::string& problem) {
    std::string source = "Options::token";
    std::string token;
    if (options.token) {
        token = trim(*options.token);
    } else if (auto value = non_empty(env, "HF_TOKEN")) {
        source = "HF_TOKEN";
        token = trim(*value);
    } else {
        std::filesystem::path home;
        if (auto hf_home = non_empty(env, "HF_HOME")) {
            home = *hf_home;
        } else if (auto xdg = non_empty(env, "XDG_CACHE_HOME")) {
            home = std::filesystem::path(*xdg) / "huggingface";
        } else if (auto user_home = non_empty(env, "HOME")) {
            home = std::filesystem::path(*user_home) / ".cache" / "huggingface";
        } else {
            return {};
        }
        source = (home / "token").string();
        std::string text;
        const cache::ReadStatus read = cache::read_file_into(home / "token", text, k_max_token_file_bytes);
        if (read.error == EFBIG) {
            problem = "the token file " + source + " is larger than " + std::to_string(k_max_token_file_bytes) +
                      " bytes (k_max_token_file_bytes); make it hold only the token";
            return {};
        }
        if (read.error != 0) return {};
        token = trim(text);
    }
    if (!token_is_well_formed(token)) {
        problem = "the token from " + source + k_token_malformed;
        return {};
    }
    return token;
}

std::string range_text(const SettingSpec& spec) {
    return "a whole number from " + std::to_string(spec.min) + " to " + std::to_string(spec.max);
}

// Only plain decimal digits count: std::stoi would take " 3", "3abc" and
// "-1", and clamping would hide a typo such as 99999999999.
std::optional<int> parse_in_range(std::string_view text, const SettingSpec& spec) {
    constexpr std::size_t k_max_digits = 9;  // below INT_MAX, above every range used here
    if (text.empty() || text.size() > k_max_digits) return std::nullopt;
    int value = 0;
    for (char c : text) {
        if (c < '0' || c > '9') return std::nullopt;
        value = value * 10 + (c - '0');
    }
    if (value < spec.min || value > spec.max) return std::nullopt;
    return value;
}

// The option when set, else the variable when set (even to ""), else the
// default; names, range and default from the setting's row of the table.
int resolve_int(const std::optional<int>& option, const char* field, const cache::EnvLookup& env) {
    const SettingSpec& spec = setting_for_field(field);
    if (option) {
        if (*option < spec.min || *option > spec.max) {
            throw Error(ErrorCode::usage, std::string("Options::") + field + " must be " + range_text(spec) + ", not " +
                                              std::to_string(*option));
        }
        return *option;
    }
    const std::string variable(spec.env);
    auto value = env(variable);
    if (!value) return static_cast<int>(spec.fallback);
    if (auto parsed = parse_in_range(*value, spec)) return *parsed;
    constexpr std::size_t k_max_echo = 40;
    std::string shown = value->size() > k_max_echo ? value->substr(0, k_max_echo) + "..." : *value;
    throw Error(ErrorCode::usage, variable + " must be " + range_text(spec) + ", not '" + shown +
                                      "'; fix it or unset it to use " + std::to_string(spec.fallback));
}

// An organisation name as the hub spells them: [A-Za-z0-9._-], at most 96
// bytes, no leading '.' (see validate_repo_id).
bool is_org_name(std::string_view name) {
    constexpr std::size_t k_max_org_bytes = 96;
    if (name.empty() || name.size() > k_max_org_bytes || name.front() == '.') return false;
    for (char c : name) {
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                        c == '_' || c == '.';
        if (!ok) return false;
    }
    return true;
}

// Options::allowed_orgs, else KERNHUB_ALLOWED_ORGS split at commas (white
// space around a name is dropped). Every name must be one the hub could
// hold: a typo must not silently shut out, or let in, an organisation.
std::optional<std::vector<std::string>> resolve_allowed_orgs(const Options& options, const cache::EnvLookup& env) {
    constexpr std::size_t k_max_allowed_orgs = 1024;
    std::vector<std::string> names;
    const char* source = "Options::allowed_orgs";
    if (options.allowed_orgs) {
        for (const auto& name : *options.allowed_orgs) names.push_back(trim(name));
    } else {
        auto value = env(variable("allowed_orgs"));
        // Empty is unset, as for every variable; only white space is a
        // slip that must not silently allow every organisation.
        if (!value || value->empty()) return std::nullopt;
        if (trim(*value).empty()) {
            throw Error(ErrorCode::usage,
                        "KERNHUB_ALLOWED_ORGS holds only white space; list organisations separated by commas, or "
                        "unset it to allow every organisation");
        }
        source = "KERNHUB_ALLOWED_ORGS";
        std::size_t begin = 0;
        while (begin <= value->size()) {
            std::size_t end = value->find(',', begin);
            if (end == std::string::npos) end = value->size();
            names.push_back(trim(std::string_view(*value).substr(begin, end - begin)));
            begin = end + 1;
        }
    }
    if (names.size() > k_max_allowed_orgs) {
        throw Error(ErrorCode::usage, std::string(source) + " names " + std::to_string(names.size()) +
                                          " organisations; at most " + std::to_string(k_max_allowed_orgs) +
                                          " (k_max_allowed_orgs)");
    }
    for (auto& name : names) {
        if (!is_org_name(name)) {
            throw Error(ErrorCode::usage, std::string(source) + " holds " + quoted_name(name) +
                                              ", which is not an organisation name ([A-Za-z0-9._-], not starting "
                                              "with '.'); list names separated by commas");
        }
        name = ascii_lowercase(name);
    }
    return names;
}

// A byte count of at least the row's minimum: the option when set, else
// the variable when set, else 0 (no count given: the row's default rule).
std::uint64_t resolve_bytes(const std::optional<std::uint64_t>& option, const char* field,
                            const cache::EnvLookup& env) {
    const SettingSpec& spec = setting_for_field(field);
    const auto min = static_cast<std::uint64_t>(spec.min);
    if (option) {
        if (*option < min) {
            throw Error(ErrorCode::usage, std::string("Options::") + field + " must be at least " +
                                              std::to_string(min) + " bytes, not " + std::to_string(*option));
        }
        return *option;
    }
    const std::string variable(spec.env);
    auto value = env(variable);
    if (!value) return 0;
    constexpr std::size_t k_max_digits = 18;  // below UINT64_MAX
    std::uint64_t parsed = 0;
    bool ok = !value->empty() && value->size() <= k_max_digits;
    for (char c : *value) {
        if (c < '0' || c > '9') ok = false;
        if (ok) parsed = parsed * 10 + static_cast<std::uint64_t>(c - '0');
    }
    if (!ok || parsed < min) {
        constexpr std::size_t k_max_echo = 40;
        std::string shown = value->size() > k_max_echo ? value->substr(0, k_max_echo) + "..." : *value;
        throw Error(ErrorCode::usage, variable + " must be a whole number of bytes from " + std::to_string(min) +
                                          " to " + std::to_string(999'999'999'999'999'999ull) + ", not '" + shown +
                                          "'; fix it or unset it to use the default");
    }
    return parsed;
}

}  // namespace

namespace {

// Options::trust_remote_code, else KERNHUB_TRUST_REMOTE_CODE: "1" (true,
// yes, on) trusts every repo, "0" (false, no, off) none, else a list of
// repo ids separated by commas.
void resolve_trust(const Options& options, const cache::EnvLookup& env, Settings& settings) {
    constexpr std::size_t k_max_trusted_repos = 1024;
    const char* source = options.trust_remote_code ? "Options::trust_remote_code" : "KERNHUB_TRUST_REMOTE_CODE";
    const std::optional<std::string> value =
        options.trust_remote_code ? options.trust_remote_code : env(variable("trust_remote_code"));
    if (!value) return;
    const std::string lowered = ascii_lowercase(trim(*value));
    if (lowered.empty() || lowered == "0" || lowered == "false" || lowered == "no" || lowered == "off") return;
    if (lowered == "1" || lowered == "true" || lowered == "yes" || lowered == "on") {
        settings.trust_all_repos = true;
        return;
    }
    std::size_t begin = 0;
    while (begin <= value->size()) {
        std::size_t end = value->find(',', begin);
        if (end == std::string::npos) end = value->size();
        const std::string repo = trim(std::string_view(*value).substr(begin, end - begin));
        begin = end + 1;
        if (repo.empty()) continue;
        try {
            validate_repo_id(repo);
        } catch (const Error&) {
            throw Error(ErrorCode::usage,
                        std::string(source) + " names " + quoted_name(repo) +
                            ", which is not a repo id; give 1 to trust every repo, or ORG/REPO ids separated by "
                            "commas",
                        hint::setting("trust_remote_code"));
        }
        if (settings.trusted_repos.size() >= k_max_trusted_repos) {
            throw Error(ErrorCode::usage, std::string(source) + " names more than " +
                                              std::to_string(k_max_trusted_repos) + " repos (k_max_trusted_repos)");
        }
        settings.trusted_repos.push_back(repo);
    }
}

}  // namespace

void check_allowed_org(const Settings& settings, const std::string& repo_id) {
    if (!settings.allowed_orgs) return;
    const std::string org = repo_id.substr(0, repo_id.find('/'));
    const std::string key = ascii_lowercase(org);
    for (const auto& allowed : *settings.allowed_orgs) {
        if (allowed == key) return;
    }
    std::string list;
    for (const auto& allowed : *settings.allowed_orgs) list += (list.empty() ? "" : ", ") + allowed;
    throw Error(ErrorCode::verification,
                "repo " + quoted_name(repo_id) + " belongs to the organisation " + quoted_name(org) +
                    ", which the allow-list does not name (" + (list.empty() ? "it is empty" : list) +
                    "); add it to KERNHUB_ALLOWED_ORGS (or Options::allowed_orgs) if you trust what it publishes");
}

bool token_is_well_formed(std::string_view token) {
    for (char c : token) {
        const auto byte = static_cast<unsigned char>(c);
        if (byte <= 0x20 || byte >= 0x7f) return false;
    }
    return true;
}

bool env_flag(const cache::EnvLookup& env, const std::string& name) {
    auto value = env(name);
    if (!value) return false;
    const std::string v = ascii_lowercase(*value);
    return v == "1" || v == "true" || v == "yes" || v == "on";
}

// A switch whose silent "off" would weaken a check: the values env_flag
// takes for on, "0", "false", "no", "off" or empty for off, and anything
// else a usage error naming it rather than a guess.
bool strict_env_flag(const cache::EnvLookup& env, const std::string& name) {
    auto value = env(name);
    if (!value) return false;
    const std::string v = ascii_lowercase(*value);
    if (v == "1" || v == "true" || v == "yes" || v == "on") return true;
    if (v.empty() || v == "0" || v == "false" || v == "no" || v == "off") return false;
    constexpr std::size_t k_max_echo = 40;
    std::string shown = value->size() > k_max_echo ? value->substr(0, k_max_echo) + "..." : *value;
    throw Error(ErrorCode::usage, name + " must be 1, true, yes or on (or 0, false, no, off), not '" + shown + "'");
}

namespace {

// A switch read as its row's type says: strict (anything but the on and
// off words is refused) or lenient (anything but an on word is off).
bool switch_of(const SettingSpec& spec, const cache::EnvLookup& env) {
    const std::string name(spec.env);
    return spec.type == SettingType::strict ? strict_env_flag(env, name) : env_flag(env, name);
}

// Options::torch_dir, backend and host with their variables. The host
// description itself is parsed where the host facts are made.
void resolve_host_settings(const Options& options, const cache::EnvLookup& env, Settings& settings) {
    if (!options.torch_dir.empty()) {
        settings.torch_dir = options.torch_dir;
        settings.torch_dir_named_by = "Options::torch_dir";
    } else if (auto value = non_empty(env, variable("torch_dir"))) {
        settings.torch_dir = *value;
        settings.torch_dir_named_by = "KERNHUB_TORCH_DIR";
    }
    const bool from_env = options.backend.empty();
    const std::string backend = from_env ? non_empty(env, variable("backend")).value_or("") : options.backend;
    if (!backend.empty() && backend != "cpu") {
        throw Error(ErrorCode::usage,
                    std::string(from_env ? "KERNHUB_BACKEND" : "Options::backend") + " is " + quoted_name(backend) +
                        "; the one backend that can be asked for is cpu (the default is the detected one)");
    }
    settings.backend = backend;
    // Local overrides, parsed where a kernel is looked up (a malformed
    // value fails the commands that use it).
    if (options.local_kernels) {
        settings.local_kernels = *options.local_kernels;
        settings.local_kernels_named_by = "Options::local_kernels";
    } else if (auto value = env(variable("local_kernels"))) {
        settings.local_kernels = *value;
    }
    settings.host = options.host;
    // Checked now, so that every command refuses a malformed description
    // before it does anything; parsed again where the host facts are made.
    if (!settings.host.empty()) (void)select::parse_host_spec(settings.host);
    if (!settings.host.empty() && !settings.targets.empty()) {
        throw Error(ErrorCode::usage,
                    "a host description and targets cannot be used together: targets name the "
                    "variants, a host description lets kernhub choose them",
                    hint::setting("host"));
    }
}

}  // namespace

Settings resolve_settings(const Options& options, const cache::EnvLookup& env) {
    Settings settings;
    if (!options.endpoint.empty()) {
        settings.endpoint = options.endpoint;
    } else if (auto value = non_empty(env, variable("endpoint"))) {
        settings.endpoint = *value;
    } else if (auto hf = non_empty(env, "HF_ENDPOINT")) {
        settings.endpoint = *hf;
    } else {
        settings.endpoint = "https://huggingface.co";
    }
    while (settings.endpoint.size() > 1 && settings.endpoint.back() == '/') settings.endpoint.pop_back();
    settings.token = token_from_sources(options, env, settings.token_problem);
    settings.cache_root = cache::resolve_cache_root(options.cache_dir, env);
    settings.offline = options.offline
                           ? *options.offline
                           : switch_of(setting_for_field("offline"), env) || env_flag(env, "HF_HUB_OFFLINE");
    settings.verify_on_load =
        options.verify_on_load ? *options.verify_on_load : switch_of(setting_for_field("verify_on_load"), env);
    settings.retries = resolve_int(options.retries, "retries", env);
    settings.max_wait_seconds = resolve_int(options.max_wait_seconds, "max_wait_seconds", env);
    settings.max_listing_entries = resolve_int(options.max_listing_entries, "max_listing_entries", env);
    settings.max_listing_bytes = resolve_int(options.max_listing_bytes, "max_listing_bytes", env);
    settings.api_timeout_seconds = resolve_int(options.api_timeout_seconds, "api_timeout_seconds", env);
    settings.min_rate = resolve_int(options.min_rate, "min_rate", env);
    settings.min_rate_window_seconds = resolve_int(options.min_rate_window_seconds, "min_rate_window_seconds", env);
    settings.max_connections = resolve_int(options.max_connections, "max_connections", env);
    if (auto value = non_empty(env, "SSL_CERT_FILE")) settings.ca_file = *value;
    settings.ref_ttl_seconds = resolve_int(options.ref_ttl_seconds, "ref_ttl_seconds", env);
    settings.targets = options.targets;
    settings.allowed_orgs = resolve_allowed_orgs(options, env);
    resolve_trust(options, env, settings);
    settings.archive_max_bytes = resolve_bytes(options.archive_max_bytes, "archive_max_bytes", env);
    settings.archive_max_entries = resolve_int(options.archive_max_entries, "archive_max_entries", env);
    settings.archive_max_path = resolve_int(options.archive_max_path, "archive_max_path", env);
    if (!options.sigstore_trusted_root.empty()) {
        settings.sigstore_trusted_root = options.sigstore_trusted_root;
    } else if (auto value = non_empty(env, variable("sigstore_trusted_root"))) {
        settings.sigstore_trusted_root = *value;
    }
    if (!options.tvm_ffi_library.empty()) {
        settings.tvm_ffi_library = options.tvm_ffi_library;
    } else if (auto value = non_empty(env, variable("tvm_ffi_library"))) {
        settings.tvm_ffi_library = *value;
    }
    const SettingSpec* no_flock = setting_for_env("KERNHUB_NO_FLOCK");
    settings.use_flock = no_flock == nullptr || !switch_of(*no_flock, env);
    settings.require_signatures = options.require_signatures ? *options.require_signatures
                                                             : switch_of(setting_for_field("require_signatures"), env);
    // As the kernels library reads it: 1, on, yes or true in any case.
    settings.all_latest = env_flag(env, "UNSTABLE_KERNELS_ALL_LATEST");
    resolve_host_settings(options, env, settings);
    return settings;
}

}  // namespace kernhub::api
