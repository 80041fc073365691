#include "api/settings.hpp"

#include <algorithm>
#include <cctype>

namespace kernhub::api {

namespace {

std::optional<std::string> non_empty(const store::EnvLookup& env, const std::string& name) {
    auto value = env(name);
    if (value && value->empty()) return std::nullopt;
    return value;
}

std::string trim(std::string text) {
    auto not_space = [](unsigned char c) { return !std::isspace(c); };
    text.erase(text.begin(), std::find_if(text.begin(), text.end(), not_space));
    text.erase(std::find_if(text.rbegin(), text.rend(), not_space).base(), text.end());
    return text;
}

std::string resolve_token(const Options& options, const store::EnvLookup& env) {
    if (options.token) return trim(*options.token);
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
    // An unreadable token file (another user's, a directory) means no token,
    // as for huggingface_hub; it must not stop commands that need none.
    try {
        auto text = store::read_file(home / "token");
        return text ? trim(*text) : std::string();
    } catch (const Error&) {
        return {};
    }
}

int resolve_retries(const Options& options, const store::EnvLookup& env) {
    if (options.retries) return std::clamp(*options.retries, 0, 10);
    if (auto value = non_empty(env, "KERNHUB_RETRIES")) {
        try {
            return std::clamp(std::stoi(*value), 0, 10);
        } catch (const std::exception&) {
            throw Error(ErrorCode::usage, "KERNHUB_RETRIES must be a number from 0 to 10, not '" + *value + "'");
        }
    }
    return 3;
}

}  // namespace

bool env_flag(const store::EnvLookup& env, const std::string& name) {
    auto value = env(name);
    if (!value) return false;
    std::string v = *value;
    std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
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
    settings.retries = resolve_retries(options, env);
    settings.targets = options.targets;
    return settings;
}

}  // namespace kernhub::api
