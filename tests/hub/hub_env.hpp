// What the tests in tests/hub/ share: a sandbox holding a cache and the
// standard test registry, the Options a Client needs to use a hub there,
// and the ErrorCode a call ends with.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "kernhub/error.hpp"
#include "kernhub/kernhub.hpp"
#include "support/kernel_hub.hpp"

namespace kernhub::test::hub_env {

struct Env {
    TempDir dir;
    std::filesystem::path cache = dir.path() / "cache";
    std::filesystem::path registry = write_standard_registry(dir.path());

    // `verify_on_load` unset: KERNHUB_VERIFY_ON_LOAD decides.
    Options options(const std::string& endpoint, std::optional<bool> verify_on_load = std::nullopt,
                    int retries = 2) const {
        Options o;
        o.endpoint = endpoint;
        o.cache_dir = cache.string();
        o.registries = {registry.string()};
        o.project_dir = dir.path().string();
        o.no_default_registry = true;
        o.offline = false;
        o.token = "";
        o.retries = retries;
        o.verify_on_load = verify_on_load;
        return o;
    }
    // The repo folder of kernhub-test/<name> in the cache.
    std::filesystem::path folder(const std::string& name = "vector-add") const {
        return cache / ("kernels--kernhub-test--" + name);
    }
};

// The ErrorCode `fn` throws (ok when it returns), and its message.
inline ErrorCode code_of(const std::function<void()>& fn, std::string* message = nullptr) {
    try {
        fn();
    } catch (const Error& e) {
        if (message) *message = e.what();
        return e.code();
    }
    return ErrorCode::ok;
}

}  // namespace kernhub::test::hub_env
