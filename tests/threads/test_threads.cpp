// One Client shared by several threads, and one Client per thread on a
// shared cache, against the real loopback hub (docs/embedding.md,
// "Threads"). Run under ThreadSanitizer by `tests/run.sh --tsan`.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "cache/cache.hpp"
#include "kernhub/events.hpp"
#include "kernhub/kernhub.h"
#include "kernhub/kernhub.hpp"
#include "support/barrier.hpp"
#include "support/hub_builder.hpp"
#include "support/hub_server.hpp"
#include "support/kernel_hub.hpp"
#include "threads/threads_common.hpp"

using namespace kernhub;
using namespace kernhub::test;
using namespace kernhub::test::threads;
namespace fs = std::filesystem;

namespace {

// Thread t loads every name k_rounds times, starting at a different name
// than its neighbour, so that the same name and different names overlap.
void load_all(Client& client, Observed& seen, int t) {
    for (int round = 0; round < k_rounds; ++round) {
        for (std::size_t i = 0; i < k_names.size(); ++i) {
            const std::string& name = k_names[(i + static_cast<std::size_t>(t)) % k_names.size()];
            try {
                const LoadResult loaded = client.load(name);
                seen.record(name, loaded.address, client.loaded(name).address);
            } catch (const std::exception& e) {
                seen.fail(name + ": " + e.what());
            }
        }
    }
}

// Downloads (file bodies, not API calls) by URL path: LFS blobs come from
// the CDN as /lfs/<sha256>, plain files from the hub's /resolve/ URLs.
std::map<std::string, int> downloads(HubServer& server) {
    std::map<std::string, int> out;
    const nlohmann::json stats = server.stats();  // kept: the loop reads into it
    for (const auto& r : stats["requests"]) {
        const std::string path = r["path"].get<std::string>();
        const long status = r["status"].get<long>();
        bool body = status == 200 || status == 206;
        if (body && (path.rfind("/lfs/", 0) == 0 || path.find("/resolve/") != std::string::npos)) ++out[path];
    }
    return out;
}

// With flock() excluding (the normal case), each blob's lock makes every
// other thread wait and then find the blob: each file goes over the wire
// once. Without it, each thread may download its own copy.
void check_no_duplicate_downloads(HubServer& server, const fs::path& cache) {
    const int allowed = cache::flock_excludes(cache) ? 1 : k_threads;
    const auto counted = downloads(server);
    CHECK_FALSE(counted.empty());
    for (const auto& [path, count] : counted) {
        INFO(path << " downloaded " << count << " times");
        CHECK(count <= allowed);
    }
}

}  // namespace

TEST_CASE("one Client shared by 8 threads loads the same and different names, cold then warm", "[threads]") {
    KernelHub hub;
    Env env;
    Client client(env.options(hub.server().endpoint()));

    Observed cold;
    run_together(k_threads, [&](int t) { load_all(client, cold, t); });
    check_addresses(cold, &client);
    check_no_duplicate_downloads(hub.server(), env.cache);

    hub.server().reset();
    Observed warm;
    run_together(k_threads, [&](int t) { load_all(client, warm, t); });
    check_addresses(warm, &client);
    CHECK(warm.addresses == cold.addresses);
    CHECK(downloads(hub.server()).empty());  // branch names still ask the hub for their commit
}

TEST_CASE("a Client per thread on one cache: each load correct, each file downloaded once", "[threads]") {
    KernelHub hub;
    Env env;
    Observed seen;
    std::atomic<std::uint64_t> requests{0};
    run_together(k_threads, [&](int t) {
        Client client(env.options(hub.server().endpoint()));
        load_all(client, seen, t);
        // Each load counts its own requests; together they are what the hub saw.
        try {
            requests += client.fetch("model-kernel").requests;
        } catch (const std::exception& e) {
            seen.fail(std::string("fetch: ") + e.what());
        }
    });
    check_addresses(seen);
    check_no_duplicate_downloads(hub.server(), env.cache);
    // A warm fetch of a branch asks the hub for the commit once per call.
    CHECK(requests.load() == k_threads);
}

TEST_CASE("FetchResult::requests counts the call's own requests while other threads fetch", "[threads]") {
    KernelHub hub;
    Env env;
    Client client(env.options(hub.server().endpoint()));
    client.fetch("vector-add");  // warm: each later fetch of the branch is one API request
    std::atomic<std::uint64_t> total{0};
    std::atomic<int> wrong{0};
    run_together(k_threads, [&](int) {
        for (int round = 0; round < k_rounds; ++round) {
            try {
                std::uint64_t requests = client.fetch("vector-add").requests;
                total += requests;
                if (requests != 1) ++wrong;
            } catch (const std::exception&) {
                ++wrong;
            }
        }
    });
    CHECK(wrong.load() == 0);
    CHECK(total.load() == static_cast<std::uint64_t>(k_threads * k_rounds));
}

TEST_CASE("prewarm from several threads at once on one Client", "[threads]") {
    KernelHub hub;
    Env env;
    Client client(env.options(hub.server().endpoint()));
    Observed seen;
    run_together(k_threads, [&](int t) {
        std::vector<std::string> names = k_names;
        std::rotate(names.begin(), names.begin() + t % static_cast<int>(names.size()), names.end());
        try {
            std::vector<LoadResult> results = client.load(names);
            if (results.size() != names.size()) seen.fail("prewarm returned " + std::to_string(results.size()));
            for (std::size_t i = 0; i < results.size(); ++i) {
                seen.record(names[i], results[i].address, client.loaded(names[i]).address);
            }
        } catch (const std::exception& e) {
            seen.fail(std::string("prewarm: ") + e.what());
        }
    });
    check_addresses(seen, &client);
    check_no_duplicate_downloads(hub.server(), env.cache);
}

TEST_CASE("Client::loaded and Client::resolve while other threads load", "[threads]") {
    KernelHub hub;
    Env env;
    Client client(env.options(hub.server().endpoint()));
    std::atomic<bool> loading{true};
    std::atomic<int> readers_bad{0};
    std::atomic<long> resolved{0};
    Observed seen;
    std::vector<std::thread> readers;
    for (int r = 0; r < 4; ++r) {
        readers.emplace_back([&, r] {
            // Before a load the name is absent; after it, the address computes.
            const std::string& name = k_names[static_cast<std::size_t>(r) % k_names.size()];
            while (loading.load()) {
                try {
                    if (!computes(name, client.loaded(name).address)) ++readers_bad;
                    ++resolved;
                    if (name == "model-kernel") {
                        auto fn = client.resolve<int(int, int)>(name);
                        if (fn(1, 2) != 3) ++readers_bad;
                    }
                } catch (const Error& e) {
                    if (e.code() != ErrorCode::not_found) ++readers_bad;
                }
                std::this_thread::yield();
            }
        });
    }
    run_together(4, [&](int t) { load_all(client, seen, t); });
    // Every name is in the table now: the readers must find one before
    // they stop (a reader that never saw an address proves nothing).
    for (int waited = 0; waited < 5000 && resolved.load() == 0; ++waited) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    loading = false;
    for (auto& reader : readers) reader.join();
    check_addresses(seen, &client);
    CHECK(readers_bad.load() == 0);
    CHECK(resolved.load() > 0);
}

TEST_CASE("info and list on a shared Client while other threads load", "[threads]") {
    KernelHub hub;
    Env env;
    Client client(env.options(hub.server().endpoint()));
    Observed seen;
    run_together(k_threads, [&](int t) {
        if (t % 2 == 0) {
            load_all(client, seen, t);
            return;
        }
        for (int round = 0; round < k_rounds; ++round) {
            const std::string& name = k_names[static_cast<std::size_t>(t + round) % k_names.size()];
            try {
                const InfoResult info = client.info(name);
                if (info.selected.empty()) seen.fail("info " + name + ": no variant selected");
                const std::vector<RegistryEntry> entries = client.list();
                const bool listed = std::any_of(entries.begin(), entries.end(),
                                                [&](const RegistryEntry& entry) { return entry.name == name; });
                if (!listed) seen.fail("list: " + name + " missing");
            } catch (const std::exception& e) {
                seen.fail("info/list " + name + ": " + e.what());
            }
        }
    });
    check_addresses(seen, &client);
}

TEST_CASE("C API handles used from separate threads at once", "[threads]") {
    KernelHub hub;
    Env env;
    const std::string endpoint = hub.server().endpoint();
    const std::string cache = env.cache.string();
    const std::string registry = env.registry.string();
    const std::string project = env.dir.path().string();
    Observed seen;
    run_together(k_threads, [&](int t) {
        kh_hub* handle = kh_hub_new();
        if (handle == nullptr) {
            seen.fail("kh_hub_new returned NULL");
            return;
        }
        const bool set = kh_hub_set(handle, "endpoint", endpoint.c_str()) == 0 &&
                         kh_hub_set(handle, "cache_dir", cache.c_str()) == 0 &&
                         kh_hub_set(handle, "registry", registry.c_str()) == 0 &&
                         kh_hub_set(handle, "project", project.c_str()) == 0 && kh_hub_set(handle, "offline", "0") == 0;
        if (!set) seen.fail("kh_hub_set failed");
        for (std::size_t i = 0; set && i < k_names.size(); ++i) {
            const std::string& name = k_names[(i + static_cast<std::size_t>(t)) % k_names.size()];
            if (const int rc = kh_load(handle, name.c_str()); rc != 0) {
                const char* why = kh_last_error(handle);
                seen.fail(name + ": kh_load " + std::to_string(rc) + ": " + (why != nullptr ? why : ""));
                continue;
            }
            void* address = kh_symbol(handle, name.c_str());
            seen.record(name, address, address);
        }
        kh_hub_free(handle);
    });
    check_addresses(seen);
    check_no_duplicate_downloads(hub.server(), env.cache);
}

namespace {

// Counts events without a lock of its own: a Client delivers them one at a
// time (SerialSink), so TSan reports a race here if it ever does not.
class PlainCounter final : public EventSink {
public:
    void on_event(const Event&) noexcept override { ++count; }
    std::uint64_t count = 0;
};

}  // namespace

TEST_CASE("parallel file downloads with large files hashed on a second thread, from several callers", "[threads]") {
    // A variant of several files, two of them large enough for the hashing
    // thread, fetched by 4 threads at once through one Client whose sink is
    // not thread-safe, each fetch downloading up to 3 files at a time.
    TempDir dir;
    const std::string variant = "build/" + host_cpu_variant() + "/";
    nlohmann::json files = nlohmann::json::object();
    for (int i = 0; i < 6; ++i) {
        const fs::path source = dir.path() / ("src" + std::to_string(i));
        std::string bytes((i < 2 ? 5u << 20 : 20000u) + static_cast<unsigned>(i), static_cast<char>('a' + i));
        std::ofstream(source, std::ios::binary) << bytes;
        files[variant + "part" + std::to_string(i) + ".bin"] = {{"path", source.string()}, {"lfs", true}};
    }
    nlohmann::json spec = {
        {"repos",
         {{{"repo_id", "kernhub-test/parts"},
           {"type", "kernel"},
           {"commits", {{{"message", "parts"}, {"branches", {"main"}}, {"metadata", true}, {"files", files}}}}}}}};
    make_hub(spec, dir.path() / "hub");
    HubServer server(dir.path() / "hub");
    Env env;
    PlainCounter counter;
    Options options = env.options(server.endpoint());
    options.events = &counter;
    options.max_connections = 3;
    Client client(options);
    std::atomic<int> failures{0};
    std::atomic<std::uint64_t> requests{0};
    run_together(4, [&](int) {
        try {
            FetchResult result = client.fetch("kernhub-test/parts");
            requests += result.requests;
            if (result.files.size() != 7) ++failures;
        } catch (const std::exception&) {
            ++failures;
        }
    });
    CHECK(failures.load() == 0);
    CHECK(counter.count > 0);
    // Each blob came once (the others waited on its lock), and the calls'
    // own counts add up to what the hub saw.
    CHECK(server.count_requests("/lfs/") == 6);
    CHECK(requests.load() == server.stats()["requests"].size());
}
