// Self-test of the test hub: make_hub.py's layout and hub_server.py's
// protocol, faults and stats, checked over real loopback HTTP.
#include <chrono>
#include <fstream>
#include <iterator>
#include <sstream>
#include <thread>

#include <openssl/evp.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "support/build_paths.hpp"
#include "support/hub_builder.hpp"
#include "support/hub_server.hpp"
#include "support/process.hpp"
#include "support/slurp.hpp"
#include "support/temp_dir.hpp"

namespace fs = std::filesystem;
using kernhub::test::HttpReply;
using kernhub::test::HubServer;
using kernhub::test::TempDir;
using nlohmann::json;

namespace {

std::string digest(const EVP_MD* md, const std::string& data) {
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned int size = 0;
    REQUIRE(EVP_Digest(data.data(), data.size(), out, &size, md, nullptr) == 1);
    return std::string(reinterpret_cast<char*>(out), size);
}

std::string hex(const std::string& bytes) {
    static const char digits[] = "0123456789abcdef";
    std::string text;
    for (unsigned char c : bytes) {
        text += digits[c >> 4];
        text += digits[c & 15];
    }
    return text;
}

std::string base64(const std::string& bytes) {
    std::string text(4 * ((bytes.size() + 2) / 3) + 1, '\0');
    const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(text.data()),
                                  reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
    text.resize(static_cast<size_t>(n));
    return text;
}

std::string git_blob_sha1(const std::string& content) {
    return hex(digest(EVP_sha1(), "blob " + std::to_string(content.size()) + '\0' + content));
}

std::string read_file(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return kernhub::test::read_all(in);
}

// A public kernel repo with two commits (v1 stays on the first, main moves to
// the second), a private kernel repo and a model repo.
struct DemoHub {
    TempDir dir;
    std::string library;  // the LFS ".so"
    fs::path root = dir.path() / "hub";
    json index;

    DemoHub() {
        for (int i = 0; i < 5000; ++i) {
            library += static_cast<char>((i * 131 + 7) & 0xff);
        }
        const auto library_path = dir.path() / "libdemo.so";
        std::ofstream(library_path, std::ios::binary) << library;
        const json spec = {
            {"repos",
             json::array(
                 {{{"repo_id", "acme/demo"},
                   {"type", "kernel"},
                   {"commits",
                    json::array({{{"message", "first"},
                                  {"branches", {"main", "v1"}},
                                  {"metadata", true},
                                  {"files",
                                   {{"README.md", {{"text", "demo v1\n"}}},
                                    {"build/native-cpu-x86_64-linux/libdemo.so", {{"path", library_path.string()}}}}}},
                                 {{"message", "second"},
                                  {"branches", {"main"}},
                                  {"tags", {"release"}},
                                  {"metadata", true},
                                  {"files",
                                   {{"README.md", {{"text", "demo v2\n"}}},
                                    {"build/native-cpu-x86_64-linux/libdemo.so", {{"path", library_path.string()}}},
                                    {"build/native-cuda/demo.cubin", {{"text", "not really a cubin"}}}}}}})}},
                  {{"repo_id", "acme/secret"},
                   {"type", "kernel"},
                   {"private", true},
                   {"commits",
                    json::array({{{"branches", {"main"}}, {"files", {{"README.md", {{"text", "secret\n"}}}}}}})}},
                  {{"repo_id", "acme/model"},
                   {"type", "model"},
                   {"commits",
                    json::array({{{"branches", {"main"}}, {"files", {{"config.json", {{"text", "{}\n"}}}}}}})}}})}};
        kernhub::test::make_hub(spec, root);
        index = json::parse(read_file(root / "_hub.json"));
    }

    std::string commit(size_t i) const { return index["repos"]["acme/demo"]["commits"][i]; }
    std::string library_sha256() const { return hex(digest(EVP_sha256(), library)); }
};

HttpReply get(const std::string& url, const std::vector<std::string>& headers = {}) {
    return kernhub::test::http_request("GET", url, headers);
}

}  // namespace

TEST_CASE("make_hub lays out revisions, refs, listings and files", "[hubserver]") {
    DemoHub hub;
    const json& demo = hub.index["repos"]["acme/demo"];
    REQUIRE(demo["commits"].size() == 2);
    CHECK(demo["branches"]["main"] == hub.commit(1));
    CHECK(demo["branches"]["v1"] == hub.commit(0));
    CHECK(demo["tags"]["release"] == hub.commit(1));

    const fs::path api = hub.root / "api/kernels/acme/demo";
    const json v1 = json::parse(read_file(api / "revision/v1"));
    CHECK(v1["sha"] == hub.commit(0));
    CHECK(v1["siblings"].size() == 3);  // README, the library and the generated metadata.json

    const json listing = json::parse(read_file(api / "tree" / hub.commit(1) / "build"));
    REQUIRE(listing.size() == 6);  // two variant directories, each with two files
    const json& library_entry = listing[1];
    CHECK(library_entry["path"] == "build/native-cpu-x86_64-linux/libdemo.so");
    CHECK(library_entry["oid"] == git_blob_sha1(hub.library));
    CHECK(library_entry["lfs"]["oid"] == hub.library_sha256());
    CHECK(library_entry["lfs"]["size"] == 5000);
    CHECK_FALSE(listing[2].contains("lfs"));  // metadata.json stays a plain file

    const fs::path files = hub.root / "kernels/acme/demo/resolve" / hub.commit(1);
    CHECK(read_file(files / "build/native-cpu-x86_64-linux/libdemo.so") == hub.library);
    const json metadata = json::parse(read_file(files / "build/native-cpu-x86_64-linux/metadata.json"));
    CHECK(metadata["id"] == "acme/demo");
    CHECK(metadata["digest"]["files"]["libdemo.so"] == base64(digest(EVP_sha256(), hub.library)));
    CHECK(json::parse(read_file(files / "build/native-cuda/metadata.json"))["backend"]["type"] == "cuda");
    CHECK(fs::exists(hub.root / "acme/model/resolve" /
                     hub.index["repos"]["acme/model"]["commits"][0].get<std::string>() / "config.json"));

    std::ofstream(hub.dir.path() / "bad.json") << R"({"repos": [{"repo_id": "a/b", "colour": "red"}]})";
    const auto bad = kernhub::test::run_process(
        {KERNHUB_PYTHON, std::string(KERNHUB_SOURCE_DIR) + "/examples/hub/make_hub.py", "--spec",
         (hub.dir.path() / "bad.json").string(), "--out", (hub.dir.path() / "out").string()});
    CHECK(bad.exit_code == 2);
    CHECK_THAT(bad.err, Catch::Contains("unknown field 'colour'"));
    CHECK_FALSE(fs::exists(hub.dir.path() / "out"));
}

TEST_CASE("the hub server answers revisions and refs", "[hubserver]") {
    DemoHub hub;
    HubServer server(hub.root);
    const std::string api = server.endpoint() + "/api/kernels/acme/demo";

    CHECK(json::parse(get(api + "/revision/main").body)["sha"] == hub.commit(1));
    CHECK(json::parse(get(api + "/revision/v1?expand=sha").body)["sha"] == hub.commit(0));
    CHECK(json::parse(get(api + "/revision/" + hub.commit(0)).body)["sha"] == hub.commit(0));
    const json refs = json::parse(get(api + "/refs").body);
    CHECK(refs["branches"][1] == json{{"name", "v1"}, {"ref", "refs/heads/v1"}, {"targetCommit", hub.commit(0)}});
    CHECK(refs["tags"][0]["name"] == "release");

    const HttpReply no_rev = get(api + "/revision/v9");
    CHECK(no_rev.status == 404);
    CHECK(no_rev.header("x-error-code") == "RevisionNotFound");
    const HttpReply no_repo = get(server.endpoint() + "/api/kernels/acme/nothing/revision/main");
    CHECK(no_repo.status == 404);
    CHECK(no_repo.header("x-error-code") == "RepoNotFound");
    CHECK(no_repo.header("x-error-message") == "Repository not found");
    // A repo is only found under the prefix of its own type.
    CHECK(get(server.endpoint() + "/api/models/acme/demo/revision/main").header("x-error-code") == "RepoNotFound");
    CHECK(get(server.endpoint() + "/api/models/acme/model/revision/main").status == 200);
    CHECK(get(server.endpoint() + "/acme/model/resolve/main/config.json").body == "{}\n");
    CHECK(get(server.endpoint() + "/kernels/acme/model/resolve/main/config.json").status == 404);
}

TEST_CASE("the hub server paginates tree listings with Link headers", "[hubserver]") {
    DemoHub hub;
    HubServer server(hub.root, {"", 2});
    json entries = json::array();
    size_t pages = 0;
    std::string url = server.endpoint() + "/api/kernels/acme/demo/tree/release/build?recursive=true";
    while (!url.empty()) {
        const HttpReply page = get(url);
        REQUIRE(page.status == 200);
        ++pages;
        for (const auto& entry : json::parse(page.body)) {
            entries.push_back(entry);
        }
        const std::string link = page.header("link");
        CHECK((link.empty() || link.find("; rel=\"next\"") != std::string::npos));
        url = link.empty() ? "" : link.substr(1, link.find('>') - 1);
    }
    CHECK(pages == 3);
    CHECK(entries == json::parse(read_file(hub.root / "api/kernels/acme/demo/tree" / hub.commit(1) / "build")));

    const std::string tree = server.endpoint() + "/api/kernels/acme/demo/tree/main/";
    const json variant = json::parse(get(tree + "build/native-cuda?recursive=true").body);
    REQUIRE(variant.size() == 2);
    CHECK(variant[0]["path"] == "build/native-cuda/demo.cubin");
    CHECK(get(tree + "build/native-rocm?recursive=true").header("x-error-code") == "EntryNotFound");
}

TEST_CASE("the hub server resolves plain files, and LFS files through the CDN", "[hubserver]") {
    DemoHub hub;
    HubServer server(hub.root);
    const std::string resolve = server.endpoint() + "/kernels/acme/demo/resolve/";

    const HttpReply readme = get(resolve + "v1/README.md");
    CHECK(readme.status == 200);
    CHECK(readme.body == "demo v1\n");
    CHECK(readme.header("etag") == '"' + git_blob_sha1("demo v1\n") + '"');
    CHECK(readme.header("x-repo-commit") == hub.commit(0));

    const HttpReply redirect =
        kernhub::test::http_request("HEAD", resolve + "main/build/native-cpu-x86_64-linux/libdemo.so");
    CHECK(redirect.status == 302);
    CHECK(redirect.header("x-repo-commit") == hub.commit(1));
    CHECK(redirect.header("x-linked-etag") == '"' + hub.library_sha256() + '"');
    CHECK(redirect.header("x-linked-size") == "5000");
    const std::string location = redirect.header("location");
    CHECK(location == server.cdn() + "/lfs/" + hub.library_sha256() + "?repo=acme%2Fdemo");
    CHECK(server.cdn().rfind("http://127.0.0.2:", 0) == 0);

    const HttpReply blob = get(location);
    CHECK(blob.status == 200);
    CHECK(blob.body == hub.library);
    CHECK(blob.header("etag") == '"' + hub.library_sha256() + '"');

    const HttpReply missing = get(resolve + "main/build/nothing.so");
    CHECK(missing.status == 404);
    CHECK(missing.header("x-error-code") == "EntryNotFound");
    CHECK(missing.header("x-repo-commit") == hub.commit(1));
    CHECK(get(resolve + "v7/README.md").header("x-error-code") == "RevisionNotFound");
}

TEST_CASE("the hub server honours Range and If-Range on both hosts", "[hubserver]") {
    DemoHub hub;
    HubServer server(hub.root);
    const std::string blob = server.cdn() + "/lfs/" + hub.library_sha256();
    const std::string etag = '"' + hub.library_sha256() + '"';

    const HttpReply tail = get(blob, {"Range: bytes=100-"});
    CHECK(tail.status == 206);
    CHECK(tail.header("content-range") == "bytes 100-4999/5000");
    CHECK(tail.body == hub.library.substr(100));
    CHECK(get(blob, {"Range: bytes=100-", "If-Range: " + etag}).status == 206);
    const HttpReply changed = get(blob, {"Range: bytes=100-", "If-Range: \"0000\""});
    CHECK(changed.status == 200);
    CHECK(changed.body == hub.library);
    CHECK(get(blob, {"Range: bytes=5000-"}).status == 416);

    const HttpReply middle = get(server.endpoint() + "/kernels/acme/demo/resolve/main/README.md", {"Range: bytes=2-4"});
    CHECK(middle.status == 206);
    CHECK(middle.body == "mo ");
    CHECK(middle.header("content-range") == "bytes 2-4/8");
}

TEST_CASE("the hub server hides private repos from requests without the token", "[hubserver]") {
    DemoHub hub;
    HubServer server(hub.root, {"s3cret"});
    const std::string revision = server.endpoint() + "/api/kernels/acme/secret/revision/main";
    const std::string readme = server.endpoint() + "/kernels/acme/secret/resolve/main/README.md";

    for (const auto& headers : {std::vector<std::string>{}, std::vector<std::string>{"Authorization: Bearer wrong"}}) {
        const HttpReply denied = get(revision, headers);
        CHECK(denied.status == 401);
        CHECK(denied.header("x-error-code") == "RepoNotFound");
        CHECK(get(readme, headers).status == 401);
    }
    const std::vector<std::string> token{"Authorization: Bearer s3cret"};
    CHECK(get(revision, token).status == 200);
    CHECK(get(readme, token).body == "secret\n");
}

TEST_CASE("the hub server injects faults as told", "[hubserver]") {
    DemoHub hub;
    HubServer server(hub.root);
    const std::string readme = server.endpoint() + "/kernels/acme/demo/resolve/main/README.md";
    const std::string blob = server.cdn() + "/lfs/" + hub.library_sha256();

    server.add_faults({{{"match", "README.md"},
                        {"action", "status"},
                        {"status", 503},
                        {"retry_after", "0"},
                        {"error_code", "Overloaded"}}});
    const HttpReply busy = get(readme);
    CHECK(busy.status == 503);
    CHECK(busy.header("retry-after") == "0");
    CHECK(busy.header("x-error-code") == "Overloaded");
    CHECK(get(readme).status == 200);

    server.add_faults({{{"match", "/lfs/"}, {"action", "truncate"}, {"after_bytes", 100}}});
    CHECK(kernhub::test::http_request("HEAD", blob).status == 200);  // no body: the rule waits for one
    const HttpReply cut = get(blob);
    CHECK_FALSE(cut.error.empty());
    CHECK(cut.header("content-length") == "5000");
    CHECK(cut.body == hub.library.substr(0, 100));

    server.add_faults({{{"match", "/lfs/"}, {"action", "corrupt"}}});
    const HttpReply corrupt = get(blob);
    REQUIRE(corrupt.body.size() == hub.library.size());
    size_t differing = 0;
    for (size_t i = 0; i < corrupt.body.size(); ++i) {
        differing += corrupt.body[i] != hub.library[i] ? 1 : 0;
    }
    CHECK(differing == 1);
    CHECK(get(blob).body == hub.library);

    server.add_faults({{{"match", "/refs"}, {"action", "status"}, {"status", 500}, {"count", 2}},
                       {{"match", "/revision/"}, {"action", "status"}, {"status", 429}, {"count", -1}}});
    const std::string api = server.endpoint() + "/api/kernels/acme/demo";
    CHECK(get(api + "/refs").status == 500);
    CHECK(get(api + "/refs").status == 500);
    CHECK(get(api + "/refs").status == 200);
    CHECK(get(api + "/revision/main").status == 429);
    CHECK(get(api + "/revision/main").status == 429);
    server.reset();
    CHECK(get(api + "/revision/main").status == 200);

    server.add_faults({{{"match", "/refs"}, {"action", "delay"}, {"seconds", 0.3}}});
    const auto start = std::chrono::steady_clock::now();
    CHECK(get(api + "/refs").status == 200);
    CHECK(std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(300));
}

TEST_CASE("the hub server holds requests at a gate until it is released or reset", "[hubserver]") {
    DemoHub hub;
    HubServer server(hub.root);
    const std::string api = server.endpoint() + "/api/kernels/acme/demo";
    server.add_faults({{{"match", "/refs"}, {"action", "hold"}, {"gate", "g"}, {"count", 2}}});
    HttpReply first;
    HttpReply second;
    std::thread one([&] { first = get(api + "/refs"); });
    std::thread two([&] { second = get(api + "/refs"); });
    const bool both_held = server.wait_held("g", 2);
    const json held = server.stats()["held"];
    // Other requests pass while those wait.
    const long other = get(api + "/revision/main").status;
    server.release("g");
    one.join();
    two.join();
    CHECK(both_held);
    CHECK(held["g"] == 2);
    CHECK(other == 200);
    CHECK(first.status == 200);
    CHECK(second.status == 200);
    CHECK(server.stats()["held"]["g"] == 0);

    // A reset lets a held request go too, and closes the gate again.
    server.reset();
    server.add_faults({{{"match", "/refs"}, {"action", "hold"}, {"gate", "g"}}});
    HttpReply third;
    std::thread three([&] { third = get(api + "/refs"); });
    const bool third_held = server.wait_held("g");
    server.reset();
    three.join();
    CHECK(third_held);
    CHECK(third.status == 200);
}

TEST_CASE("the hub server records requests, but not control calls", "[hubserver]") {
    DemoHub hub;
    HubServer server(hub.root);
    const HttpReply revision =
        get(server.endpoint() + "/api/kernels/acme/demo/revision/main", {"Authorization: Bearer anything"});
    get(server.cdn() + "/lfs/" + hub.library_sha256(), {"Range: bytes=10-"});
    get(server.endpoint() + "/api/kernels/acme/demo/revision/v9");

    const json requests = server.stats()["requests"];
    REQUIRE(requests.size() == 3);
    CHECK(requests[0] == json{{"host", "hub"},
                              {"method", "GET"},
                              {"path", "/api/kernels/acme/demo/revision/main"},
                              {"status", 200},
                              {"auth", true},
                              {"range", nullptr},
                              {"sent", revision.body.size()}});
    CHECK(requests[1]["host"] == "cdn");
    CHECK(requests[1]["auth"] == false);
    CHECK(requests[1]["status"] == 206);
    CHECK(requests[1]["range"] == "bytes=10-");
    CHECK(requests[1]["sent"] == hub.library.size() - 10);
    CHECK(requests[2]["status"] == 404);
    CHECK(server.count_requests("/revision/") == 2);
    CHECK(server.count_requests("/lfs/") == 1);

    server.reset();
    CHECK(server.stats()["requests"].empty());
}

TEST_CASE("a hub server that cannot start reports why", "[hubserver]") {
    TempDir empty;
    try {
        HubServer server(empty.path());
        FAIL("the server started without a hub tree");
    } catch (const std::runtime_error& e) {
        CHECK_THAT(e.what(), Catch::Contains("_hub.json"));
    }
}

TEST_CASE("run_process captures output, exit codes and environment changes", "[hubserver]") {
    using kernhub::test::run_process;
    TempDir dir;
    // More than a pipe buffer on both streams at once must not deadlock.
    const auto loud = run_process({"sh", "-c", "head -c 300000 /dev/zero; head -c 200000 /dev/zero >&2; exit 3"});
    CHECK(loud.exit_code == 3);
    CHECK(loud.out.size() == 300000);
    CHECK(loud.err.size() == 200000);

    const auto env = run_process({"sh", "-c", "printf '%s|%s|' \"$KH_SET\" \"${HOME-unset}\"; pwd"},
                                 {{"KH_SET", "yes"}, {"HOME", std::nullopt}}, dir.path().string());
    CHECK(env.out == "yes|unset|" + fs::canonical(dir.path()).string() + "\n");
    CHECK(run_process({"sh", "-c", "kill -TERM $$"}).exit_code == 128 + 15);
    CHECK_THROWS_AS(run_process({"/nonexistent/program"}), std::runtime_error);
}
