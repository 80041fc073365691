// Every byte is verified before use: blobs another tool (or a crash) left in
// the cache, files a variant's digest leaves out, and variants shaped like
// the hub's real kernels builds.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "digest/digest.hpp"
#include "fetch/fetcher.hpp"
#include "hub/hub_env.hpp"
#include "kernhub/kernhub.hpp"
#include "support/hub_builder.hpp"
#include "support/kernel_hub.hpp"
#include "support/slurp.hpp"

using namespace kernhub;
using namespace kernhub::test;
using kernhub::test::hub_env::code_of;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

Options options_for(const TempDir& dir, const std::string& endpoint) {
    Options o;
    o.endpoint = endpoint;
    o.cache_dir = (dir.path() / "cache").string();
    o.registries = {write_standard_registry(dir.path()).string()};
    o.project_dir = dir.path().string();
    o.no_default_registry = true;
    o.offline = false;
    o.token = "";
    o.retries = 1;
    return o;
}

fs::path repo_folder(const TempDir& dir, const std::string& name) {
    return dir.path() / "cache" / ("kernels--kernhub-test--" + name);
}

// Rewrites a read-only cached blob with one byte inverted.
void damage(const fs::path& blob, std::size_t offset) {
    std::string bytes = slurp(blob);
    REQUIRE(offset < bytes.size());
    bytes[offset] = static_cast<char>(~bytes[offset]);
    fs::permissions(blob, fs::perms::owner_write, fs::perm_options::add);
    std::ofstream(blob, std::ios::binary | std::ios::trunc) << bytes;
}

std::string b64_sha256(const std::string& text) {
    return digest::to_base64(*digest::from_hex(digest::sha256_hex(text)));
}

}  // namespace

TEST_CASE("an online fetch hashes cached blobs it has no record of and replaces damaged ones", "[hub][verify]") {
    KernelHub hub;
    TempDir dir;
    FetchResult first = Client(options_for(dir, hub.server().endpoint())).fetch("vector-add");
    const fs::path variant_dir = first.path;
    const fs::path so_blob = fs::canonical(variant_dir / "libvector_add.so");
    const fs::path metadata_blob = fs::canonical(variant_dir / "metadata.json");
    const std::string so_bytes = slurp(so_blob);
    // What a crash or another tool leaves: blobs and links, no kernhub record.
    fs::remove_all(repo_folder(dir, "vector-add") / ".kernhub");

    SECTION("a damaged LFS blob is downloaded again") {
        damage(so_blob, 100);
        hub.server().reset();
        FetchResult again = Client(options_for(dir, hub.server().endpoint())).fetch("vector-add");
        CHECK(hub.server().count_requests("/lfs/") == 1);
        CHECK(again.bytes_downloaded == so_bytes.size());
        CHECK(slurp(so_blob) == so_bytes);
        CHECK(digest::sha256_file_hex(so_blob) == so_blob.filename().string());
    }
    SECTION("a damaged metadata.json blob is downloaded again before its digests are used") {
        damage(metadata_blob, 2);
        hub.server().reset();
        FetchResult again = Client(options_for(dir, hub.server().endpoint())).fetch("vector-add");
        CHECK(hub.server().count_requests("metadata.json") == 1);
        CHECK(hub.server().count_requests("/lfs/") == 0);  // the intact .so is hashed, not fetched
        CHECK(digest::git_blob_sha1_file_hex(metadata_blob) == metadata_blob.filename().string());
        CHECK(again.files.size() == 2);
    }
    SECTION("intact blobs are kept, nothing is downloaded, and the variant is recorded again") {
        hub.server().reset();
        FetchResult again = Client(options_for(dir, hub.server().endpoint())).fetch("vector-add");
        CHECK(again.bytes_downloaded == 0);
        CHECK(hub.server().count_requests("/resolve/") == 0);
        CHECK(fs::exists(repo_folder(dir, "vector-add") / ".kernhub" / "variants" / first.commit /
                         (first.variant + ".json")));
    }
    SECTION("offline, a damaged blob is exit 4 naming the file") {
        damage(so_blob, 100);
        Options o = options_for(dir, hub.server().endpoint());
        o.offline = true;
        std::string message;
        CHECK(code_of([&] { Client(o).fetch("vector-add"); }, &message) == ErrorCode::verification);
        CHECK(message.find("libvector_add.so") != std::string::npos);
        CHECK(message.find("cached copy") != std::string::npos);
    }
}

TEST_CASE("a variant shaped like a real kernels build is accepted", "[hub][verify]") {
    TempDir dir;
    const std::string variant = host_cpu_variant();
    const std::string prefix = "build/" + variant + "/";
    const std::string init_py = "from ._ops import ops\n";
    const std::string ops_py = "ops = None\n";
    const std::string bundle = R"({"mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json"})";
    const std::string pyc = std::string("\x6f\x0d\x0d\x0a", 4) + "compiled";
    json files = {
        {prefix + "__init__.py", {{"text", init_py}}},
        {prefix + "_ops.py", {{"text", ops_py}}},
        {prefix + "_real_shape_5a1f2e3.abi3.so", {{"path", good_fixture_so().string()}}},
        {prefix + "metadata.json.sigstore", {{"text", bundle}}},
        {prefix + "__pycache__/__init__.cpython-311.pyc", {{"text", pyc}}},
    };
    // A second variant whose digest does not cover _ops.py (a file that must be).
    json unlisted = {{"digest", {{"algorithm", "sha256"}, {"files", {{"__init__.py", b64_sha256(init_py)}}}}}};
    json spec = {
        {"repos",
         {{{"repo_id", "kernhub-test/real-shape"},
           {"type", "kernel"},
           {"commits", {{{"message", "build"}, {"branches", {"main"}}, {"metadata", true}, {"files", files}}}}},
          {{"repo_id", "kernhub-test/unlisted"},
           {"type", "kernel"},
           {"commits",
            {{{"message", "build"},
              {"branches", {"main"}},
              {"metadata", true},
              {"metadata_extra", unlisted},
              {"files",
               {{prefix + "__init__.py", {{"text", init_py}}}, {prefix + "_ops.py", {{"text", ops_py}}}}}}}}}}}};
    make_hub(spec, dir.path() / "hub");
    HubServer server(dir.path() / "hub");
    Options o = options_for(dir, server.endpoint());

    SECTION("every file but Python bytecode is fetched and checked against the hub's listing") {
        FetchResult result = Client(o).fetch("kernhub-test/real-shape");
        CHECK(result.variant == variant);
        std::vector<std::string> paths;
        for (const auto& f : result.files) paths.push_back(f.path);
        std::sort(paths.begin(), paths.end());
        CHECK(paths == std::vector<std::string>{"__init__.py", "_ops.py", "_real_shape_5a1f2e3.abi3.so",
                                                "metadata.json", "metadata.json.sigstore"});
        CHECK(slurp(fs::path(result.path) / "metadata.json.sigstore") == bundle);
        // No digest covers bytecode, and Python would run a .pyc in place of
        // the verified source: like the kernels library, never fetch it.
        CHECK_FALSE(fs::exists(fs::path(result.path) / "__pycache__"));
        CHECK(server.count_requests("__pycache__") == 0);
        CHECK(digest::sha256_file_hex(fs::path(result.path) / "_real_shape_5a1f2e3.abi3.so") ==
              digest::sha256_file_hex(good_fixture_so()));
    }
    SECTION("a file left out of the digest is still checked against the hub's hash") {
        server.add_faults({{{"match", "sigstore"}, {"action", "corrupt"}, {"count", -1}}});
        std::string message;
        CHECK(code_of([&] { Client(o).fetch("kernhub-test/real-shape"); }, &message) == ErrorCode::verification);
        CHECK(message.find("metadata.json.sigstore") != std::string::npos);
        CHECK(message.find("git blob sha1") != std::string::npos);
    }
    SECTION("any other file the digest does not cover is refused") {
        std::string message;
        CHECK(code_of([&] { Client(o).fetch("kernhub-test/unlisted"); }, &message) == ErrorCode::verification);
        CHECK(message.find("_ops.py") != std::string::npos);
        CHECK(message.find("not covered") != std::string::npos);
    }
}

TEST_CASE("excluded_from_digest follows the kernels rule", "[hub][verify]") {
    for (const char* path : {"metadata.json", "metadata.json.sigstore", "__pycache__/a.cpython-311.pyc",
                             "pkg/__pycache__/deep/notes.txt", "pkg/mod.pyc", "x.pyc"}) {
        INFO(path);
        CHECK(fetch::excluded_from_digest(path));
    }
    for (const char* path :
         {"pkg/metadata.json", "pkg/metadata.json.sigstore", "notmetadata.json", "metadata.json.sigstore.txt",
          "__pycache__x/a.py", "a__pycache__/b.py", "mod.pyc.txt", "_ops.py", "lib.abi3.so"}) {
        INFO(path);
        CHECK_FALSE(fetch::excluded_from_digest(path));
    }
}

TEST_CASE("a metadata digest mismatch on a cached blob leaves the blob for the snapshots that use it",
          "[hub][verify]") {
    TempDir dir;
    const std::string so_path = "build/" + host_cpu_variant() + "/libkh_good.so";
    json files = {{so_path, {{"path", good_fixture_so().string()}}}};
    json wrong = {{"digest", {{"algorithm", "sha256"}, {"files", {{"libkh_good.so", b64_sha256("other bytes")}}}}}};
    json spec = {{"repos",
                  {{{"repo_id", "kernhub-test/shared"},
                    {"type", "kernel"},
                    {"commits",
                     {{{"message", "good"}, {"branches", {"main"}}, {"metadata", true}, {"files", files}},
                      {{"message", "bad digest"},
                       {"branches", {"bad"}},
                       {"metadata", true},
                       {"metadata_extra", wrong},
                       {"files", files}}}}}}}};
    make_hub(spec, dir.path() / "hub");
    HubServer server(dir.path() / "hub");
    Options o = options_for(dir, server.endpoint());
    FetchResult good = Client(o).fetch("kernhub-test/shared");
    const fs::path link = fs::path(good.path) / "libkh_good.so";
    const fs::path blob = fs::canonical(link);
    fs::remove_all(dir.path() / "cache" / "kernels--kernhub-test--shared" / ".kernhub");

    server.reset();
    std::string message;
    CHECK(code_of([&] { Client(o).fetch("kernhub-test/shared@bad"); }, &message) == ErrorCode::verification);
    CHECK(message.find("metadata.json") != std::string::npos);
    CHECK(fs::exists(blob));
    CHECK(fs::is_regular_file(link));            // the good commit's link still resolves
    CHECK(server.count_requests("/lfs/") == 0);  // nothing to gain from fetching it again
}

TEST_CASE("a warm fetch does not follow snapshot links or blobs out of the cache", "[hub][verify]") {
    KernelHub hub;
    TempDir dir;
    Options o = options_for(dir, hub.server().endpoint());
    FetchResult first = Client(o).fetch("vector-add");
    const fs::path link = fs::path(first.path) / "libvector_add.so";
    const std::string good = slurp(link);
    const std::string target = fs::read_symlink(link).string();
    const fs::path outside = dir.path() / "evil.so";
    std::ofstream(outside) << "not the kernel";

    SECTION("a snapshot link pointing elsewhere is put back") {
        fs::remove(link);
        fs::create_symlink(outside, link);
        o.offline = true;
        Client(o).fetch("vector-add");
        CHECK(fs::read_symlink(link).string() == target);
        CHECK(slurp(link) == good);
    }
    SECTION("a blob replaced by a symlink is downloaded again") {
        const fs::path blob = fs::canonical(link);
        fs::remove(blob);
        fs::create_symlink(outside, blob);
        hub.server().reset();
        FetchResult again = Client(o).fetch("vector-add");
        CHECK(hub.server().count_requests("/lfs/") == 1);
        CHECK_FALSE(fs::is_symlink(blob));
        CHECK(slurp(link) == good);
        CHECK(again.bytes_downloaded == good.size());
    }
}

TEST_CASE("cache files that are FIFOs or symlinks do not hang or mislead a fetch", "[hub][verify]") {
    KernelHub hub;
    TempDir dir;
    Options o = options_for(dir, hub.server().endpoint());
    FetchResult first = Client(o).fetch("vector-add");
    const fs::path folder = repo_folder(dir, "vector-add");
    const fs::path record = folder / ".kernhub" / "variants" / first.commit / (first.variant + ".json");
    fs::remove(folder / "refs" / "main");
    REQUIRE(::mkfifo((folder / "refs" / "main").c_str(), 0644) == 0);
    fs::remove(record);
    REQUIRE(::mkfifo(record.c_str(), 0644) == 0);
    fs::create_symlink("/dev/zero", folder / ".kernhub" / "trees" / "x");  // unrelated, must stay unread

    FetchResult again = Client(o).fetch("vector-add");  // returns instead of blocking on a FIFO
    CHECK(again.commit == first.commit);
    CHECK(fs::is_regular_file(fs::symlink_status(folder / "refs" / "main")));
    CHECK(fs::is_regular_file(fs::symlink_status(record)));
}

TEST_CASE("a SHA-512 metadata digest checks every file, and a digest without its algorithm is refused",
          "[hub][verify]") {
    TempDir dir;
    const std::string so_path = "build/" + host_cpu_variant() + "/libkh_good.so";
    const std::string so = slurp(good_fixture_so());
    const auto b64_sha512 = [](const std::string& text) {
        digest::Hasher hasher(digest::Algorithm::sha512);
        hasher.update(text.data(), text.size());
        return digest::to_base64(hasher.finish());
    };
    const auto with_digest = [&](const json& digest_doc, const std::string& branch) {
        return json{{"message", branch},
                    {"branches", {branch}},
                    {"metadata", true},
                    {"metadata_extra",
                     {{"digest", digest_doc},
                      {"python-depends", {"einops"}},
                      {"provenance", {{"builder", "kernel-builder"}}}}},
                    {"files", {{so_path, {{"path", good_fixture_so().string()}}}}}};
    };
    json spec = {
        {"repos",
         {{{"repo_id", "kernhub-test/sha512"},
           {"type", "kernel"},
           {"commits",
            {with_digest({{"algorithm", "sha512"}, {"files", {{"libkh_good.so", b64_sha512(so)}}}}, "main"),
             with_digest({{"algorithm", "sha512"}, {"files", {{"libkh_good.so", b64_sha512(so + "x")}}}}, "wrong"),
             // The right bytes' SHA-256 under the name sha512: no fallback.
             with_digest({{"algorithm", "sha512"}, {"files", {{"libkh_good.so", b64_sha256(so)}}}}, "short"),
             with_digest({{"files", {{"libkh_good.so", b64_sha256(so)}}}}, "no-algorithm"),
             with_digest({{"algorithm", "SHA512"}, {"files", {{"libkh_good.so", b64_sha512(so)}}}}, "upper")}}}}}};
    make_hub(spec, dir.path() / "hub");
    HubServer server(dir.path() / "hub");
    Options o = options_for(dir, server.endpoint());

    FetchResult good = Client(o).fetch("kernhub-test/sha512");
    CHECK(digest::sha256_file_hex(fs::path(good.path) / "libkh_good.so") ==
          digest::sha256_file_hex(good_fixture_so()));
    CHECK(good.python_depends == R"(["einops"])");
    CHECK(good.provenance == R"({"builder":"kernel-builder"})");

    const std::pair<const char*, const char*> refused[] = {
        {"kernhub-test/sha512@wrong", "does not match the digest in its variant's metadata.json"},
        {"kernhub-test/sha512@short", "does not match the digest in its variant's metadata.json"},
        {"kernhub-test/sha512@no-algorithm", "needs a string \"algorithm\""},
        {"kernhub-test/sha512@upper", "unknown digest algorithm \"SHA512\""},
    };
    for (const auto& [ref, why] : refused) {
        INFO(ref);
        std::string message;
        CHECK(code_of([&] { Client(o).fetch(ref); }, &message) == ErrorCode::verification);
        INFO(message);
        CHECK(message.find(why) != std::string::npos);
    }
}

TEST_CASE("info reads the selected variant's python-depends and provenance", "[hub][verify]") {
    TempDir dir;
    const std::string so_path = "build/" + host_cpu_variant() + "/libkh_good.so";
    json spec = {{"repos",
                  {{{"repo_id", "kernhub-test/described"},
                    {"type", "kernel"},
                    {"commits",
                     {{{"message", "with"},
                       {"branches", {"main"}},
                       {"metadata", true},
                       {"metadata_extra", {{"python-depends", {"einops", "numpy"}}, {"provenance", {{"ci", 7}}}}},
                       {"files", {{so_path, {{"path", good_fixture_so().string()}}}}}},
                      {{"message", "without"},
                       {"branches", {"bare"}},
                       {"files", {{so_path, {{"path", good_fixture_so().string()}}}}}}}}}}}};
    make_hub(spec, dir.path() / "hub");
    HubServer server(dir.path() / "hub");
    Options o = options_for(dir, server.endpoint());

    InfoResult cold = Client(o).info("kernhub-test/described");
    CHECK(cold.python_depends == R"(["einops","numpy"])");
    CHECK(cold.provenance == R"({"ci":7})");
    CHECK(server.count_requests("metadata.json") == 1);
    CHECK_FALSE(fs::exists(repo_folder(dir, "described") / "snapshots" / cold.commit / "build"));  // read, not placed

    InfoResult bare = Client(o).info("kernhub-test/described@bare");
    CHECK(bare.python_depends.empty());
    CHECK(bare.provenance.empty());

    // Once fetched, info reads the cached copy: no request for it.
    Client(o).fetch("kernhub-test/described");
    server.reset();
    InfoResult warm = Client(o).info("kernhub-test/described");
    CHECK(warm.python_depends == cold.python_depends);
    CHECK(server.count_requests("metadata.json") == 0);

    // Offline, from the cached copy.
    o.offline = true;
    CHECK(Client(o).info("kernhub-test/described").provenance == R"({"ci":7})");
}
