// Hostile hub answers meet named bounds: a listing with too many entries or
// bytes, a listing trickled past the API deadline, a download below the
// minimum rate (each exit 5 naming its variable), a listing naming one path
// twice with different ids (exit 4), and listing entries
// outside build/ dropped before anything keeps them.
#include <chrono>

#include "cli_support.hpp"
#include "support/hub_builder.hpp"

using namespace kernhub::test;
using namespace kernhub::test::cli;

namespace {

// Every tree page gets `entries` made-up files named prefix0, prefix1, ...
void pad_listing(HubServer& server, int entries, const std::string& prefix) {
    server.add_faults(
        {{{"match", "/tree/"}, {"action", "pad_tree"}, {"entries", entries}, {"prefix", prefix}, {"count", -1}}});
}

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

TEST_CASE("a listing with more entries than KERNHUB_MAX_LISTING_ENTRIES is exit 5 naming it", "[cli]") {
    KernelHub hub;
    Sandbox box;
    pad_listing(hub.server(), 500, "build/junk/f");
    ProcessResult r =
        box.kh("fetch", "vector-add", hub.server().endpoint(), {}, {{"KERNHUB_MAX_LISTING_ENTRIES", "100"}});
    check_error(r, 5, {"KERNHUB_MAX_LISTING_ENTRIES", "more than 100 entries", "kernhub-test/vector-add"});
    // Nothing of the refused listing is kept.
    CHECK_FALSE(fs::exists(box.cache / "kernels--kernhub-test--vector-add" / ".kernhub" / "trees"));

    // The same listing is fine under the default cap.
    r = box.kh("fetch", "vector-add", hub.server().endpoint(), {"--quiet"});
    INFO(describe(r));
    CHECK(r.exit_code == 0);
}

TEST_CASE("a listing larger than KERNHUB_MAX_LISTING_BYTES over its pages is exit 5 naming it", "[cli]") {
    // Two entries per page: the cap is reached over several pages, not by one.
    HubServer::Options options;
    options.page_size = 2;
    KernelHub hub(options);
    Sandbox box;
    ProcessResult r =
        box.kh("fetch", "vector-add", hub.server().endpoint(), {}, {{"KERNHUB_MAX_LISTING_BYTES", "1024"}});
    check_error(r, 5, {"KERNHUB_MAX_LISTING_BYTES", "larger than 1024 bytes"});
    CHECK(hub.server().count_requests("/tree/") >= 2);  // it took pages to get there

    // One page too large is refused as it arrives, not after.
    hub.server().reset();
    pad_listing(hub.server(), 20000, "build/junk/f");
    r = box.kh("fetch", "vector-add", hub.server().endpoint(), {}, {{"KERNHUB_MAX_LISTING_BYTES", "65536"}});
    check_error(r, 5, {"KERNHUB_MAX_LISTING_BYTES"});
}

TEST_CASE("listing entries outside build/ are dropped, and the cached listing holds build/ files only", "[cli]") {
    KernelHub hub;
    Sandbox box;
    pad_listing(hub.server(), 5000, "docs/f");
    ProcessResult r = box.kh("fetch", "vector-add", hub.server().endpoint(), {"--json", "--quiet"});
    INFO(describe(r));
    REQUIRE(r.exit_code == 0);
    const std::string commit = parse_stdout(r)["commit"].get<std::string>();
    const fs::path tree = box.cache / "kernels--kernhub-test--vector-add" / ".kernhub" / "trees" / (commit + ".json");
    const json cached = json::parse(read_text(tree));
    REQUIRE(cached.is_array());
    CHECK(cached.size() > 0);
    CHECK(cached.size() < 100);
    for (const auto& entry : cached) {
        INFO(entry.dump());
        CHECK(entry["type"] == "file");
        CHECK(entry["path"].get<std::string>().rfind("build/", 0) == 0);
    }
    // The warm fetch works from that copy and asks for no listing.
    hub.server().reset();
    r = box.kh("fetch", "vector-add", hub.server().endpoint(), {"--quiet"});
    INFO(describe(r));
    CHECK(r.exit_code == 0);
    CHECK(hub.server().count_requests("/tree/") == 0);
}

TEST_CASE("a trickled listing ends at KERNHUB_API_TIMEOUT with exit 5 naming it", "[cli]") {
    KernelHub hub;
    Sandbox box;
    hub.server().add_faults({{{"match", "/tree/"}, {"action", "throttle"}, {"bytes_per_second", 20}, {"count", -1}}});
    const auto start = std::chrono::steady_clock::now();
    ProcessResult r = box.kh("fetch", "vector-add", hub.server().endpoint(), {}, {{"KERNHUB_API_TIMEOUT", "1"}});
    const double took = seconds_since(start);
    check_error(r, 5, {"KERNHUB_API_TIMEOUT", "within the API deadline of 1 s"});
    CHECK(took >= 0.75);
    CHECK(took < 8.0);  // the retry (KERNHUB_RETRIES=1) is inside the deadline too
}

TEST_CASE("a download below KERNHUB_MIN_RATE fails with exit 5 naming it, and one above it succeeds", "[cli]") {
    KernelHub hub;
    Sandbox box;
    hub.server().add_faults({{{"match", "/resolve/"}, {"action", "throttle"}, {"bytes_per_second", 200}, {"count", -1}},
                             {{"match", "/lfs/"}, {"action", "throttle"}, {"bytes_per_second", 200}, {"count", -1}}});
    const EnvChanges slow = {{"KERNHUB_MIN_RATE", "100000"}, {"KERNHUB_MIN_RATE_WINDOW", "1"}};
    const auto start = std::chrono::steady_clock::now();
    ProcessResult r = box.kh("fetch", "vector-add", hub.server().endpoint(), {"--quiet"}, slow);
    const double took = seconds_since(start);
    check_error(r, 5, {"KERNHUB_MIN_RATE", "100000 bytes/s", "in 2 attempts;"});
    CHECK(took < 10.0);

    // A fast hub meets the same rate.
    hub.server().reset();
    r = box.kh("fetch", "vector-add", hub.server().endpoint(), {"--quiet"}, slow);
    INFO(describe(r));
    CHECK(r.exit_code == 0);
}

TEST_CASE("bad values of the hub-answer bounds are usage errors (exit 2)", "[cli]") {
    Sandbox box;
    struct Case {
        const char* variable;
        const char* value;
    };
    for (Case c : {Case{"KERNHUB_MAX_LISTING_ENTRIES", "0"}, Case{"KERNHUB_MAX_LISTING_ENTRIES", "1e5"},
                   Case{"KERNHUB_MAX_LISTING_BYTES", "1023"}, Case{"KERNHUB_MAX_LISTING_BYTES", "64M"},
                   Case{"KERNHUB_API_TIMEOUT", "0"}, Case{"KERNHUB_API_TIMEOUT", "-1"},
                   Case{"KERNHUB_MIN_RATE", "fast"}, Case{"KERNHUB_MIN_RATE", "100000001"},
                   Case{"KERNHUB_MIN_RATE_WINDOW", "0"}, Case{"KERNHUB_MIN_RATE_WINDOW", "3601"}}) {
        INFO(c.variable << "='" << c.value << "'");
        check_error(box.kh("fetch", "vector-add", "http://127.0.0.1:9", {}, {{c.variable, c.value}}), 2, {c.variable});
    }
}

TEST_CASE("a hub listing one path twice with different ids is exit 4, and nothing of it is kept", "[cli]") {
    KernelHub hub;
    Sandbox box;
    hub.server().add_faults(
        {{{"match", "/tree/"}, {"action", "twin_tree"}, {"suffix", "x86_64-linux/libvector_add.so"}, {"count", -1}}});
    ProcessResult r = box.kh("fetch", "vector-add", hub.server().endpoint(), {"--quiet"});
    check_error(r, 4, {"libvector_add.so twice with different contents"});
    CHECK_FALSE(fs::exists(box.cache / "kernels--kernhub-test--vector-add" / ".kernhub" / "trees"));
    CHECK(hub.server().count_requests("/resolve/") == 0);  // refused before any download
}

TEST_CASE("a listing its files do not match is forgotten: the next fetch asks the hub again", "[cli]") {
    KernelHub hub;
    Sandbox box;
    // One hostile answer: the library's listed size is wrong.
    hub.server().add_faults({{{"match", "/tree/"},
                              {"action", "twin_tree"},
                              {"suffix", "x86_64-linux/libvector_add.so"},
                              {"size", 5},
                              {"count", 1}}});
    ProcessResult r = box.kh("fetch", "vector-add", hub.server().endpoint(), {"--quiet"});
    INFO(describe(r));
    CHECK(r.exit_code == 4);
    hub.server().reset();
    r = box.kh("fetch", "vector-add", hub.server().endpoint(), {"--quiet"});
    INFO(describe(r));
    CHECK(r.exit_code == 0);
    CHECK(hub.server().count_requests("/tree/") >= 1);

    // A listed file the hub does not have (404, exit 3) is the same news.
    Sandbox other;
    hub.server().reset();
    hub.server().add_faults({{{"match", "/tree/"},
                              {"action", "pad_tree"},
                              {"entries", 1},
                              {"prefix", "build/" + host_cpu_variant() + "/junk"},
                              {"count", 1}}});
    r = other.kh("fetch", "vector-add@main", hub.server().endpoint(), {"--quiet", "--target", host_cpu_variant()});
    INFO(describe(r));
    CHECK((r.exit_code == 3 || r.exit_code == 4));
    hub.server().reset();
    r = other.kh("fetch", "vector-add@main", hub.server().endpoint(), {"--quiet", "--target", host_cpu_variant()});
    INFO(describe(r));
    CHECK(r.exit_code == 0);
}

TEST_CASE("a revision answer is read for its sha alone: deep nesting is exit 5 naming the cap, padding costs nothing",
          "[cli]") {
    KernelHub hub;
    Sandbox box;
    hub.server().add_faults({{{"match", "/revision/"}, {"action", "bloat_answer"}, {"depth", 3000000}}});
    ProcessResult r = box.kh("fetch", "vector-add", hub.server().endpoint(), {"--quiet"});
    check_error(r, 5, {"k_max_answer_depth"});

    // Two million made-up entries around the real fields: read, not kept.
    hub.server().reset();
    hub.server().add_faults({{{"match", "/revision/"}, {"action", "bloat_answer"}, {"siblings", 2000000}}});
    r = box.kh("fetch", "vector-add", hub.server().endpoint(), {"--quiet"});
    INFO(describe(r));
    CHECK(r.exit_code == 0);
}

TEST_CASE("a hub listing a file whose name holds control characters is exit 4, the name shown escaped", "[cli]") {
    TempDir dir;
    const std::string variant = "build/" + host_cpu_variant() + "/";
    nlohmann::json files = nlohmann::json::object();
    files[variant + "README.txt"] = {{"text", "fine\n"}};
    files[variant + "note\x1b[2J\u202e.txt"] = {{"text", "hostile name\n"}};
    nlohmann::json commit = {{"message", "names"}, {"branches", {"main"}}, {"metadata", true}, {"files", files}};
    nlohmann::json repo = {{"repo_id", "kernhub-test/names"}, {"type", "kernel"}};
    repo["commits"] = nlohmann::json::array({commit});
    make_hub({{"repos", nlohmann::json::array({repo})}}, dir.path() / "hub");
    HubServer server(dir.path() / "hub");
    Sandbox box;
    ProcessResult r = box.kh("fetch", "kernhub-test/names", server.endpoint(), {"--quiet"});
    check_error(r, 4, {"holds a control character", "note\\x1b[2J\\u202e.txt"});
    CHECK(r.err.find('\033') == std::string::npos);
    CHECK_FALSE(fs::exists(box.cache / "kernels--kernhub-test--names" / ".kernhub" / "trees"));
}
