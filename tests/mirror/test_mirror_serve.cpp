// `kernhub mirror` end to end: a tree mirrored from the loopback hub is
// served by stock static servers (python3 -m http.server, nginx with the
// server block kernhub wrote) and read from disk (file://), and `kernhub
// fetch` works against each unchanged; a tree is added to by later runs; and
// an nginx pull-through cache (proxy_cache) in front of the hub serves a
// second node without any file request reaching the hub or its CDN
// (docs/ci-images.md, "Mirrors and pull-through caches").
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <iostream>
#include <map>

#include "cli/cli_support.hpp"
#include "mirror/serve_support.hpp"
#include "support/requirements.hpp"

using namespace kernhub::test;
using namespace kernhub::test::cli;
namespace fs = std::filesystem;

namespace {

KERNHUB_TEST_REQUIREMENT("needs:nginx", []() -> std::string {
    return serve::find_nginx().empty() ? "nginx is not installed (.ci/install-deps installs it)" : "";
});

const std::string k_cuda_variant = "native-cu128-x86_64-linux";

// `kernhub mirror ARGS... --registry R --endpoint E --cache-dir C --json -q`.
ProcessResult run_mirror(const Sandbox& box, std::vector<std::string> args, const std::string& endpoint) {
    args.insert(args.begin(), "mirror");
    for (const std::string& more :
         {std::string("--registry"), box.registry.string(), std::string("--endpoint"), endpoint,
          std::string("--cache-dir"), box.cache.string(), std::string("--json"), std::string("-q")}) {
        args.push_back(more);
    }
    return box.run(args);
}

// `kernhub fetch NAME` against `endpoint` into `cache`, as JSON.
ProcessResult fetch(const Sandbox& box, const std::string& name, const std::string& endpoint, const fs::path& cache) {
    return box.run({"fetch", name, "--registry", box.registry.string(), "--endpoint", endpoint, "--cache-dir",
                    cache.string(), "--json", "-q"});
}

// path -> sha256 of a fetch's files.
std::map<std::string, std::string> file_hashes(const json& fetched) {
    std::map<std::string, std::string> out;
    for (const auto& file : fetched["files"]) out[file["path"]] = file["sha256"];
    return out;
}

std::vector<std::string> served_paths(const fs::path& listing) {
    std::vector<std::string> paths;
    for (const auto& item : json::parse(read_text(listing))) paths.push_back(item.at("path"));
    return paths;
}

// The hub's and CDN's requests since the last reset, grouped by what they asked for.
struct RequestCounts {
    std::size_t revision = 0, tree = 0, hub_files = 0, cdn = 0, other = 0;
    std::size_t total() const { return revision + tree + hub_files + cdn + other; }
    std::string describe() const {
        return std::to_string(revision) + " revision, " + std::to_string(tree) + " tree listing, " +
               std::to_string(hub_files) + " file (hub), " + std::to_string(cdn) + " file (CDN), " +
               std::to_string(other) + " other";
    }
};

RequestCounts count_requests(const HubServer& server) {
    RequestCounts counts;
    const json stats = server.stats();
    for (const auto& request : stats["requests"]) {
        const std::string path = request["path"];
        if (request["host"] == "cdn") {
            ++counts.cdn;
        } else if (path.find("/revision/") != std::string::npos) {
            ++counts.revision;
        } else if (path.find("/tree/") != std::string::npos) {
            ++counts.tree;
        } else if (path.find("/resolve/") != std::string::npos) {
            ++counts.hub_files;
        } else {
            ++counts.other;
        }
    }
    return counts;
}

// The pull-through cache of docs/ci-images.md, in front of `upstream`: anything
// addressed by a 40-hex commit (listings, files) is cached, redirects to the
// CDN are followed by nginx and cached under the URL the client asked for;
// revision lookups always go to the hub.
std::string pull_through_config(const std::string& upstream, int port) {
    std::string upstream_regex;
    for (char c : upstream) upstream_regex += c == '.' ? std::string("\\.") : std::string(1, c);
    return R"conf(
  proxy_cache_path @DIR@/cache levels=1:2 keys_zone=kernhub:10m max_size=1g inactive=30d use_temp_path=off;
  map $upstream_http_link $kernhub_link {
      "~^<)conf" +
           upstream_regex +
           R"conf((?<rest>.*)$" "<$scheme://$http_host$rest";
      default $upstream_http_link;
  }
  server {
    listen 127.0.0.1:)conf" +
           std::to_string(port) + R"conf(;
    location ~ "^/(api/(kernels|models)/[^/]+/[^/]+/tree|(kernels/)?[^/]+/[^/]+/resolve)/([0-9a-f]{40}|[0-9a-f]{64})(/|$)" {
        proxy_pass )conf" +
           upstream + R"conf(;
        proxy_cache kernhub;
        proxy_cache_key $request_uri;
        proxy_cache_valid 200 30d;
        proxy_cache_lock on;
        proxy_cache_lock_timeout 10m;
        proxy_intercept_errors on;
        error_page 302 = @kernhub_redirect;
        proxy_hide_header Link;
        add_header Link $kernhub_link;
    }
    location @kernhub_redirect {
        set $kernhub_location $upstream_http_location;
        proxy_pass $kernhub_location;
        proxy_set_header Authorization "";
        proxy_cache kernhub;
        proxy_cache_key $request_uri;
        proxy_cache_valid 200 30d;
        proxy_cache_lock on;
        proxy_cache_lock_timeout 10m;
    }
    location / {
        proxy_pass )conf" +
           upstream + R"conf(;
        proxy_hide_header Link;
        add_header Link $kernhub_link;
    }
  })conf";
}

}  // namespace

TEST_CASE("a mirrored tree serves kernhub fetch from http.server, from nginx with its conf and from file://",
          "[mirror][nginx][needs:nginx]") {
    KernelHub hub;
    Sandbox box;
    const fs::path tree = box.dir.path() / "mirror";
    const fs::path conf = box.dir.path() / "mirror.conf";
    const int port = serve::free_port();
    ProcessResult made = run_mirror(box,
                                    {"vector-add", "vector-add-v2", "--to", tree.string(), "--nginx-conf",
                                     conf.string(), "--listen", "127.0.0.1:" + std::to_string(port)},
                                    hub.server().endpoint());
    INFO(describe(made));
    REQUIRE(made.exit_code == 0);
    json report = parse_stdout(made);
    REQUIRE(report["kernels"].size() == 2);
    CHECK(report["kernels"][0]["variants"].size() == 4);  // every variant of main's commit
    CHECK(report["kernels"][1]["revision"] == "v2");
    CHECK(report["nginx_conf"] == conf.string());
    const std::size_t files =
        report["kernels"][0]["files"].get<std::size_t>() + report["kernels"][1]["files"].get<std::size_t>();
    CHECK(report["files_linked"] == files);  // tree and cache share a filesystem here
    CHECK(report["files_copied"] == 0);

    // What the hub itself serves, for comparison.
    std::map<std::string, json> want;
    for (const std::string name : {"vector-add", "vector-add-v2"}) {
        ProcessResult direct = fetch(box, name, hub.server().endpoint(), box.dir.path() / "cache-direct");
        REQUIRE(direct.exit_code == 0);
        want[name] = parse_stdout(direct);
    }
    // A mirrored file is the cache's verified blob itself.
    const std::string commit = want["vector-add"]["commit"];
    const fs::path so =
        tree / "kernels/kernhub-test/vector-add/resolve" / commit / "build" / host_cpu_variant() / "libvector_add.so";
    const fs::path blob =
        box.cache / k_vector_add_folder / "blobs" / file_hashes(want["vector-add"])["libvector_add.so"];
    struct stat mirrored {};
    struct stat cached {};
    REQUIRE(::stat(so.c_str(), &mirrored) == 0);
    REQUIRE(::stat(blob.c_str(), &cached) == 0);
    CHECK(mirrored.st_ino == cached.st_ino);

    hub.server().reset();
    serve::PythonHttpServer http_server(tree);
    serve::Nginx nginx("  include " + conf.string() + ";", port);
    const std::vector<std::pair<std::string, std::string>> endpoints = {
        {"python3 -m http.server", http_server.endpoint()},
        {"nginx with kernhub's server block", nginx.endpoint()},
        {"file://", "file://" + tree.string()}};
    int n = 0;
    for (const auto& [label, endpoint] : endpoints) {
        INFO(label << " at " << endpoint);
        const fs::path cache = box.dir.path() / ("cache-" + std::to_string(n++));
        for (const std::string name : {"vector-add", "vector-add-v2"}) {
            ProcessResult got = fetch(box, name, endpoint, cache);
            INFO(describe(got));
            REQUIRE(got.exit_code == 0);
            json out = parse_stdout(got);
            CHECK(out["commit"] == want[name]["commit"]);
            CHECK(out["variant"] == want[name]["variant"]);
            CHECK(file_hashes(out) == file_hashes(want[name]));
            // revision, listing, metadata.json, the .so(s): no redirect hop on a static server.
            if (name == "vector-add") CHECK(out["requests"] == (endpoint.rfind("file://", 0) == 0 ? 0 : 4));
        }
        // A version the mirror does not hold is reported as such.
        ProcessResult missing = fetch(box, "vector-add-v1", endpoint, cache);
        check_error(missing, 3, {"version 1"});
    }
    // What huggingface_hub asks nginx for: a file by branch name (HEAD),
    // and the whole repo's listing at tree/<commit>.
    const std::string sha = file_hashes(want["vector-add"])["libvector_add.so"];
    HttpReply head = http_request("HEAD", nginx.endpoint() + "/kernels/kernhub-test/vector-add/resolve/main/build/" +
                                              host_cpu_variant() + "/libvector_add.so");
    CHECK(head.status == 200);
    CHECK(head.header("x-repo-commit") == commit);
    CHECK(head.header("etag") == "\"" + sha + "\"");
    CHECK(head.header("x-linked-etag") == "\"" + sha + "\"");
    CHECK(head.header("x-linked-size") == std::to_string(fs::file_size(so)));
    CHECK(head.header("content-length") == std::to_string(fs::file_size(so)));
    HttpReply whole = http_request("GET", nginx.endpoint() + "/api/kernels/kernhub-test/vector-add/tree/" + commit +
                                              "?recursive=true&expand=false");
    CHECK(whole.status == 200);
    CHECK(json::parse(whole.body, nullptr, false).size() == report["kernels"][0]["files"]);
    HttpReply absent =
        http_request("HEAD", nginx.endpoint() + "/kernels/kernhub-test/vector-add/resolve/main/README.md");
    CHECK(absent.status == 404);
    CHECK(absent.header("x-error-code") == "EntryNotFound");
    CHECK(absent.header("x-repo-commit") == commit);

    ProcessResult loaded = box.run({"load", "vector-add", "--registry", box.registry.string(), "--endpoint",
                                    nginx.endpoint(), "--cache-dir", (box.dir.path() / "cache-load").string()});
    INFO(describe(loaded));
    CHECK(loaded.exit_code == 0);
    CHECK(hub.server().stats()["requests"].empty());  // the mirror needs no hub
}

TEST_CASE("kernhub mirror --target adds variants and revisions to an existing tree", "[mirror]") {
    KernelHub hub;
    Sandbox box;
    const fs::path tree = box.dir.path() / "mirror";
    const std::string endpoint = hub.server().endpoint();
    const std::string host = host_cpu_variant();

    ProcessResult first = run_mirror(box, {"vector-add", "--to", tree.string(), "--target", k_cuda_variant}, endpoint);
    REQUIRE(first.exit_code == 0);
    json report = parse_stdout(first);
    CHECK(report["kernels"][0]["variants"] == json::array({k_cuda_variant}));
    CHECK(report["kernels"][0]["files"] == 2);  // the .so and metadata.json
    const std::string commit = report["kernels"][0]["commit"];
    const fs::path listing = tree / "api/kernels/kernhub-test/vector-add/tree" / commit / "build";
    for (const auto& path : served_paths(listing)) CHECK(path.rfind("build/" + k_cuda_variant + "/", 0) == 0);

    // The tree offers what it holds: this host's variant is not there yet.
    const std::string file_endpoint = "file://" + tree.string();
    check_error(fetch(box, "vector-add", file_endpoint, box.dir.path() / "c1"), 3, {k_cuda_variant});

    ProcessResult second = run_mirror(box, {"vector-add", "--to", tree.string(), "--target", host}, endpoint);
    REQUIRE(second.exit_code == 0);
    CHECK(parse_stdout(second)["kernels"][0]["variants"] == json::array({host}));
    CHECK(served_paths(listing).size() == 4);
    ProcessResult fetched = fetch(box, "vector-add", file_endpoint, box.dir.path() / "c2");
    INFO(describe(fetched));
    CHECK(fetched.exit_code == 0);

    ProcessResult v2 = run_mirror(box, {"vector-add-v2", "--to", tree.string()}, endpoint);
    REQUIRE(v2.exit_code == 0);
    json refs = json::parse(read_text(tree / "api/kernels/kernhub-test/vector-add/refs"));
    std::vector<std::string> names;
    for (const auto& branch : refs["branches"]) names.push_back(branch["name"]);
    CHECK(names == std::vector<std::string>{"main", "v2"});
    CHECK(json::parse(read_text(tree / "api/kernels/kernhub-test/vector-add/revision/main"))["sha"] == commit);
    CHECK(fetch(box, "vector-add-v2", file_endpoint, box.dir.path() / "c2").exit_code == 0);

    // Again: nothing to place, every file is already there.
    ProcessResult again = run_mirror(box, {"vector-add", "--to", tree.string(), "--target", host}, endpoint);
    REQUIRE(again.exit_code == 0);
    json same = parse_stdout(again);
    CHECK(same["files_unchanged"] == 2);
    CHECK(same["files_linked"] == 0);
    CHECK(same["bytes_downloaded"] == 0);

    // Offline, a mirror is made from what the cache holds.
    ProcessResult offline =
        run_mirror(box, {"vector-add", "--to", (box.dir.path() / "offline").string(), "--target", host, "--offline"},
                   k_dead_endpoint);
    INFO(describe(offline));
    REQUIRE(offline.exit_code == 0);
    CHECK(parse_stdout(offline)["requests"] == 0);
    CHECK(
        fetch(box, "vector-add", "file://" + (box.dir.path() / "offline").string(), box.dir.path() / "c3").exit_code ==
        0);

    check_error(
        run_mirror(box, {"vector-add", "--to", tree.string(), "--target", "native-cpu-riscv64-linux"}, endpoint), 3,
        {"native-cpu-riscv64-linux", k_cuda_variant});
}

TEST_CASE("kernhub mirror without kernels writes the nginx configuration of an existing tree", "[mirror]") {
    KernelHub hub;
    Sandbox box;
    const fs::path tree = box.dir.path() / "mirror";
    const std::string endpoint = hub.server().endpoint();
    REQUIRE(run_mirror(box, {"vector-add", "--to", tree.string(), "--nginx-conf", (box.dir.path() / "a.conf").string()},
                       endpoint)
                .exit_code == 0);
    ProcessResult only =
        run_mirror(box, {"--to", tree.string(), "--nginx-conf", (box.dir.path() / "b.conf").string()}, endpoint);
    INFO(describe(only));
    REQUIRE(only.exit_code == 0);
    json report = parse_stdout(only);
    CHECK(report["kernels"].empty());
    CHECK(report["requests"] == 0);
    CHECK(read_text(box.dir.path() / "a.conf") == read_text(box.dir.path() / "b.conf"));
    CHECK(read_text(box.dir.path() / "a.conf").find("listen 127.0.0.1:8080;") != std::string::npos);

    check_error(run_mirror(box, {"--to", tree.string()}, endpoint), 2, {"--nginx-conf"});
    check_error(run_mirror(box, {"--to", tree.string(), "--nginx-conf", "x.conf", "--listen", "nowhere"}, endpoint), 2,
                {"--listen"});
    fs::create_directories(box.dir.path() / "empty");
    check_error(run_mirror(box, {"--to", (box.dir.path() / "empty").string(), "--nginx-conf", "x.conf"}, endpoint), 2,
                {"holds no mirrored repo"});
    check_error(run_mirror(box, {"vector-add", "--to", tree.string(), "--listen", "127.0.0.1:9"}, endpoint), 2,
                {"--nginx-conf"});
    check_error(run_mirror(box, {"no-such-kernel", "--to", tree.string()}, endpoint), 3, {"no-such-kernel"});
    write_text(box.dir.path() / "a-file", "not a folder");
    check_error(run_mirror(box, {"vector-add", "--to", (box.dir.path() / "a-file").string()}, endpoint), 1,
                {"cannot make the hub tree", "a-file"});
}

TEST_CASE("an nginx pull-through cache serves a second node with no file request reaching the hub or its CDN",
          "[mirror][nginx][needs:nginx]") {
    HubServer::Options paged;
    paged.page_size = 2;  // the listing comes in pages; nginx rewrites their Link to itself
    KernelHub hub(paged);
    Sandbox box;
    const int port = serve::free_port();
    serve::Nginx nginx(pull_through_config(hub.server().endpoint(), port), port);

    std::vector<json> nodes;
    std::vector<RequestCounts> counts;
    for (int node = 1; node <= 2; ++node) {
        hub.server().reset();
        ProcessResult got =
            fetch(box, "vector-add", nginx.endpoint(), box.dir.path() / ("node" + std::to_string(node)));
        INFO(describe(got));
        REQUIRE(got.exit_code == 0);
        nodes.push_back(parse_stdout(got));
        counts.push_back(count_requests(hub.server()));
        std::cout << "pull-through node " << node << ": kernhub made " << nodes.back()["requests"]
                  << " requests to nginx; reaching the hub and CDN: " << counts.back().describe() << std::endl;
    }
    // Node 1 filled the cache: the hub saw each request once, and nginx
    // followed the .so's redirect to the CDN itself.
    CHECK(counts[0].revision == 1);
    CHECK(counts[0].tree >= 2);
    CHECK(counts[0].hub_files == 2);  // metadata.json, and the .so's 302
    CHECK(counts[0].cdn == 1);
    // Node 2: only the revision lookup passes; listings and files are cached.
    CHECK(counts[1].revision == 1);
    CHECK(counts[1].total() == 1);
    CHECK(file_hashes(nodes[1]) == file_hashes(nodes[0]));
    CHECK(nodes[1]["commit"] == nodes[0]["commit"]);
}
