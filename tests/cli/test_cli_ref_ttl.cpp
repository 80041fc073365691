// A fleet of CLI processes on one host sharing a warm cache: without
// KERNHUB_REF_TTL each asks the hub for the branch, with it none does.
#include <atomic>
#include <thread>

#include "cli/cli_support.hpp"

using namespace kernhub::test;
using namespace kernhub::test::cli;

namespace {

constexpr int k_fleet = 16;

// k_fleet `kernhub fetch vector-add --json` processes started together.
std::vector<ProcessResult> run_fleet(const Sandbox& box, const std::string& endpoint, const EnvChanges& extra) {
    std::vector<ProcessResult> results(k_fleet);
    std::vector<std::thread> threads;
    std::atomic<int> ready{0};
    for (int i = 0; i < k_fleet; ++i) {
        threads.emplace_back([&, i] {
            ready.fetch_add(1);
            while (ready.load() < k_fleet) std::this_thread::yield();
            try {
                results[i] = box.kh("fetch", "vector-add", endpoint, {"--json", "--quiet"}, extra);
            } catch (const std::exception& e) {
                results[i].err = e.what();
            }
        });
    }
    for (auto& t : threads) t.join();
    return results;
}

// Every process succeeded with `commit`, each reporting `requests` requests.
void check_fleet(const std::vector<ProcessResult>& results, const std::string& commit, int requests) {
    for (const auto& r : results) {
        INFO(describe(r));
        REQUIRE(r.exit_code == 0);
        json j = parse_stdout(r);
        CHECK(j["commit"] == commit);
        CHECK(j["requests"] == requests);
        CHECK(j["bytes_downloaded"] == 0);
    }
}

}  // namespace

TEST_CASE("a fleet of 16 processes on a warm cache: 16 revision requests, none with KERNHUB_REF_TTL", "[cli]") {
    KernelHub hub;
    Sandbox box;
    const std::string ep = hub.server().endpoint();
    ProcessResult warmup = box.kh("fetch", "vector-add", ep, {"--json", "--quiet"});
    INFO(describe(warmup));
    REQUIRE(warmup.exit_code == 0);
    const std::string commit = parse_stdout(warmup)["commit"];

    hub.server().reset();
    check_fleet(run_fleet(box, ep, {}), commit, 1);
    CHECK(hub.server().count_requests("/revision/main") == k_fleet);
    CHECK(hub.server().stats()["requests"].size() == static_cast<std::size_t>(k_fleet));

    // One process with the TTL resolves and records the time; the fleet then asks nothing.
    const EnvChanges ttl{{"KERNHUB_REF_TTL", "300"}};
    hub.server().reset();
    ProcessResult first = box.kh("fetch", "vector-add", ep, {"--json", "--quiet"}, ttl);
    INFO(describe(first));
    REQUIRE(first.exit_code == 0);
    CHECK(parse_stdout(first)["requests"] == 1);
    CHECK(hub.server().count_requests("/revision/main") == 1);

    hub.server().reset();
    check_fleet(run_fleet(box, ep, ttl), commit, 0);
    CHECK(hub.server().count_requests("/revision/main") == 0);
    CHECK(hub.server().stats()["requests"].empty());
    // refs/ stays the bare commit id huggingface_hub reads.
    CHECK(read_text(box.cache / k_vector_add_folder / "refs" / "main") == commit);
}

TEST_CASE("KERNHUB_REF_TTL outside 0..31536000 or not a number is a usage error", "[cli]") {
    Sandbox box;
    for (const char* bad : {"-1", "31536001", "1h", " 5", ""}) {
        INFO(bad);
        ProcessResult r = box.kh("fetch", "vector-add", "http://127.0.0.1:9", {}, {{"KERNHUB_REF_TTL", bad}});
        check_error(r, 2, {"KERNHUB_REF_TTL"});
    }
}
