// A variant's files are downloaded several at a time (KERNHUB_MAX_CONNECTIONS),
// each on a connection that is kept for the next file; large files are hashed
// on a second thread while they arrive. What the hub saw tells how many
// requests were in flight at once and how many connections were opened; no
// timing is asserted.
#include <openssl/evp.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "hub/hub_env.hpp"
#include "kernhub/events.hpp"
#include "kernhub/kernhub.hpp"
#include "support/hub_builder.hpp"
#include "support/hub_server.hpp"
#include "support/kernel_hub.hpp"

using namespace kernhub;
using namespace kernhub::test;
using namespace kernhub::test::hub_env;
namespace fs = std::filesystem;

namespace {

const std::string k_repo = "kernhub-test/many";

std::string sha256_hex(const std::string& bytes) {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    REQUIRE(EVP_Digest(bytes.data(), bytes.size(), digest, &length, EVP_sha256(), nullptr) == 1);
    static const char* const k_hex = "0123456789abcdef";
    std::string hex;
    for (unsigned int i = 0; i < length; ++i) {
        hex += k_hex[digest[i] >> 4];
        hex += k_hex[digest[i] & 15];
    }
    return hex;
}

std::string random_bytes(std::size_t size, unsigned seed) {
    std::string bytes(size, '\0');
    std::mt19937 random(seed);
    for (auto& c : bytes) c = static_cast<char>(random());
    return bytes;
}

// A variant of `count` LFS files of `size` bytes each, plus one large file
// (hashed on the second thread) when `large` is set.
struct ManyHub {
    TempDir dir;
    std::unique_ptr<HubServer> server;
    std::size_t files = 0;
    std::string large_sha256;  // the large file's blob name, when there is one

    ManyHub(int count, std::size_t size, std::size_t large = 0) {
        const std::string variant = "build/" + host_cpu_variant() + "/";
        nlohmann::json listed = nlohmann::json::object();
        auto add = [&](const std::string& name, std::size_t bytes, unsigned seed) {
            const fs::path source = dir.path() / ("src-" + name);
            const std::string content = random_bytes(bytes, seed);
            if (name == "weights.bin") large_sha256 = sha256_hex(content);
            std::ofstream(source, std::ios::binary) << content;
            listed[variant + name] = {{"path", source.string()}, {"lfs", true}};
            ++files;
        };
        for (int i = 0; i < count; ++i) add("part-" + std::to_string(i) + ".bin", size, static_cast<unsigned>(i + 1));
        if (large > 0) add("weights.bin", large, 99);
        nlohmann::json spec = {
            {"repos",
             {{{"repo_id", k_repo},
               {"type", "kernel"},
               {"commits", {{{"message", "many"}, {"branches", {"main"}}, {"metadata", true}, {"files", listed}}}}}}}};
        make_hub(spec, dir.path() / "hub");
        server = std::make_unique<HubServer>(dir.path() / "hub");
        ++files;  // metadata.json
    }

    // Every file served slowly, so that transfers overlap when the client
    // runs them side by side.
    void throttle(int bytes_per_second) {
        server->add_faults(
            {{{"match", "/lfs/"}, {"action", "throttle"}, {"bytes_per_second", bytes_per_second}, {"count", -1}}});
    }
};

// Fails the test when two events are delivered at the same time.
class OverlapDetector final : public EventSink {
public:
    void on_event(const Event&) noexcept override {
        if (m_inside.exchange(true)) m_overlaps.fetch_add(1);
        std::this_thread::yield();  // widen the window for a second caller
        ++m_events;
        m_inside = false;
    }
    int overlaps() const { return m_overlaps.load(); }
    int events() const { return m_events; }

private:
    std::atomic<bool> m_inside{false};
    std::atomic<int> m_overlaps{0};
    int m_events = 0;  // unguarded on purpose: a data race here is what TSan would report
};

std::uint64_t cdn_requests(const nlohmann::json& stats) {
    std::uint64_t n = 0;
    for (const auto& r : stats["requests"]) n += r["host"] == "cdn" ? 1 : 0;
    return n;
}

}  // namespace

TEST_CASE("a variant's files are downloaded up to max_connections at a time, on reused connections",
          "[hub][parallel]") {
    ManyHub hub(12, 64 << 10);
    Env env;
    Options options = env.options(hub.server->endpoint());

    SECTION("four at a time") {
        options.max_connections = 4;
        hub.server->reset();
        hub.throttle(256 << 10);
        FetchResult result = Client(options).fetch(k_repo);
        const nlohmann::json stats = hub.server->stats();
        CHECK(result.files.size() == hub.files);
        // Every file came once, at most four at a time, and more than one at
        // a time: the throttled bodies take a quarter second each.
        CHECK(cdn_requests(stats) == 12);
        CHECK(stats["peak_in_flight"]["cdn"].get<int>() <= 4);
        CHECK(stats["peak_in_flight"]["cdn"].get<int>() >= 2);
        // Each worker keeps its connection for its next file.
        CHECK(stats["connections"]["cdn"].get<int>() <= 4);
        // The per-call count is whole though the workers sent the requests:
        // the organisation's overview (an ad-hoc repo: the trusted-publisher
        // check), revision, listing, metadata.json and each file with its
        // redirect.
        CHECK(result.requests == stats["requests"].size());
        CHECK(result.requests == 4 + 2 * 12);
    }
    SECTION("one at a time") {
        options.max_connections = 1;
        hub.server->reset();
        hub.throttle(256 << 10);
        FetchResult result = Client(options).fetch(k_repo);
        const nlohmann::json stats = hub.server->stats();
        CHECK(result.files.size() == hub.files);
        CHECK(stats["peak_in_flight"]["cdn"].get<int>() == 1);
        CHECK(stats["connections"]["cdn"].get<int>() == 1);
        CHECK(result.requests == 4 + 2 * 12);
    }
}

TEST_CASE("events of a parallel fetch reach the sink one at a time", "[hub][parallel]") {
    ManyHub hub(8, 256 << 10);
    hub.throttle(1 << 20);
    Env env;
    OverlapDetector sink;
    Options options = env.options(hub.server->endpoint());
    options.max_connections = 8;
    options.events = &sink;
    Client(options).fetch(k_repo);
    CHECK(sink.events() > 16);  // at least a start and a done per file
    CHECK(sink.overlaps() == 0);
}

TEST_CASE("a large file is hashed while it arrives, and a corrupt byte in it is still caught", "[hub][parallel]") {
    ManyHub hub(2, 10000, 9u << 20);
    Env env;
    Options options = env.options(hub.server->endpoint(), std::nullopt, 0);
    const fs::path blobs = env.folder("many") / "blobs";

    // The CDN flips one byte in the middle of the large file, once.
    REQUIRE(!hub.large_sha256.empty());
    hub.server->add_faults({{{"match", hub.large_sha256}, {"action", "corrupt"}, {"count", 1}}});
    std::string message;
    const ErrorCode code = code_of([&] { Client(options).fetch(k_repo); }, &message);
    INFO(message);
    // The large file is refused, and never appears under its name.
    CHECK(code == ErrorCode::verification);
    CHECK(message.find("weights.bin") != std::string::npos);
    CHECK(message.find("sha256") != std::string::npos);
    CHECK_FALSE(fs::exists(blobs / hub.large_sha256));
    // The next fetch gets the good bytes.
    FetchResult result = Client(options).fetch(k_repo);
    CHECK(result.files.size() == hub.files);
    bool large = false;
    for (const auto& file : result.files) large = large || file.size == (9u << 20);
    CHECK(large);
}

TEST_CASE("a file waiting to retry gives up as soon as another file of the fetch fails", "[hub][parallel]") {
    ManyHub hub(1, 10000, 128u << 10);
    Env env;
    Options options = env.options(hub.server->endpoint(), std::nullopt, 3);
    options.max_connections = 4;
    options.max_wait_seconds = 60;
    // part-0.bin is refused with a 30 s Retry-After, again and again.
    // weights.bin arrives in half a second, shorter than listed.
    hub.server->add_faults(
        {{{"match", "part-0.bin"}, {"action", "status"}, {"status", 503}, {"retry_after", 30}, {"count", -1}},
         {{"match", "/tree/"}, {"action", "twin_tree"}, {"suffix", "weights.bin"}, {"size", 200000}, {"count", -1}},
         {{"match", hub.large_sha256}, {"action", "throttle"}, {"bytes_per_second", 262144}, {"count", -1}}});
    std::string message;
    const ErrorCode code = code_of([&] { Client(options).fetch(k_repo); }, &message);
    INFO(message);
    CHECK(code == ErrorCode::verification);
    CHECK(message.find("weights.bin") != std::string::npos);
    // The failure ended part-0.bin's wait: it was asked for once, not again
    // after 30 s.
    std::size_t asked = 0;
    const nlohmann::json stats = hub.server->stats();
    for (const auto& r : stats["requests"]) {
        asked += r["path"].get<std::string>().find("part-0.bin") != std::string::npos ? 1 : 0;
    }
    CHECK(asked == 1);
}

TEST_CASE("max_connections outside 1..64 is a usage error naming it", "[hub][parallel]") {
    Env env;
    for (int bad : {0, 65, -1}) {
        Options options = env.options("http://127.0.0.1:9");
        options.max_connections = bad;
        std::string message;
        CHECK(code_of([&] { Client client(options); }, &message) == ErrorCode::usage);
        CHECK(message.find("max_connections") != std::string::npos);
    }
}

TEST_CASE("kernels prewarmed side by side share the per-host bound and keep their order", "[hub][parallel]") {
    KernelHub hub;
    Env env;
    Options options = env.options(hub.server().endpoint());
    options.max_connections = 2;
    hub.server().add_faults(
        {{{"match", "/lfs/"}, {"action", "throttle"}, {"bytes_per_second", 256 << 10}, {"count", -1}}});
    const std::vector<std::string> names = {"model-kernel", "vector-add", "vector-add-v2", "vector-add-v1"};
    std::vector<LoadResult> results = Client(options).load(names);
    const nlohmann::json stats = hub.server().stats();
    REQUIRE(results.size() == names.size());
    CHECK(results[0].fetch.repo_id == "kernhub-test/model-kernel");
    CHECK(results[1].fetch.repo_id == "kernhub-test/vector-add");
    CHECK(results[2].fetch.repo_id == "kernhub-test/vector-add");
    CHECK(results[2].symbol == "kh_saxpy");
    CHECK(results[3].fetch.repo_id == "kernhub-test/vector-add");
    CHECK(results[3].symbol == "kh_vector_add");
    for (const auto& result : results) CHECK(result.address != nullptr);
    // Two kernels at a time, each with up to two files in flight: the CDN
    // still saw at most two downloads at once.
    CHECK(stats["peak_in_flight"]["cdn"].get<int>() <= 2);
    CHECK(stats["peak_in_flight"]["cdn"].get<int>() >= 1);
}

TEST_CASE("a failure in one kernel of a prewarm is the error, whatever its siblings do", "[hub][parallel]") {
    KernelHub hub;
    Env env;
    Options options = env.options(hub.server().endpoint(), std::nullopt, 0);
    std::string message;
    const ErrorCode code = code_of(
        [&] {
            Client(options).load({"vector-add", "no-such-kernel-anywhere", "two-objects"});
        },
        &message);
    INFO(message);
    CHECK(code == ErrorCode::not_found);
    CHECK(message.find("no-such-kernel-anywhere") != std::string::npos);
}
