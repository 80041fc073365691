// A download stopped by SIGKILL, SIGTERM or SIGINT continues on the next run
// from the bytes already on disk. The hub is throttled so the CLI can be
// stopped mid-file; what the hub sent again is read from its request log.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <random>
#include <thread>

#include "cli_support.hpp"
#include "support/build_paths.hpp"
#include "support/hub_builder.hpp"

using namespace kernhub::test;
using namespace kernhub::test::cli;

namespace {

constexpr std::size_t k_big_size = 6u << 20;
constexpr int k_throttle = 2 << 20;  // bytes per second: the file takes ~3 s
const std::string k_big_repo = "kernhub-test/big";

// A hub with one repo whose host variant holds a 6 MiB LFS file.
struct BigHub {
    TempDir dir;
    fs::path big = dir.path() / "weights.bin";
    std::unique_ptr<HubServer> server;
    std::string bytes;  // the file's content
    std::string etag;   // its blob name: the SHA-256

    BigHub() {
        bytes.assign(k_big_size, '\0');
        std::mt19937 random(1234);
        for (auto& c : bytes) c = static_cast<char>(random());
        write_text(big, bytes);
        etag = sha256_of(big);
        nlohmann::json spec = {
            {"repos",
             {{{"repo_id", k_big_repo},
               {"type", "kernel"},
               {"commits",
                {{{"message", "big"},
                  {"branches", {"main"}},
                  {"metadata", true},
                  {"files", {{"build/" + host_cpu_variant() + "/weights.bin", {{"path", big.string()}}}}}}}}}}}};
        make_hub(spec, dir.path() / "hub");
        server = std::make_unique<HubServer>(dir.path() / "hub");
    }

    void throttle() {
        server->add_faults(
            {{{"match", "/lfs/"}, {"action", "throttle"}, {"bytes_per_second", k_throttle}, {"count", -1}}});
    }

    // Body bytes the CDN sent for the big file since the last reset.
    std::uint64_t cdn_bytes_sent() const {
        std::uint64_t total = 0;
        const nlohmann::json stats = server->stats();  // the loop must not outlive it
        for (const auto& r : stats["requests"]) {
            if (r["host"] == "cdn") total += r["sent"].get<std::uint64_t>();
        }
        return total;
    }
};

fs::path blobs_of(const fs::path& cache) {
    return cache / "kernels--kernhub-test--big" / "blobs";
}

// A partial download as a killed run leaves it: blobs/<etag>.<tag>.incomplete.
fs::path plant_partial(const Sandbox& box, const BigHub& hub, const std::string& tag, const std::string& content) {
    fs::create_directories(blobs_of(box.cache));
    fs::path partial = blobs_of(box.cache) / (hub.etag + "." + tag + ".incomplete");
    write_text(partial, content);
    return partial;
}

std::vector<fs::path> partials(const fs::path& cache) {
    std::vector<fs::path> out;
    fs::path blobs = blobs_of(cache);
    std::error_code ec;
    for (fs::directory_iterator it(blobs, ec), end; !ec && it != end; it.increment(ec)) {
        if (it->path().extension() == ".incomplete") out.push_back(it->path());
    }
    return out;
}

std::uint64_t largest_partial(const fs::path& cache) {
    std::uint64_t best = 0;
    for (const auto& p : partials(cache)) {
        // A partial may be renamed into place between the listing and here;
        // file_size then reports (uintmax_t)-1, which must not count.
        std::error_code ec;
        std::uintmax_t size = fs::file_size(p, ec);
        if (!ec) best = std::max<std::uint64_t>(best, size);
    }
    return best;
}

// `kernhub fetch` started in the background, its output going to files.
struct Running {
    pid_t pid = -1;
    fs::path out;
    fs::path err;
};

Running start_fetch(const Sandbox& box, const std::string& endpoint, const EnvChanges& extra = {}) {
    Running run;
    run.out = box.dir.path() / "bg.out";
    run.err = box.dir.path() / "bg.err";
    UniqueFd in(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    UniqueFd out(::open(run.out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    UniqueFd err(::open(run.err.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    REQUIRE(in.get() > 2);
    REQUIRE(out.get() > 2);
    REQUIRE(err.get() > 2);
    std::vector<std::string> argv{KERNHUB_CLI_PATH, "fetch",       k_big_repo,        "--endpoint",
                                  endpoint,         "--cache-dir", box.cache.string()};
    run.pid = spawn_process(argv, box.env(extra), box.dir.path().string(), in.get(), out.get(), err.get());
    return run;
}

// Waits until the largest partial holds at least `fraction` of the file.
bool wait_for_partial(const fs::path& cache, double fraction) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
        if (largest_partial(cache) >= static_cast<std::uint64_t>(fraction * k_big_size)) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
}

bool has_range_request(const HubServer& server, std::uint64_t from) {
    const nlohmann::json stats = server.stats();
    for (const auto& r : stats["requests"]) {
        if (r["host"] == "cdn" && r["range"].is_string() && r["range"] == "bytes=" + std::to_string(from) + "-") {
            return true;
        }
    }
    return false;
}

}  // namespace

TEST_CASE("a fetch killed with SIGKILL continues from its partial file on the next run", "[cli][resume]") {
    BigHub hub;
    Sandbox box;
    hub.throttle();
    Running run = start_fetch(box, hub.server->endpoint());
    bool midway = wait_for_partial(box.cache, 0.8);
    ::kill(run.pid, SIGKILL);
    CHECK(wait_process(run.pid) == 128 + SIGKILL);
    REQUIRE(midway);
    std::uint64_t kept = largest_partial(box.cache);
    REQUIRE(kept < k_big_size);
    REQUIRE(partials(box.cache).size() == 1);

    hub.server->reset();  // no throttle, and a fresh request log
    ProcessResult again = box.kh("fetch", k_big_repo, hub.server->endpoint(), {"--json"});
    INFO(describe(again));
    REQUIRE(again.exit_code == 0);
    json result = parse_stdout(again);
    std::uint64_t resent = hub.cdn_bytes_sent();
    INFO("kept " << kept << " bytes, the hub sent " << resent << " again of " << k_big_size);
    CHECK(resent == k_big_size - kept);
    CHECK(resent * 4 < k_big_size);  // under 25% of the file
    CHECK(has_range_request(*hub.server, kept));
    CHECK(result["bytes_downloaded"].get<std::uint64_t>() < k_big_size);
    CHECK(again.err.find("resuming") != std::string::npos);
    CHECK(partials(box.cache).empty());
    fs::path file = fs::path(result["path"].get<std::string>()) / "weights.bin";
    CHECK(sha256_of(file) == sha256_of(hub.big));
}

TEST_CASE("SIGTERM and SIGINT stop a fetch with 143 or 130, one line, and keep the partial", "[cli][resume]") {
    BigHub hub;
    Sandbox box;
    hub.throttle();
    for (int signo : {SIGTERM, SIGINT}) {
        INFO("signal " << signo);
        Running run = start_fetch(box, hub.server->endpoint());
        bool started = wait_for_partial(box.cache, signo == SIGTERM ? 0.2 : 0.5);
        ::kill(run.pid, signo);
        int code = wait_process(run.pid);
        REQUIRE(started);
        std::string err = read_text(run.err);
        INFO(err);
        INFO(hub.server->stats().dump());
        CHECK(code == 128 + signo);
        CHECK(err.find(signo == SIGTERM ? "interrupted by SIGTERM" : "interrupted by SIGINT") != std::string::npos);
        CHECK(err.find("partial") != std::string::npos);
        CHECK(err.find("kernhub: error") == std::string::npos);
        // The status lines before the signal ("downloading ...") may be
        // there; the interruption itself is the last line and only one.
        CHECK(err.substr(err.rfind('\n', err.size() - 2) + 1).rfind("kernhub: interrupted", 0) == 0);
        CHECK(partials(box.cache).size() == 1);
        CHECK(largest_partial(box.cache) > 0);
    }
    std::uint64_t kept = largest_partial(box.cache);
    hub.server->reset();
    ProcessResult again = box.kh("fetch", k_big_repo, hub.server->endpoint());
    INFO(describe(again));
    CHECK(again.exit_code == 0);
    CHECK(has_range_request(*hub.server, kept));
    CHECK(hub.cdn_bytes_sent() == k_big_size - kept);
    CHECK(partials(box.cache).empty());
}

TEST_CASE("partials left by several killed runs: the largest is continued, the rest removed", "[cli][resume]") {
    BigHub hub;
    Sandbox box;
    const fs::path blobs = blobs_of(box.cache);
    const std::string& bytes = hub.bytes;
    const std::string& etag = hub.etag;
    // What three killed runs leave: three per-process partials of one blob.
    plant_partial(box, hub, "1111111111111111", bytes.substr(0, 1000));
    plant_partial(box, hub, "2222222222222222", bytes.substr(0, 5u << 20));
    plant_partial(box, hub, "3333333333333333", bytes.substr(0, 3000));

    ProcessResult r = box.kh("fetch", k_big_repo, hub.server->endpoint());
    INFO(describe(r));
    REQUIRE(r.exit_code == 0);
    CHECK(has_range_request(*hub.server, 5u << 20));
    CHECK(hub.cdn_bytes_sent() == k_big_size - (5u << 20));
    CHECK(partials(box.cache).empty());
    CHECK(sha256_of(blobs / etag) == etag);
}

TEST_CASE("a partial whose bytes are wrong is downloaded again from the start", "[cli][resume]") {
    BigHub hub;
    Sandbox box;
    const fs::path blobs = blobs_of(box.cache);
    const std::string& bytes = hub.bytes;
    const std::string& etag = hub.etag;
    std::string damaged = bytes.substr(0, 4u << 20);
    damaged[1000] = static_cast<char>(~damaged[1000]);
    plant_partial(box, hub, "4444444444444444", damaged);

    ProcessResult r = box.kh("fetch", k_big_repo, hub.server->endpoint());
    INFO(describe(r));
    REQUIRE(r.exit_code == 0);
    CHECK(r.err.find("does not verify") != std::string::npos);
    CHECK(hub.cdn_bytes_sent() == k_big_size - (4u << 20) + k_big_size);
    CHECK(partials(box.cache).empty());
    CHECK(sha256_of(blobs / etag) == etag);
}

TEST_CASE("without working file locks nothing is adopted, and only stale partials are removed", "[cli][resume]") {
    BigHub hub;
    Sandbox box;
    const fs::path blobs = blobs_of(box.cache);
    const std::string& bytes = hub.bytes;
    const std::string& etag = hub.etag;
    fs::path fresh = plant_partial(box, hub, "5555555555555555", bytes.substr(0, 5u << 20));
    fs::path stale = plant_partial(box, hub, "6666666666666666", bytes.substr(0, 2u << 20));
    fs::last_write_time(stale, fs::file_time_type::clock::now() - std::chrono::hours(48));

    // Forced: this filesystem's flock works, so the fallback must be chosen
    // by the variable, as it would be chosen by the probe on one that lies.
    ProcessResult r = box.kh("fetch", k_big_repo, hub.server->endpoint(), {}, {{"KERNHUB_NO_FLOCK", "1"}});
    INFO(describe(r));
    REQUIRE(r.exit_code == 0);
    CHECK(hub.cdn_bytes_sent() == k_big_size);  // a whole new download: another process may own `fresh`
    CHECK_FALSE(has_range_request(*hub.server, 5u << 20));
    CHECK(fs::exists(fresh));
    CHECK(fs::file_size(fresh) == 5u << 20);
    CHECK_FALSE(fs::exists(stale));
    CHECK(sha256_of(blobs / etag) == etag);
}
