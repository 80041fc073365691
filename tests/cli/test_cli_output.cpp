// Output policy (--quiet, no bars or colour off a TTY), --version/--help,
// and several CLI processes sharing one cold cache.
#include <atomic>
#include <thread>

#include "cli/cli_support.hpp"
#include "kernhub/kernhub.hpp"

using namespace kernhub::test;
using namespace kernhub::test::cli;

namespace {

bool has_control_codes(const std::string& text) {
    return text.find('\r') != std::string::npos || text.find('\033') != std::string::npos;
}

}  // namespace

TEST_CASE("quiet mode prints nothing on success and plain stderr off a TTY has no bars or colour", "[cli]") {
    KernelHub hub;
    Sandbox box;
    const std::string ep = hub.server().endpoint();

    ProcessResult r = box.kh("fetch", "vector-add", ep, {"--quiet"});
    INFO(describe(r));
    CHECK(r.exit_code == 0);
    CHECK(r.err.empty());
    CHECK(r.out.empty());
    CHECK(hub.server().count_requests("/lfs/") == 1);  // it did download
    r = box.kh("load", "vector-add", ep, {"-q"});
    CHECK(r.exit_code == 0);
    CHECK(r.err.empty());
    CHECK(r.out.empty());

    // A cold fetch without --quiet: one plain line per download, then the summary.
    Sandbox loud;
    r = loud.kh("fetch", "vector-add", ep);
    INFO(describe(r));
    CHECK(r.exit_code == 0);
    CHECK(r.out.empty());
    CHECK_FALSE(has_control_codes(r.err));
    CHECK(r.err.find("downloading build/" + host_cpu_variant() + "/libvector_add.so (") != std::string::npos);
    CHECK(r.err.find("fetched vector-add") != std::string::npos);
    CHECK(count_lines(r.err) == 4);  // metadata.json, libvector_add.so, summary, path

    // Progress bars stay off even when asked not to be disabled; errors stay plain too.
    r = loud.kh("fetch", "bad-digest", ep, {}, {{"HF_HUB_DISABLE_PROGRESS_BARS", "0"}});
    CHECK(r.exit_code == 4);
    CHECK_FALSE(has_control_codes(r.err));
    CHECK(r.err.find("\nkernhub: error: ") != std::string::npos);

    // --json keeps stdout to the object; stderr has only plain lines.
    Sandbox json_box;
    r = json_box.kh("fetch", "vector-add", ep, {"--json"});
    CHECK(r.exit_code == 0);
    CHECK(parse_stdout(r).is_object());
    CHECK_FALSE(has_control_codes(r.err));
    CHECK_FALSE(has_control_codes(r.out));
}

TEST_CASE("the version and help flags exit 0", "[cli]") {
    Sandbox box;
    ProcessResult r = box.run({"--version"});
    INFO(describe(r));
    CHECK(r.exit_code == 0);
    CHECK(r.out == std::string("kernhub ") + kernhub::version() + "\n");

    r = box.run({"--help"});
    INFO(describe(r));
    CHECK(r.exit_code == 0);
    for (const char* command : {"fetch", "load", "list", "info"}) {
        INFO(command);
        CHECK(r.out.find(command) != std::string::npos);
    }

    r = box.run({"fetch", "--help"});
    INFO(describe(r));
    CHECK(r.exit_code == 0);
    for (const char* flag : {"--endpoint", "--cache-dir", "--registry", "--target", "--offline", "--json", "--quiet"}) {
        INFO(flag);
        CHECK(r.out.find(flag) != std::string::npos);
    }
}

TEST_CASE("four processes fetching one kernel into a cold cache download it once", "[cli]") {
    KernelHub hub;
    Sandbox box;
    // Hold the CDN reply back so the processes overlap while the blob is in flight.
    hub.server().add_faults({{{"match", "/lfs/"}, {"action", "delay"}, {"seconds", 0.5}, {"count", -1}}});
    constexpr int k_processes = 4;
    std::vector<ProcessResult> results(k_processes);
    std::vector<std::thread> threads;
    std::atomic<int> ready{0};
    for (int i = 0; i < k_processes; ++i) {
        threads.emplace_back([&, i] {
            ready.fetch_add(1);
            while (ready.load() < k_processes) std::this_thread::yield();
            try {
                results[i] = box.kh("fetch", "vector-add", hub.server().endpoint(), {"--json", "--quiet"});
            } catch (const std::exception& e) {
                results[i].err = e.what();
            }
        });
    }
    for (auto& t : threads) t.join();

    std::uint64_t downloaded = 0;
    std::string path;
    for (const auto& r : results) {
        INFO(describe(r));
        REQUIRE(r.exit_code == 0);
        json j = parse_stdout(r);
        CHECK(j["variant"] == host_cpu_variant());
        if (path.empty()) path = j["path"];
        CHECK(j["path"] == path);
        downloaded += j["bytes_downloaded"].get<std::uint64_t>();
        REQUIRE(j["files"].size() == 2);
        for (const auto& f : j["files"]) {
            CHECK(sha256_of(fs::path(path) / f["path"].get<std::string>()) == f["sha256"]);
        }
    }
    CHECK(hub.server().count_requests("/lfs/") == 1);
    // The .so's bytes were counted by one process only.
    CHECK(downloaded < 2 * fs::file_size(vector_add_so()));
    CHECK(downloaded >= fs::file_size(vector_add_so()));
    const fs::path blobs = box.cache / k_vector_add_folder / "blobs";
    REQUIRE(fs::is_directory(blobs));
    CHECK_FALSE(tree_has_name(blobs, ".incomplete"));
    // Links are made under .kernhub/tmp/ and renamed into snapshots/: no temp may be left there.
    const fs::path staging = box.cache / k_vector_add_folder / ".kernhub" / "tmp";
    REQUIRE(fs::is_directory(staging));
    CHECK(fs::is_empty(staging));
    std::size_t blob_count = 0;
    for (const auto& entry : fs::directory_iterator(blobs)) {
        ++blob_count;
        CHECK((entry.path().filename().string().size() == 40 || entry.path().filename().string().size() == 64));
    }
    CHECK(blob_count == 2);  // libvector_add.so (sha256) and metadata.json (git sha1)
}
