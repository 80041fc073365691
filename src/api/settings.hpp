// Turns public Options plus the environment into concrete settings: an
// Options field wins over its environment variable, which wins over the
// default.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "cache/cache.hpp"
#include "kernhub/kernhub.hpp"

namespace kernhub::api {

struct Settings {
    std::string endpoint;  // no trailing '/'
    std::string token;     // empty when none
    // Why the token found cannot be used (malformed, an oversized file),
    // never quoting it; empty when it can. Only a request that would send
    // it fails (see hub::TransportConfig), so commands that need no token
    // are not stopped by a broken one.
    std::string token_problem;
    std::filesystem::path cache_root;
    bool offline = false;
    // False when KERNHUB_NO_FLOCK says file locks do not work on the
    // cache's filesystem.
    bool use_flock = true;
    bool verify_on_load = false;
    int retries = 3;
    int max_wait_seconds = 60;  // the longest wait the hub may ask for
    // Bounds on hub answers (see Options).
    int max_listing_entries = 100000;
    int max_listing_bytes = 64 << 20;
    int api_timeout_seconds = 60;
    int min_rate = 1024;
    int min_rate_window_seconds = 30;
    int max_connections = 8;
    // Certificate authorities for HTTPS hubs (SSL_CERT_FILE); empty: the
    // system's.
    std::string ca_file;
    // How long a branch resolution in the cache is used without the hub.
    int ref_ttl_seconds = 0;
    std::vector<std::string> targets;
    // Organisations whose repos may be used; nullopt allows every one.
    std::optional<std::vector<std::string>> allowed_orgs;
    // Options::trust_remote_code or KERNHUB_TRUST_REMOTE_CODE: every repo,
    // or these repo ids, pass the trusted-publisher check without asking.
    bool trust_all_repos = false;
    std::vector<std::string> trusted_repos;
    // Archive variants; archive_max_bytes 0: the ratio rule.
    std::uint64_t archive_max_bytes = 0;
    int archive_max_entries = 100'000;
    int archive_max_path = 1024;
    // Signatures: the trusted_root.json to use (empty: the built-in one) and
    // whether every kernel must have a signature policy.
    std::string sigstore_trusted_root;
    // Options::tvm_ffi_library, else KERNHUB_TVM_FFI_LIBRARY; empty: searched.
    std::string tvm_ffi_library;
    bool require_signatures = false;
    // Torch kernels and the machine selected for: the torch folder and the
    // setting that named it ("KERNHUB_TORCH_DIR" or "Options::torch_dir"),
    // the backend asked for ("" or "cpu") and a host description (--host).
    std::string torch_dir;
    std::string torch_dir_named_by;
    std::string backend;
    // Options::local_kernels, else LOCAL_KERNELS, unparsed (a malformed
    // value fails the commands that use it, not every command), and which
    // of the two it came from.
    std::string local_kernels;
    std::string local_kernels_named_by = "LOCAL_KERNELS";
    std::string host;
    // UNSTABLE_KERNELS_ALL_LATEST: fetch, load and info take every kernel
    // at its highest "vN" branch (all_latest.cpp).
    bool all_latest = false;
};

// How many kernels prewarm, lock and mirror fetch side by side: up to 4,
// never more than the connections allowed (each kernel's files share them).
inline int parallel_kernels(const Settings& settings) {
    return settings.max_connections < 4 ? settings.max_connections : 4;
}

// Throws Error(usage) naming the variable (or Options field) and its range
// for a numeric value that is not a plain decimal number inside the range:
// KERNHUB_RETRIES=3abc, " 3", "-1" or "" are mistakes worth stopping for,
// not values to guess at or clamp.
Settings resolve_settings(const Options& options, const cache::EnvLookup& env);

// True when the token could go into an HTTP header as it is: visible ASCII
// only (no space, no control character such as CR or LF, which would end the
// Authorization header and start one the token's source chose).
bool token_is_well_formed(std::string_view token);

// Throws Error(verification) when `settings` name organisations and the
// ORG of `repo_id` is not one of them (ASCII case ignored).
void check_allowed_org(const Settings& settings, const std::string& repo_id);

// True for "1", "true", "yes", "on" (any case).
bool env_flag(const cache::EnvLookup& env, const std::string& name);

}  // namespace kernhub::api
