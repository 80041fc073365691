// Resolution belongs to its Client (docs/embedding.md "Threads"): two
// Clients, or two C API handles, in one process whose registries map the
// same name to different kernels each call their own, while threads load
// and resolve through both at once; and overlapping loads of one name on
// one Client keep the one that started last, as kh_symbol does. Run under
// ThreadSanitizer by `tests/run.sh --tsan`.
#include <atomic>
#include <catch2/catch.hpp>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "kernhub/kernhub.h"
#include "kernhub/kernhub.hpp"
#include "support/barrier.hpp"
#include "support/hub_builder.hpp"
#include "support/hub_server.hpp"
#include "support/kernel_hub.hpp"
#include "support/process.hpp"
#include "threads/threads_common.hpp"

using namespace kernhub;
using namespace kernhub::test;
using namespace kernhub::test::threads;
namespace fs = std::filesystem;

namespace {

using VectorAdd = void(const float*, const float*, float*, std::size_t);

// A second hub whose kernhub-test/vector-mul exports kh_vector_add, the
// symbol and signature of the standard hub's vector-add, computing a * b
// instead of a + b; compiled here, as a kernel author would. `registry`
// maps "vector-add" to it.
struct OtherHub {
    TempDir dir;
    fs::path registry = dir.path() / "other-registry.json";
    std::unique_ptr<HubServer> server;

    OtherHub() {
        const fs::path source = dir.path() / "vector_mul.c";
        std::ofstream(source) << "#include <stddef.h>\n"
                                 "void kh_vector_add(const float* a, const float* b, float* out, size_t n) {\n"
                                 "    for (size_t i = 0; i < n; ++i) out[i] = a[i] * b[i];\n"
                                 "}\n";
        const fs::path so = dir.path() / "libvector_mul.so";
        const ProcessResult built = run_process({"cc", "-shared", "-fPIC", "-o", so.string(), source.string()});
        INFO(built.err);
        REQUIRE(built.exit_code == 0);
        const nlohmann::json files = {
            {"build/" + host_cpu_variant() + "/libvector_mul.so", {{"path", so.string()}, {"lfs", true}}}};
        const nlohmann::json spec = {
            {"repos",
             {{{"repo_id", "kernhub-test/vector-mul"},
               {"type", "kernel"},
               {"commits", {{{"message", "mul"}, {"branches", {"main"}}, {"metadata", true}, {"files", files}}}}}}}};
        make_hub(spec, dir.path() / "hub");
        server = std::make_unique<HubServer>(dir.path() / "hub");
        const nlohmann::json document = {
            {"format", 1},
            {"kernels",
             {{"vector-add",
               {{"repo_id", "kernhub-test/vector-mul"}, {"revision", "main"}, {"symbol", "kh_vector_add"}}}}}};
        std::ofstream(registry) << document.dump();
    }

    // The Options of `env` (same cache, same project folder) with this hub
    // and its registry instead.
    Options options(const Env& env) const {
        Options o = env.options(server->endpoint());
        o.registries = {registry.string()};
        return o;
    }
};

// What the kernel at `address` computes from {1, 2, 3} and {10, 20, 30}:
// 11 for a + b, 10 for a * b (out[0]), checked on all three.
enum class Computes { sum, product, other };
Computes what(void* address) {
    if (address == nullptr) return Computes::other;
    float a[3] = {1, 2, 3}, b[3] = {10, 20, 30}, out[3] = {};
    KernelFn<VectorAdd>{address}(a, b, out, 3);
    if (out[0] == 11.0f && out[1] == 22.0f && out[2] == 33.0f) return Computes::sum;
    if (out[0] == 10.0f && out[1] == 40.0f && out[2] == 90.0f) return Computes::product;
    return Computes::other;
}

// Counts, per side, calls that computed the other side's result (or none).
struct Tally {
    std::atomic<int> right{0};
    std::atomic<int> wrong{0};
    void count(bool ok) { ++(ok ? right : wrong); }
};

}  // namespace

TEST_CASE("two Clients map vector-add to different kernels: each thread calls its own Client's", "[threads]") {
    KernelHub hub;
    OtherHub other_hub;
    Env env;
    Client sum_client(env.options(hub.server().endpoint()));
    Client product_client(other_hub.options(env));
    Tally tally;
    // Even threads use the sum Client, odd ones the product Client; each
    // loads (or prewarms) "vector-add" and resolves it again and again, so
    // the two Clients' loads of the one name interleave.
    run_together(k_threads, [&](int t) {
        Client& client = t % 2 == 0 ? sum_client : product_client;
        const Computes expected = t % 2 == 0 ? Computes::sum : Computes::product;
        for (int round = 0; round < k_rounds; ++round) {
            try {
                const LoadResult loaded =
                    round % 2 == 0 ? client.load("vector-add") : client.load({"vector-add"}).front();
                tally.count(what(loaded.address) == expected);
                const KernelFn<VectorAdd> fn = client.resolve<VectorAdd>("vector-add");
                tally.count(what(reinterpret_cast<void*>(fn.get())) == expected);
                tally.count(what(client.loaded("vector-add").address) == expected);
            } catch (const std::exception&) {
                tally.count(false);
            }
        }
    });
    CHECK(tally.wrong.load() == 0);
    CHECK(tally.right.load() == 3 * k_threads * k_rounds);
    // After everything: each Client still answers with its own kernel.
    CHECK(what(reinterpret_cast<void*>(sum_client.resolve<VectorAdd>("vector-add").get())) == Computes::sum);
    CHECK(what(reinterpret_cast<void*>(product_client.resolve<VectorAdd>("vector-add").get())) == Computes::product);
    CHECK(sum_client.loaded("vector-add").fetch.repo_id == "kernhub-test/vector-add");
    CHECK(product_client.loaded("vector-add").fetch.repo_id == "kernhub-test/vector-mul");
}

TEST_CASE("two kh_hub handles map vector-add to different kernels: each thread calls its own handle's", "[threads]") {
    KernelHub hub;
    OtherHub other_hub;
    Env env;
    auto make = [&](const std::string& endpoint, const fs::path& registry) {
        kh_hub* handle = kh_hub_new();
        REQUIRE(handle != nullptr);
        REQUIRE(kh_hub_set(handle, "endpoint", endpoint.c_str()) == 0);
        REQUIRE(kh_hub_set(handle, "cache_dir", env.cache.c_str()) == 0);
        REQUIRE(kh_hub_set(handle, "registry", registry.c_str()) == 0);
        REQUIRE(kh_hub_set(handle, "project", env.dir.path().c_str()) == 0);
        REQUIRE(kh_hub_set(handle, "offline", "0") == 0);
        return handle;
    };
    kh_hub* sum_handle = make(hub.server().endpoint(), env.registry);
    kh_hub* product_handle = make(other_hub.server->endpoint(), other_hub.registry);
    Tally tally;
    run_together(k_threads, [&](int t) {
        kh_hub* handle = t % 2 == 0 ? sum_handle : product_handle;
        const Computes expected = t % 2 == 0 ? Computes::sum : Computes::product;
        for (int round = 0; round < k_rounds; ++round) {
            const bool ok = kh_load(handle, "vector-add") == 0;
            tally.count(ok && what(kh_symbol(handle, "vector-add")) == expected);
        }
    });
    CHECK(tally.wrong.load() == 0);
    CHECK(tally.right.load() == k_threads * k_rounds);
    CHECK(what(kh_symbol(sum_handle, "vector-add")) == Computes::sum);
    CHECK(what(kh_symbol(product_handle, "vector-add")) == Computes::product);
    kh_hub_free(sum_handle);
    kh_hub_free(product_handle);
}

TEST_CASE("overlapping loads of one name on one Client: loaded() keeps the one that started last", "[threads]") {
    KernelHub hub;
    Env env;
    Client client(env.options(hub.server().endpoint()));
    // The first request for vector-add's revision waits at the gate until
    // the test releases it; later ones pass.
    hub.server().add_faults(nlohmann::json::array(
        {{{"match", "kernhub-test/vector-add/revision/main"}, {"action", "hold"}, {"gate", "first"}}}));
    LoadResult first;
    std::string first_error;
    std::thread first_load([&] {
        try {
            first = client.load("vector-add");
        } catch (const std::exception& e) {
            first_error = e.what();
        }
    });
    const bool held = hub.server().wait_held("first");

    // Started later, with another symbol of the same file: another address.
    const LoadResult second = client.load("vector-add", "kh_saxpy");
    const void* after_second = client.loaded("vector-add").address;
    hub.server().release("first");
    first_load.join();

    REQUIRE(held);
    INFO(first_error);
    REQUIRE(first_error.empty());
    CHECK(what(first.address) == Computes::sum);
    CHECK(second.address != first.address);
    CHECK(after_second == second.address);
    // The first one ended last, but started first: it does not replace the second.
    CHECK(client.loaded("vector-add").address == second.address);
    CHECK(client.loaded("vector-add").symbol == "kh_saxpy");
}
