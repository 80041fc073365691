#include "api/settings.hpp"

#include <string_view>

#include "common/text.hpp"

namespace kernhub::api {

namespace {

std::optional<std::string> non_empty(const store::EnvLookup& env, const std::string& name) {
    auto value = env(name);
    if (value && value->empty()) return std::nullopt;
    return value;
}

std::string token_from_sources(const Options& options, const store::EnvLookup& env, std::string& source) {
    source = "Options::token";
    if (options.token) return trim(*options.token);
    source = "HF_TOKEN";
    if (auto token = non_empty(env, "HF_TOKEN")) return trim(*token);
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
    // An unreadable token file (another user's, a directory) means no token,
    // as for huggingface_hub; it must not stop commands that need none.
    try {
        auto text = store::read_file(home / "token");
        return text ? trim(*text) : std::string();
    } catch (const Error&) {
        return {};
    }
}

// A malformed token is refused by where it came from, never by its text.
std::string resolve_token(const Options& options, const store::EnvLookup& env) {
    std::string source;
    std::string token = token_from_sources(options, env, source);
    if (!token_is_well_formed(token)) {
        throw Error(ErrorCode::usage, "the token from " + source +
                                          " contains a space or a control character, which cannot go into an HTTP "
                                          "header; make it hold only the token");
    }
    return token;
}

struct IntRange {
    int min;
    int max;
    int fallback;  // when neither the option nor the variable is set
};

std::string range_text(const IntRange& range) {
    return "a whole number from " + std::to_string(range.min) + " to " + std::to_string(range.max);
}

// Only plain decimal digits count: std::stoi would take " 3", "3abc" and
// "-1", and clamping would hide a typo such as 99999999999.
std::optional<int> parse_in_range(std::string_view text, const IntRange& range) {
    constexpr std::size_t k_max_digits = 9;  // below INT_MAX, above every range used here
    if (text.empty() || text.size() > k_max_digits) return std::nullopt;
    int value = 0;
    for (char c : text) {
        if (c < '0' || c > '9') return std::nullopt;
        value = value * 10 + (c - '0');
    }
    if (value < range.min || value > range.max) return std::nullopt;
    return value;
}

// The option when set, else the variable when set (even to ""), else the
// fallback.
int resolve_int(const std::optional<int>& option, const char* option_name, const store::EnvLookup& env,
                const char* variable, const IntRange& range) {
    if (option) {
        if (*option < range.min || *option > range.max) {
            throw Error(ErrorCode::usage, std::string("Options::") + option_name + " must be " + range_text(range) +
                                              ", not " + std::to_string(*option));
        }
        return *option;
    }
    auto value = env(variable);
    if (!value) return range.fallback;
    if (auto parsed = parse_in_range(*value, range)) return *parsed;
    constexpr std::size_t k_max_echo = 40;
    std::string shown = value->size() > k_max_echo ? value->substr(0, k_max_echo) + "..." : *value;
    throw Error(ErrorCode::usage, std::string(variable) + " must be " + range_text(range) + ", not '" + shown +
                                      "'; fix it or unset it to use " + std::to_string(range.fallback));
}

}  // namespace

bool token_is_well_formed(std::string_view token) {
    for (char c : token) {
        const auto byte = static_cast<unsigned char>(c);
        if (byte <= 0x20 || byte >= 0x7f) return false;
    }
    return true;
}

bool env_flag(const store::EnvLookup& env, const std::string& name) {
    auto value = env(name);
    if (!value) return false;
    const std::string v = ascii_lowercase(*value);
    return v == "1" || v == "true" || v == "yes" || v == "on";
}

Settings resolve_settings(const Options& options, const store::EnvLookup& env) {
    Settings settings;
    if (!options.endpoint.empty()) {
        settings.endpoint = options.endpoint;
    } else if (auto value = non_empty(env, "KERNHUB_ENDPOINT")) {
        settings.endpoint = *value;
    } else if (auto hf = non_empty(env, "HF_ENDPOINT")) {
        settings.endpoint = *hf;
    } else {
        settings.endpoint = "https://huggingface.co";
    }
    while (settings.endpoint.size() > 1 && settings.endpoint.back() == '/') settings.endpoint.pop_back();
    settings.token = resolve_token(options, env);
    settings.cache_root = store::resolve_cache_root(options.cache_dir, env);
    settings.offline =
        options.offline ? *options.offline : env_flag(env, "KERNHUB_OFFLINE") || env_flag(env, "HF_HUB_OFFLINE");
    settings.verify_on_load =
        options.verify_on_load ? *options.verify_on_load : env_flag(env, "KERNHUB_VERIFY_ON_LOAD");
    settings.retries = resolve_int(options.retries, "retries", env, "KERNHUB_RETRIES", {0, 10, 3});
    settings.max_wait_seconds =
        resolve_int(options.max_wait_seconds, "max_wait_seconds", env, "KERNHUB_MAX_WAIT", {0, 86400, 60});
    settings.targets = options.targets;
    return settings;
}

}  // namespace kernhub::api
