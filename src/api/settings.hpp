// Turns public Options plus the environment into concrete settings
// (DESIGN.md, "CLI contract": environment variables and their precedence).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "kernhub/kernhub.hpp"
#include "store/cache.hpp"

namespace kernhub::api {

struct Settings {
    std::string endpoint;  // no trailing '/'
    std::string token;     // empty when none
    std::filesystem::path cache_root;
    bool offline = false;
    bool verify_on_load = false;
    int retries = 3;
    std::vector<std::string> targets;
};

Settings resolve_settings(const Options& options, const store::EnvLookup& env);

// True for "1", "true", "yes", "on" (any case).
bool env_flag(const store::EnvLookup& env, const std::string& name);

}  // namespace kernhub::api
