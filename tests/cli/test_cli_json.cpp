// --json output of fetch and load, and the JSON error object.
#include <regex>

#include "cli/cli_support.hpp"

using namespace kernhub::test;
using namespace kernhub::test::cli;

namespace {

const std::vector<std::string> k_fetch_keys = {"bytes_downloaded", "commit",     "dependencies",   "files",
                                               "local_folder",     "name",       "path",           "provenance",
                                               "python_depends",   "repo_id",    "requests",       "revision",
                                               "signature",        "variant"};

// The fetch object is complete and true to the files on disk.
void check_fetch_object(const json& j, const Sandbox& box, bool load = false) {
    INFO(j.dump(2));
    std::vector<std::string> keys = k_fetch_keys;
    if (load) keys.insert(keys.end(), {"address", "dependency_files", "kind", "symbol"});
    std::sort(keys.begin(), keys.end());
    CHECK(keys_of(j) == keys);
    CHECK(j["name"] == "vector-add");
    CHECK(j["repo_id"] == "kernhub-test/vector-add");
    CHECK(j["revision"] == "main");
    CHECK(std::regex_match(j["commit"].get<std::string>(), std::regex("[0-9a-f]{40}")));
    CHECK(j["variant"] == host_cpu_variant());
    CHECK(j["dependencies"] == json::array());  // its metadata.json names no kernel-depends
    CHECK(j["local_folder"].is_null());
    if (load) CHECK(j["dependency_files"] == json::array());
    const fs::path path = j["path"].get<std::string>();
    CHECK(path == box.cache / k_vector_add_folder / "snapshots" / j["commit"].get<std::string>() / "build" /
                      host_cpu_variant());
    REQUIRE(j["files"].is_array());
    REQUIRE(j["files"].size() == 2);  // libvector_add.so and metadata.json; no other variant
    std::vector<std::string> names;
    for (const auto& f : j["files"]) {
        CHECK(keys_of(f) == std::vector<std::string>{"path", "sha256", "size"});
        const fs::path on_disk = path / f["path"].get<std::string>();
        REQUIRE(fs::is_regular_file(on_disk));
        CHECK(f["size"].get<std::uint64_t>() == fs::file_size(on_disk));
        CHECK(f["sha256"].get<std::string>() == sha256_of(on_disk));
        names.push_back(f["path"]);
    }
    std::sort(names.begin(), names.end());
    CHECK(names == std::vector<std::string>{"libvector_add.so", "metadata.json"});
}

std::uint64_t total_size(const json& j) {
    std::uint64_t total = 0;
    for (const auto& f : j["files"]) total += f["size"].get<std::uint64_t>();
    return total;
}

}  // namespace

TEST_CASE("fetch --json prints one complete object and warm or pinned fetches make fewer requests", "[cli]") {
    KernelHub hub;
    Sandbox box;
    const std::string ep = hub.server().endpoint();

    ProcessResult cold = box.kh("fetch", "vector-add", ep, {"--json"});
    REQUIRE(cold.exit_code == 0);
    json c = parse_stdout(cold);
    REQUIRE(c.is_object());
    check_fetch_object(c, box);
    // revision + tree + metadata.json + (302 + CDN) for the .so
    CHECK(c["requests"] == 5);
    CHECK(c["bytes_downloaded"].get<std::uint64_t>() == total_size(c));
    CHECK(hub.server().count_requests("/lfs/") == 1);
    // The JSON is the whole of stdout: one object, then one newline.
    CHECK(cold.out.back() == '\n');
    CHECK(cold.out.front() == '{');
    CHECK(cold.out.compare(cold.out.size() - 2, 2, "}\n") == 0);

    hub.server().reset();
    ProcessResult warm = box.kh("fetch", "vector-add", ep, {"--json"});
    REQUIRE(warm.exit_code == 0);
    json w = parse_stdout(warm);
    check_fetch_object(w, box);
    CHECK(w["requests"] == 1);
    CHECK(w["bytes_downloaded"] == 0);
    CHECK(w["commit"] == c["commit"]);
    CHECK(hub.server().count_requests("/revision/main") == 1);
    CHECK(hub.server().stats()["requests"].size() == 1);

    hub.server().reset();
    const std::string commit = c["commit"];
    ProcessResult pinned = box.kh("fetch", "kernhub-test/vector-add@" + commit, ep, {"--json"});
    REQUIRE(pinned.exit_code == 0);
    json p = parse_stdout(pinned);
    INFO(p.dump(2));
    CHECK(keys_of(p) == k_fetch_keys);
    CHECK(p["requests"] == 0);
    CHECK(p["bytes_downloaded"] == 0);
    CHECK(p["name"] == "kernhub-test/vector-add");
    CHECK(p["revision"] == commit);
    CHECK(p["commit"] == commit);
    CHECK(p["path"] == c["path"]);
    CHECK(hub.server().stats()["requests"].empty());
}

TEST_CASE("load --json adds the resolved symbol and its address", "[cli]") {
    KernelHub hub;
    Sandbox box;
    const std::string ep = hub.server().endpoint();

    ProcessResult r = box.kh("load", "vector-add", ep, {"--json"});
    REQUIRE(r.exit_code == 0);
    json j = parse_stdout(r);
    INFO(j.dump(2));
    check_fetch_object(j, box, true);
    CHECK(j["symbol"] == "kh_vector_add");
    CHECK(j["kind"] == "function");
    CHECK(std::regex_match(j["address"].get<std::string>(), std::regex("0x[0-9a-f]+")));
    CHECK(j["address"] != "0x0");
    CHECK(j["requests"] == 5);

    // --symbol overrides the registry's symbol; the cache is warm now.
    r = box.kh("load", "vector-add", ep, {"--json", "--symbol", "kh_saxpy"});
    REQUIRE(r.exit_code == 0);
    json s = parse_stdout(r);
    CHECK(s["symbol"] == "kh_saxpy");
    CHECK(s["bytes_downloaded"] == 0);
    CHECK(s["requests"] == 1);
    CHECK(s["address"] != j["address"]);  // a different function in the same library

    // Without --json: a human line on stderr, nothing on stdout.
    r = box.kh("load", "vector-add", ep);
    INFO(describe(r));
    CHECK(r.exit_code == 0);
    CHECK(r.out.empty());
    CHECK(r.err.find("loaded vector-add variant " + host_cpu_variant()) != std::string::npos);
    CHECK(r.err.find("kh_vector_add at 0x") != std::string::npos);
}

TEST_CASE("with --json an error is also an object on stdout and the exit code is kept", "[cli]") {
    KernelHub hub;
    Sandbox box;
    const std::string ep = hub.server().endpoint();

    struct Case {
        std::string command, ref, endpoint;
        std::vector<std::string> more;
        int code;
        const char* kind;
        std::string names;
    };
    const std::vector<Case> cases = {
        {"fetch", "no-such-kernel", ep, {}, 3, "not found", "no-such-kernel"},
        {"load", "missing-symbol", ep, {}, 3, "not found", "kh_nope"},
        {"fetch", "bad-digest", ep, {}, 4, "verification failed", "metadata.json"},
        {"fetch", "vector-add", k_dead_endpoint, {}, 5, "network error", "127.0.0.1:9"},
        {"fetch", "kernhub-test/private", ep, {"--offline"}, 6, "offline", "kernhub-test/private@main"},
        {"load", "undefined", ep, {}, 7, "load failed", "libkh_undefined.so"},
    };
    for (const auto& c : cases) {
        std::vector<std::string> more = c.more;
        more.insert(more.end(), {"--json", "--quiet"});
        ProcessResult r = box.kh(c.command, c.ref, c.endpoint, more);
        INFO(c.command << " " << c.ref << "\n" << describe(r));
        CHECK(r.exit_code == c.code);
        json j = parse_stdout(r);
        REQUIRE(j.is_object());
        CHECK(keys_of(j) == std::vector<std::string>{"error"});
        CHECK(keys_of(j["error"]) == std::vector<std::string>{"code", "kind", "message"});
        CHECK(j["error"]["code"] == c.code);
        CHECK(j["error"]["kind"] == c.kind);
        const std::string message = j["error"]["message"];
        CHECK(message.find(c.names) != std::string::npos);
        // The same message, once, on stderr.
        CHECK(r.err == "kernhub: error: " + message + "\n");
    }
}
