// What the tests of tests/threads/ share: the loopback hub's kernel names,
// a cache and registry per test, and checks of what the threads loaded.
#pragma once

#include <catch2/catch.hpp>
#include <cstddef>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "hub/hub_env.hpp"
#include "kernhub/kernhub.hpp"
#include "support/kernel_hub.hpp"
#include "support/temp_dir.hpp"

namespace kernhub::test::threads {

inline constexpr int k_threads = 8;
inline constexpr int k_rounds = 3;  // loads per thread and name; small enough for TSan

// Registry names over three repos and two commits: vector-add and
// vector-add-v1 name the same commit and file, vector-add-v2 another commit
// of the same repo (same blob), model-kernel another repo and object.
inline const std::vector<std::string> k_names = {"vector-add", "vector-add-v1", "vector-add-v2", "model-kernel"};

// The sandbox and Options of tests/hub/ (hub_env.hpp): one copy for both.
using hub_env::Env;

// Calls the kernel behind `address` for `name` and says whether it computed
// the right answer.
inline bool computes(const std::string& name, void* address) {
    if (address == nullptr) return false;
    if (name == "model-kernel") return KernelFn<int(int, int)>{address}(40, 2) == 42;
    float a[3] = {1, 2, 3}, b[3] = {10, 20, 30}, out[3] = {};
    if (name == "vector-add-v2") {
        KernelFn<void(float, const float*, const float*, float*, std::size_t)> saxpy{address};
        saxpy(2.0f, a, b, out, 3);
        return out[0] == 12.0f && out[2] == 36.0f;
    }
    KernelFn<void(const float*, const float*, float*, std::size_t)> add{address};
    add(a, b, out, 3);
    return out[0] == 11.0f && out[2] == 33.0f;
}

// What the threads saw, checked on the main thread (Catch's assertions are
// not thread-safe).
struct Observed {
    std::mutex mutex;
    std::map<std::string, std::set<void*>> addresses;
    std::vector<std::string> failures;

    // `address` as a call returned it, `in_table` as the caller's own table
    // (Client::loaded, kh_symbol) has it right after.
    void record(const std::string& name, void* address, void* in_table) {
        bool ok = computes(name, address) && in_table == address;
        std::lock_guard<std::mutex> lock(mutex);
        addresses[name].insert(address);
        if (!ok) failures.push_back(name + ": wrong or missing kernel");
    }
    void fail(const std::string& what) {
        std::lock_guard<std::mutex> lock(mutex);
        failures.push_back(what);
    }
};

// One address per name, vector-add and vector-add-v1 the same one (same
// file, same dlopen handle), and the Client's table agreeing (when the
// threads shared `client`).
inline void check_addresses(const Observed& seen, const Client* client = nullptr) {
    CHECK(seen.failures.empty());
    for (const auto& failure : seen.failures) UNSCOPED_INFO(failure);
    for (const auto& name : k_names) {
        INFO(name);
        REQUIRE(seen.addresses.count(name) == 1);
        CHECK(seen.addresses.at(name).size() == 1);
        if (client != nullptr) CHECK(client->loaded(name).address == *seen.addresses.at(name).begin());
    }
    CHECK(seen.addresses.at("vector-add") == seen.addresses.at("vector-add-v1"));
}

}  // namespace kernhub::test::threads
