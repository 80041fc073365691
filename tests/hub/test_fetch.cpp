// The whole pipeline through the public API against a real loopback hub.
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "cache/cache.hpp"
#include "hub/hub_env.hpp"
#include "kernhub/cuda.hpp"
#include "kernhub/kernhub.hpp"
#include "support/build_paths.hpp"
#include "support/hub_builder.hpp"
#include "support/kernel_hub.hpp"
#include "support/process.hpp"
#include "support/slurp.hpp"

using namespace kernhub;
using namespace kernhub::test;
using namespace kernhub::test::hub_env;
namespace fs = std::filesystem;

namespace {

fs::path repo_folder(const Env& env, const std::string& name) {
    return env.cache / ("kernels--kernhub-test--" + name);
}

// Every regular file under blobs/, and whether any temp file is left.
std::vector<fs::path> blobs_of(const fs::path& folder) {
    std::vector<fs::path> out;
    if (!fs::exists(folder / "blobs")) return out;
    for (const auto& e : fs::directory_iterator(folder / "blobs")) out.push_back(e.path());
    return out;
}

// Every non-directory entry under snapshots/, as "<path inside the commit
// folder>" (the commit folder itself dropped), sorted; links are not followed.
std::vector<std::string> snapshot_entries(const fs::path& folder) {
    std::vector<std::string> out;
    const fs::path snapshots = folder / "snapshots";
    if (!fs::exists(snapshots)) return out;
    for (auto it = fs::recursive_directory_iterator(snapshots); it != fs::recursive_directory_iterator(); ++it) {
        if (it->is_directory() && !it->is_symlink()) continue;
        const fs::path relative = it->path().lexically_relative(snapshots);
        out.push_back(relative.lexically_relative(*relative.begin()).generic_string());
    }
    std::sort(out.begin(), out.end());
    return out;
}

// Inverts one byte of a (read-only) cached file in place.
void flip_byte(const fs::path& file, std::streamoff offset) {
    fs::permissions(file, fs::perms::owner_write, fs::perm_options::add);
    std::fstream io(file, std::ios::in | std::ios::out | std::ios::binary);
    io.seekg(offset);
    char c = 0;
    io.get(c);
    io.seekp(offset);
    io.put(static_cast<char>(~c));
}

}  // namespace

TEST_CASE("cold fetch over HTTP downloads only the selected variant and verifies it", "[hub]") {
    KernelHub hub;
    Env env;
    Client client(env.options(hub.server().endpoint()));
    FetchResult result = client.fetch("vector-add");

    CHECK(result.variant == host_cpu_variant());
    CHECK(result.repo_id == "kernhub-test/vector-add");
    CHECK(result.commit.size() == 40);
    REQUIRE(result.files.size() == 2);  // libvector_add.so + metadata.json, nothing of other variants
    std::uint64_t total = 0;
    for (const auto& f : result.files) total += f.size;
    CHECK(result.bytes_downloaded == total);
    // revision + tree + metadata.json + (302 + CDN) for the .so
    CHECK(result.requests == 5);
    CHECK(hub.server().count_requests("/resolve/") == 2);
    CHECK(hub.server().count_requests("native-cu128") == 0);

    fs::path so = fs::path(result.path) / "libvector_add.so";
    REQUIRE(fs::is_symlink(so));
    CHECK(fs::read_symlink(so).is_relative());
    CHECK(fs::read_symlink(so).string().rfind("../../../../blobs/", 0) == 0);
    struct stat st {};
    REQUIRE(stat(so.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0444);
    std::ifstream ref(repo_folder(env, "vector-add") / "refs" / "main");
    std::string commit = kernhub::test::read_all(ref);
    CHECK(commit == result.commit);
    auto so_info = std::find_if(result.files.begin(), result.files.end(),
                                [](const FileInfo& f) { return f.path == "libvector_add.so"; });
    REQUIRE(so_info != result.files.end());
    CHECK(fs::is_regular_file(repo_folder(env, "vector-add") / "blobs" / so_info->sha256));  // LFS: etag = sha256
}

TEST_CASE("warm fetch of a branch makes one API request and downloads nothing", "[hub]") {
    KernelHub hub;
    Env env;
    Client(env.options(hub.server().endpoint())).fetch("vector-add");
    hub.server().reset();

    FetchResult warm = Client(env.options(hub.server().endpoint())).fetch("vector-add");
    CHECK(warm.requests == 1);
    CHECK(warm.bytes_downloaded == 0);
    CHECK(hub.server().stats()["requests"].size() == 1);
    CHECK(hub.server().count_requests("/revision/main") == 1);

    SECTION("a 40-hex commit makes no request at all") {
        hub.server().reset();
        FetchResult pinned =
            Client(env.options(hub.server().endpoint())).fetch("kernhub-test/vector-add@" + warm.commit);
        CHECK(pinned.requests == 0);
        CHECK(pinned.commit == warm.commit);
        CHECK(hub.server().stats()["requests"].empty());
    }
    SECTION("offline makes no request and finds the cached variant") {
        hub.server().reset();
        Options o = env.options(hub.server().endpoint());
        o.offline = true;
        FetchResult offline = Client(o).fetch("vector-add");
        CHECK(offline.requests == 0);
        CHECK(offline.path == warm.path);
        CHECK(hub.server().stats()["requests"].empty());
    }
}

TEST_CASE("a client that fetched a kernel still checks the cache on the next fetch", "[hub]") {
    // The client keeps the parsed listing and record of what it fetched;
    // the files themselves must still be checked every time.
    KernelHub hub;
    Env env;
    Options o = env.options(hub.server().endpoint());
    Client client(o);
    FetchResult first = client.fetch("vector-add");
    const fs::path so = fs::path(first.path) / "libvector_add.so";
    const fs::path blob = fs::canonical(so);
    REQUIRE(fs::is_symlink(so));

    SECTION("a removed snapshot link is made again from the blob") {
        fs::remove(so);
        hub.server().reset();
        FetchResult again = client.fetch("vector-add@" + first.commit);
        CHECK(again.bytes_downloaded == 0);
        CHECK(fs::is_symlink(so));
        CHECK(fs::canonical(so) == blob);
    }
    SECTION("a cached listing naming a path twice is listed again, not a failure for good") {
        const fs::path tree = repo_folder(env, "vector-add") / ".kernhub" / "trees" / (first.commit + ".json");
        nlohmann::json listing = nlohmann::json::parse(kernhub::test::slurp(tree));
        REQUIRE(!listing.empty());
        nlohmann::json twin = listing[0];
        twin["oid"] = std::string(40, 'e');
        twin["size"] = 1;
        listing.push_back(twin);
        std::ofstream(tree, std::ios::trunc) << listing.dump();
        hub.server().reset();
        Options offline = o;
        offline.offline = true;
        CHECK(Client(offline).fetch("vector-add@" + first.commit).variant == first.variant);  // rebuilt from links
        CHECK(Client(o).fetch("vector-add@" + first.commit).variant == first.variant);
        CHECK(hub.server().count_requests("/tree/") == 1);
        CHECK(nlohmann::json::parse(kernhub::test::slurp(tree)).size() == listing.size() - 1);
    }
    SECTION("a removed blob is downloaded again") {
        fs::remove(blob);
        hub.server().reset();
        FetchResult again = client.fetch("vector-add@" + first.commit);
        CHECK(again.bytes_downloaded == fs::file_size(first.path + "/libvector_add.so"));
        CHECK(hub.server().count_requests("libvector_add.so") == 1);
        CHECK(fs::exists(blob));
    }
    SECTION("a wiped cache gets its listing back, so a later offline process can use it") {
        fs::remove_all(env.cache);
        hub.server().reset();
        FetchResult again = client.fetch("vector-add@" + first.commit);
        CHECK(hub.server().count_requests("/tree/") == 0);  // the kept listing served
        CHECK(again.bytes_downloaded > 0);
        CHECK(fs::is_regular_file(repo_folder(env, "vector-add") / ".kernhub" / "trees" / (first.commit + ".json")));
        Options offline = o;
        offline.offline = true;
        CHECK(Client(offline).fetch("vector-add@" + first.commit).variant == first.variant);
    }
    SECTION("offline, a removed blob is an offline error, not a stale answer") {
        Options offline = o;
        offline.offline = true;
        Client offline_client(offline);
        CHECK(offline_client.fetch("vector-add").commit == first.commit);  // parsed and kept
        fs::remove(blob);
        std::string message;
        CHECK(code_of([&] { offline_client.fetch("vector-add"); }, &message) == ErrorCode::offline);
        CHECK(message.find("libvector_add.so") != std::string::npos);
    }
}

TEST_CASE("offline with an empty cache is an offline error and touches nothing", "[hub]") {
    KernelHub hub;
    Env env;
    Options o = env.options(hub.server().endpoint());
    o.offline = true;
    std::string message;
    CHECK(code_of([&] { Client(o).fetch("vector-add"); }, &message) == ErrorCode::offline);
    CHECK(message.find("kernhub-test/vector-add@main") != std::string::npos);
    CHECK(hub.server().stats()["requests"].empty());
}

TEST_CASE("versions resolve to vN branches, a missing version lists the available ones", "[hub]") {
    KernelHub hub;
    Env env;
    Client client(env.options(hub.server().endpoint()));
    FetchResult v1 = client.fetch("vector-add-v1");
    FetchResult v2 = client.fetch("vector-add-v2");
    CHECK(v1.revision == "v1");
    CHECK(v2.revision == "v2");
    CHECK(v1.commit != v2.commit);
    CHECK(v2.files.size() == 3);
    std::string message;
    CHECK(code_of([&] { client.fetch("vector-add-v7"); }, &message) == ErrorCode::not_found);
    CHECK(message.find("version 7") != std::string::npos);
    CHECK(message.find("v1, v2") != std::string::npos);
}

TEST_CASE("a private repo needs the token, and the token never leaves the hub's origin", "[hub]") {
    KernelHub hub({k_test_token, 1000});
    Env env;
    std::string message;
    CHECK(code_of([&] { Client(env.options(hub.server().endpoint())).fetch("private"); }, &message) ==
          ErrorCode::not_found);
    CHECK(message.find("HF_TOKEN") != std::string::npos);

    hub.server().reset();
    Options o = env.options(hub.server().endpoint());
    o.token = k_test_token;
    FetchResult result = Client(o).fetch("private");
    CHECK(result.variant == host_cpu_variant());
    bool saw_cdn = false;
    const auto stats = hub.server().stats();
    for (const auto& r : stats["requests"]) {
        if (r["host"] == "cdn") {
            saw_cdn = true;
            CHECK(r["auth"] == false);
        } else {
            CHECK(r["auth"] == true);
        }
    }
    CHECK(saw_cdn);
}

TEST_CASE("transient failures are retried and broken downloads resume with Range", "[hub]") {
    KernelHub hub;
    Env env;
    hub.server().add_faults({{{"match", "/revision/"}, {"action", "status"}, {"status", 503}, {"retry_after", "0"}},
                             {{"match", "/lfs/"}, {"action", "truncate"}, {"after_bytes", 4096}}});
    FetchResult result = Client(env.options(hub.server().endpoint())).fetch("vector-add");
    CHECK(result.variant == host_cpu_variant());
    CHECK(hub.server().count_requests("/revision/main") == 2);
    bool resumed = false;
    const auto stats = hub.server().stats();
    for (const auto& r : stats["requests"]) {
        if (r["host"] == "cdn" && r["range"].is_string() && r["range"] == "bytes=4096-") resumed = true;
    }
    CHECK(resumed);
}

TEST_CASE("corrupted bytes are rejected and nothing unverified becomes visible", "[hub]") {
    KernelHub hub;
    Env env;
    hub.server().add_faults({{{"match", "/lfs/"}, {"action", "corrupt"}, {"count", -1}}});
    std::string message;
    CHECK(code_of([&] { Client(env.options(hub.server().endpoint())).fetch("vector-add"); }, &message) ==
          ErrorCode::verification);
    CHECK(message.find("sha256") != std::string::npos);
    // metadata.json streams beside the library, and finishes when the
    // library fails first: its verified blob and link stay. Of the .so
    // nothing, not even a partial.
    const auto blobs = blobs_of(repo_folder(env, "vector-add"));
    REQUIRE(blobs.size() == 1);
    CHECK(blobs.front().filename().string().size() == 40);  // metadata.json's git oid, no partial
    const std::vector<std::string> linked = snapshot_entries(repo_folder(env, "vector-add"));
    CHECK(linked == std::vector<std::string>{"build/" + host_cpu_variant() + "/metadata.json"});
    CHECK_FALSE(fs::exists(repo_folder(env, "vector-add") / ".kernhub" / "variants"));
}

TEST_CASE("a metadata.json digest mismatch is a verification failure", "[hub]") {
    KernelHub hub;
    Env env;
    std::string message;
    CHECK(code_of([&] { Client(env.options(hub.server().endpoint())).fetch("bad-digest"); }, &message) ==
          ErrorCode::verification);
    CHECK(message.find("metadata.json") != std::string::npos);
    const auto blobs = blobs_of(repo_folder(env, "bad-digest"));
    REQUIRE(blobs.size() == 1);  // metadata.json's; the .so that failed its digest is gone
    CHECK(blobs.front().filename().string().size() == 40);
    CHECK(snapshot_entries(repo_folder(env, "bad-digest")) ==
          std::vector<std::string>{"build/" + host_cpu_variant() + "/metadata.json"});
    CHECK_FALSE(fs::exists(repo_folder(env, "bad-digest") / ".kernhub" / "variants"));
}

TEST_CASE("variant choice: CPU host never takes CUDA, --target overrides, required file filters", "[hub]") {
    KernelHub hub;
    Env env;
    InfoResult info = Client(env.options(hub.server().endpoint())).info("vector-add");
    CHECK(info.selected == host_cpu_variant());
    bool cuda_rejected = false;
    for (const auto& v : info.variants) {
        if (v.name == "native-cu128-x86_64-linux") {
            cuda_rejected = !v.selected && v.reason.find("CUDA") != std::string::npos;
        }
    }
    CHECK(cuda_rejected);

    Options o = env.options(hub.server().endpoint());
    o.targets = {"native-cu128-x86_64-linux"};
    FetchResult gpu = Client(o).fetch("vector-add");
    CHECK(gpu.variant == "native-cu128-x86_64-linux");

    std::string message;
    CHECK(code_of([&] { Client(env.options(hub.server().endpoint())).fetch("wrong-file"); }, &message) ==
          ErrorCode::not_found);
    CHECK(message.find("libmissing.so") != std::string::npos);
}

TEST_CASE("pagination, model repos and file:// hubs", "[hub]") {
    Env env;
    SECTION("tree pages are followed") {
        KernelHub hub({"", 2});
        FetchResult r = Client(env.options(hub.server().endpoint())).fetch("vector-add");
        CHECK(r.variant == host_cpu_variant());
        CHECK(hub.server().count_requests("cursor=") >= 2);
    }
    SECTION("a model repo uses the models API and folder") {
        KernelHub hub;
        FetchResult r = Client(env.options(hub.server().endpoint())).fetch("model-kernel");
        CHECK(hub.server().count_requests("/api/models/kernhub-test/model-kernel") == 2);
        CHECK(fs::exists(env.cache / "models--kernhub-test--model-kernel" / "refs" / "main"));
        CHECK(r.files.size() == 2);
    }
    SECTION("a file:// endpoint makes no HTTP request") {
        KernelHub hub;
        FetchResult r = Client(env.options(hub.file_endpoint())).fetch("vector-add");
        CHECK(r.requests == 0);
        CHECK(r.variant == host_cpu_variant());
    }
}

TEST_CASE("hub errors map to exit codes", "[hub]") {
    KernelHub hub;
    Env env;
    Client client(env.options(hub.server().endpoint()));
    std::string message;
    CHECK(code_of([&] { client.fetch("kernhub-test/does-not-exist"); }, &message) == ErrorCode::not_found);
    CHECK(message.find("kernhub-test/does-not-exist") != std::string::npos);
    CHECK(code_of([&] { client.fetch("kernhub-test/vector-add@no-such-branch"); }, &message) == ErrorCode::not_found);
    CHECK(message.find("no-such-branch") != std::string::npos);
    CHECK(code_of([&] { client.fetch("no-such-name"); }, &message) == ErrorCode::not_found);

    hub.server().add_faults(
        {{{"match", "/revision/"}, {"action", "status"}, {"status", 503}, {"retry_after", "0"}, {"count", -1}}});
    CHECK(code_of([&] { client.fetch("vector-add"); }, &message) == ErrorCode::network);
    CHECK(message.find("503") != std::string::npos);
    CHECK(hub.server().count_requests("vector-add/revision/main") == 3);  // 1 + 2 retries

    Options dead = env.options("http://127.0.0.1:9");
    dead.retries = 0;
    CHECK(code_of([&] { Client(dead).fetch("vector-add"); }, &message) == ErrorCode::network);
    CHECK(message.find("127.0.0.1:9") != std::string::npos);
}

TEST_CASE("load resolves the symbol before dispatch, dispatch is a plain call", "[hub][loader]") {
    KernelHub hub;
    Env env;
    Client client(env.options(hub.server().endpoint()));
    LoadResult loaded = client.load("vector-add");
    REQUIRE(loaded.address != nullptr);
    CHECK(loaded.symbol == "kh_vector_add");

    auto add = client.resolve<void(const float*, const float*, float*, std::size_t)>("vector-add");
    CHECK(reinterpret_cast<void*>(add.get()) == loaded.address);
    CHECK(client.loaded("vector-add").address == loaded.address);
    CHECK(client.loaded("vector-add").ref == "vector-add");
    CHECK(KernelFn<void(const float*, const float*, float*, std::size_t)>::from(loaded).get() == add.get());
    float a[4] = {1, 2, 3, 4}, b[4] = {10, 20, 30, 40}, out[4] = {};
    add(a, b, out, 4);
    CHECK(out[0] == 11.0f);
    CHECK(out[3] == 44.0f);

    LoadResult saxpy = client.load("vector-add-v2");
    auto fn = KernelFn<void(float, const float*, const float*, float*, std::size_t)>(saxpy.address);
    fn(2.0f, a, b, out, 4);
    CHECK(out[2] == 36.0f);

    std::string message;
    CHECK(code_of([&] { client.load("missing-symbol"); }, &message) == ErrorCode::not_found);
    CHECK(message.find("kh_nope") != std::string::npos);
    CHECK(code_of([&] { client.load("undefined"); }, &message) == ErrorCode::load);
    CHECK(code_of([&] { client.load("two-objects"); }, &message) == ErrorCode::usage);
}

TEST_CASE("Client::loaded and Client::resolve answer with this Client's own loads only", "[hub][loader]") {
    KernelHub hub;
    Env env;
    Client client(env.options(hub.server().endpoint()));
    Client other(env.options(hub.server().endpoint()));
    using VectorAdd = void(const float*, const float*, float*, std::size_t);
    std::string message;
    CHECK(code_of([&] { client.loaded("vector-add"); }, &message) == ErrorCode::not_found);
    CHECK(message.find("kernel 'vector-add' is not loaded by this Client") != std::string::npos);
    CHECK(code_of([&] { client.resolve<VectorAdd>("vector-add"); }) == ErrorCode::not_found);

    const LoadResult loaded = client.load("vector-add");
    CHECK(client.loaded("vector-add").address == loaded.address);
    CHECK(client.loaded("vector-add").kind == LoadKind::function);
    // Another Client on the same cache and registry has loaded nothing.
    CHECK(code_of([&] { other.loaded("vector-add"); }) == ErrorCode::not_found);
    // The table is keyed by the reference string, not by the kernel.
    CHECK(code_of([&] { client.loaded("vector-add-v1"); }) == ErrorCode::not_found);
    // A failed load leaves the earlier successful one in place.
    CHECK(code_of([&] { client.load("vector-add", "kh_nope"); }) == ErrorCode::not_found);
    CHECK(client.loaded("vector-add").address == loaded.address);
    // A later successful load of the same reference replaces it.
    const LoadResult saxpy = client.load("vector-add", "kh_saxpy");
    CHECK(saxpy.address != loaded.address);
    CHECK(client.loaded("vector-add").address == saxpy.address);
    CHECK(client.loaded("vector-add").symbol == "kh_saxpy");

    // A LoadResult that holds no load gives no handle.
    CHECK(code_of([&] { KernelFn<VectorAdd>::from(LoadResult{}); }, &message) == ErrorCode::usage);
    CHECK(message.find("holds no loaded kernel") != std::string::npos);
}

TEST_CASE("KERNHUB_VERIFY_ON_LOAD re-hashes and catches a tampered cache", "[hub][loader]") {
    KernelHub hub;
    Env env;
    Options o = env.options(hub.server().endpoint());
    o.verify_on_load = true;
    Client client(o);
    FetchResult fetched = client.fetch("vector-add");
    CHECK(client.load("vector-add").address != nullptr);

    fs::path blob = fs::canonical(fs::path(fetched.path) / "libvector_add.so");
    flip_byte(blob, 100);
    std::string message;
    CHECK(code_of([&] { client.load("vector-add"); }, &message) == ErrorCode::verification);
    CHECK(message.find("changed since it was verified") != std::string::npos);
}

TEST_CASE("offline over a cache another tool filled: listing rebuilt from links, blobs re-verified", "[hub]") {
    KernelHub hub;
    Env env;
    FetchResult online = Client(env.options(hub.server().endpoint())).fetch("vector-add");
    // What huggingface_hub leaves: blobs, snapshots and refs, no .kernhub/.
    fs::remove_all(repo_folder(env, "vector-add") / ".kernhub");
    hub.server().reset();
    Options o = env.options(hub.server().endpoint());
    o.offline = true;

    SECTION("intact blobs are adopted") {
        FetchResult offline = Client(o).fetch("vector-add");
        CHECK(offline.requests == 0);
        CHECK(offline.variant == online.variant);
        CHECK(offline.files.size() == online.files.size());
        // Links alone cannot show that no file is missing: the variant is
        // used but not recorded as complete (docs/cache-format.md, "Side data").
        CHECK_FALSE(fs::exists(repo_folder(env, "vector-add") / ".kernhub" / "variants" / online.commit /
                               (online.variant + ".json")));
        CHECK(hub.server().stats()["requests"].empty());
    }
    SECTION("a damaged blob is refused") {
        fs::path blob = fs::canonical(fs::path(online.path) / "libvector_add.so");
        flip_byte(blob, 64);
        std::string message;
        CHECK(code_of([&] { Client(o).fetch("vector-add"); }, &message) == ErrorCode::verification);
        CHECK(message.find("sha256") != std::string::npos);
    }
}

TEST_CASE("without CUDA, detection never picks native-cuda", "[hub][cuda][needs:nvcc][needs:no-cuda]") {
    KernelHub hub;
    Env env;
    std::string message;
    CHECK(code_of([&] { Client(env.options(hub.server().endpoint())).fetch("vector-add-cuda"); }, &message) ==
          ErrorCode::not_found);
    CHECK(message.find("native-cuda") != std::string::npos);
    CHECK(message.find("CUDA") != std::string::npos);
}

TEST_CASE("a native-cuda variant is fetched with --target on any host", "[hub][cuda][needs:nvcc]") {
    KernelHub hub;
    Env env;
    Options o = env.options(hub.server().endpoint());
    o.targets = {"native-cuda"};
    FetchResult fetched = Client(o).fetch("vector-add-cuda");
    CHECK(fetched.variant == "native-cuda");
    CHECK(fs::is_regular_file(fs::path(fetched.path) / "vector_add.fatbin"));
}

TEST_CASE("without CUDA, loading a fetched native-cuda kernel fails with exit 7 naming CUDA, the kernel and the file",
          "[hub][cuda][needs:nvcc][needs:no-cuda]") {
    KernelHub hub;
    Env env;
    Options o = env.options(hub.server().endpoint());
    o.targets = {"native-cuda"};
    Client client(o);
    REQUIRE(client.fetch("vector-add-cuda").variant == "native-cuda");
    std::string message;
    CHECK(code_of([&] { client.load("vector-add-cuda"); }, &message) == ErrorCode::load);
    CHECK(message.find("CUDA") != std::string::npos);
    CHECK(message.find("kh_vector_add") != std::string::npos);
    CHECK(message.find("vector_add.fatbin") != std::string::npos);
}

TEST_CASE("a revision that could climb out of a folder is a usage error before any request", "[hub]") {
    KernelHub hub;
    Env env;
    Client client(env.options(hub.server().endpoint()));
    std::string message;
    const std::string long_part = "vector-add@x/" + std::string(256, 'a');
    std::string many_parts = "vector-add@r";
    for (int i = 0; i < 16; ++i) many_parts += "/r";
    std::string long_revision = "vector-add@r";
    for (int i = 0; i < 8; ++i) long_revision += "/" + std::string(200, 'b');
    for (const std::string& ref :
         {std::string("kernhub-test/vector-add@../../etc"), std::string("vector-add@/abs"),
          std::string("vector-add@a b"), std::string("vector-add@."), std::string("vector-add@a/./b"),
          std::string("vector-add@.hidden"), std::string("vector-add@main.lock"), std::string("vector-add@v1."),
          std::string("vector-add@a@{1}"), std::string("vector-add@@"), long_part, many_parts, long_revision}) {
        INFO(ref);
        CHECK(code_of([&] { client.fetch(ref); }, &message) == ErrorCode::usage);
        CHECK(message.find("revision") != std::string::npos);
    }
    CHECK(hub.server().stats()["requests"].empty());
}

TEST_CASE("a damaged variant record means fetch again, not failure", "[hub]") {
    KernelHub hub;
    Env env;
    FetchResult first = Client(env.options(hub.server().endpoint())).fetch("vector-add");
    fs::path record =
        repo_folder(env, "vector-add") / ".kernhub" / "variants" / first.commit / (first.variant + ".json");
    REQUIRE(fs::exists(record));
    std::ofstream(record) << R"({"files": [42, {"path": 7}]})";
    hub.server().reset();
    FetchResult again = Client(env.options(hub.server().endpoint())).fetch("vector-add");
    CHECK(again.files.size() == first.files.size());
    CHECK(again.bytes_downloaded == 0);  // the blobs were still there and verified
    CHECK(hub.server().count_requests("/lfs/") == 0);
}

TEST_CASE("a shared object that needs a newer glibc than the host is refused before dlopen", "[hub][loader]") {
    // A copy of a real .so whose GLIBC_ version requirement is patched to
    // GLIBC_9.x (same length, so the tables stay valid).
    TempDir dir;
    fs::path source = dir.path() / "needs.c";
    std::ofstream(source) << "#include <string.h>\n#include <stdio.h>\n"
                             "int kh_copy(char* d, const char* s, unsigned long n) { memcpy(d, s, n); "
                             "return printf(\"%s\", d); }\n";
    fs::path so = dir.path() / "libneeds.so";
    REQUIRE(run_process({"cc", "-shared", "-fPIC", "-o", so.string(), source.string()}).exit_code == 0);
    std::string bytes;
    {
        std::ifstream in(so, std::ios::binary);
        bytes = kernhub::test::read_all(in);
    }
    auto at = bytes.find("GLIBC_2.");
    REQUIRE(at != std::string::npos);
    bytes[at + 6] = '9';
    std::ofstream(so, std::ios::binary | std::ios::trunc) << bytes;

    // Serve it from a one-repo hub and load it.
    nlohmann::json spec = {
        {"repos",
         {{{"repo_id", "kernhub-test/needs-new-glibc"},
           {"type", "kernel"},
           {"commits",
            {{{"message", "x"},
              {"branches", {"main"}},
              {"metadata", true},
              {"files", {{"build/" + host_cpu_variant() + "/libneeds.so", {{"path", so.string()}}}}}}}}}}}};
    make_hub(spec, dir.path() / "hub");
    Options o;
    o.endpoint = "file://" + (dir.path() / "hub").string();
    o.cache_dir = (dir.path() / "cache").string();
    o.project_dir = dir.path().string();
    o.no_default_registry = true;
    o.offline = false;
    std::string message;
    CHECK(code_of([&] { Client(o).load("kernhub-test/needs-new-glibc", "kh_copy"); }, &message) == ErrorCode::load);
    CHECK(message.find("needs GLIBC_9.") != std::string::npos);
    CHECK(message.find("this host has GLIBC_") != std::string::npos);
}

// Online options for a file:// hub at `hub`, with the cache and project
// folder under `dir` and no default registry.
Options file_hub_options(const fs::path& dir, const fs::path& hub) {
    Options o;
    o.endpoint = "file://" + hub.string();
    o.cache_dir = (dir / "cache").string();
    o.project_dir = dir.string();
    o.no_default_registry = true;
    o.offline = false;
    return o;
}

TEST_CASE("a file:// hub's FIFO or device answers are refused, not waited on", "[hub]") {
    TempDir dir;
    const fs::path hub = dir.path() / "hub";
    fs::copy(KERNHUB_DEMO_HUB, hub, fs::copy_options::recursive);
    Options o = file_hub_options(dir.path(), hub);
    const fs::path revision = hub / "api" / "kernels" / "kernhub-demo" / "vector-add" / "revision" / "main";
    SECTION("the revision answer is a FIFO") {
        fs::remove(revision);
        REQUIRE(::mkfifo(revision.c_str(), 0600) == 0);
        std::string message;
        CHECK(code_of([&] { Client(o).fetch("kernhub-demo/vector-add"); }, &message) == ErrorCode::network);
        CHECK_THAT(message, Catch::Contains("not a regular file"));
    }
    SECTION("the revision answer is a link to /dev/zero") {
        fs::remove(revision);
        fs::create_symlink("/dev/zero", revision);
        std::string message;
        CHECK(code_of([&] { Client(o).fetch("kernhub-demo/vector-add"); }, &message) == ErrorCode::network);
        CHECK_THAT(message, Catch::Contains("not a regular file"));
    }
    SECTION("a variant file is a FIFO") {
        fs::path so;
        for (const auto& e : fs::recursive_directory_iterator(hub / "kernels")) {
            if (e.path().filename() == "libvector_add.so") so = e.path();
        }
        REQUIRE(!so.empty());
        fs::remove(so);
        REQUIRE(::mkfifo(so.c_str(), 0600) == 0);
        std::string message;
        CHECK(code_of([&] { Client(o).fetch("kernhub-demo/vector-add"); }, &message) == ErrorCode::network);
        CHECK_THAT(message, Catch::Contains("not a regular file"));
    }
}

TEST_CASE("a listing naming one path twice: the same entry is kept once, different ones are refused", "[hub]") {
    TempDir dir;
    const fs::path hub = dir.path() / "hub";
    fs::copy(KERNHUB_DEMO_HUB, hub, fs::copy_options::recursive);
    fs::path tree_file;
    for (const auto& e : fs::recursive_directory_iterator(hub / "api")) {
        if (e.is_regular_file() && e.path().parent_path().parent_path().filename() == "tree") tree_file = e.path();
    }
    REQUIRE(!tree_file.empty());
    nlohmann::json listing = nlohmann::json::parse(std::ifstream(tree_file));
    nlohmann::json so;
    for (const auto& entry : listing) {
        if (entry["path"].get<std::string>().find("native-cpu-x86_64-linux/libvector_add.so") != std::string::npos) {
            so = entry;
        }
    }
    REQUIRE(!so.is_null());
    Options o = file_hub_options(dir.path(), hub);
    SECTION("an exact repeat is harmless") {
        listing.push_back(so);
        std::ofstream(tree_file, std::ios::trunc) << listing.dump();
        CHECK(Client(o).fetch("kernhub-demo/vector-add").files.size() == 2);
    }
    SECTION("a second, different entry for the same path is exit 4") {
        nlohmann::json other = so;
        other["lfs"]["oid"] = std::string(64, 'a');
        listing.push_back(other);
        std::ofstream(tree_file, std::ios::trunc) << listing.dump();
        std::string message;
        CHECK(code_of([&] { Client(o).fetch("kernhub-demo/vector-add"); }, &message) == ErrorCode::verification);
        CHECK_THAT(message, Catch::Contains("libvector_add.so twice with different contents"));
    }
}

// How many descriptors of this process are open on a file whose name ends
// with `suffix` (/proc/self/fd).
static int open_count_of(const std::string& suffix) {
    int count = 0;
    std::error_code ec;
    for (const auto& fd : fs::directory_iterator("/proc/self/fd", ec)) {
        const std::string target = fs::read_symlink(fd.path(), ec).string();
        if (!ec && target.size() >= suffix.size() &&
            target.compare(target.size() - suffix.size(), suffix.size(), suffix) == 0) {
            ++count;
        }
    }
    return count;
}

TEST_CASE("fetch links a blob already in the cache only while holding that blob's lock", "[hub]") {
    KernelHub hub;
    Env env;
    FetchResult first = Client(env.options(hub.server().endpoint())).fetch("vector-add");
    // One link of the variant goes, so the next fetch reuses its blob.
    fs::path link;
    for (const auto& e : fs::recursive_directory_iterator(first.path)) {
        if (e.is_symlink()) link = e.path();
    }
    REQUIRE(!link.empty());
    const std::string etag = fs::read_symlink(link).filename().string();
    fs::remove(link);
    cache::RepoCache cache(env.cache, RepoType::kernel, "kernhub-test/vector-add");
    REQUIRE(cache.has_blob(etag));

    Options o = env.options(hub.server().endpoint());
    o.offline = true;  // nothing to download: only the lock can hold it up
    std::atomic<bool> cancel{false};
    o.cancel = &cancel;
    {
        // What cache prune holds while it decides to remove the blob.
        cache::FileLock held = cache.lock_blob(etag);
        // Cancels once the fetch waits on the blob's lock: when this process
        // has the lock file open twice (the lock held here, the fetch's).
        std::thread stop([&] {
            const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
            while (open_count_of(etag + ".lock") < 2 && std::chrono::steady_clock::now() < give_up) {
                std::this_thread::sleep_for(std::chrono::milliseconds(5));
            }
            cancel = true;
        });
        CHECK(code_of([&] { Client(o).fetch("vector-add"); }) == ErrorCode::interrupted);
        stop.join();
        CHECK_FALSE(fs::exists(fs::symlink_status(link)));
    }
    cancel = false;
    CHECK(Client(o).fetch("vector-add").path == first.path);
    CHECK(fs::exists(link));
}

TEST_CASE("the library streams beside metadata.json and is committed only after it", "[hub]") {
    KernelHub hub;
    Env env;
    // Both answers wait at gates: the library's transfer reaches the CDN
    // while metadata.json is still unanswered, so neither waited for the other.
    hub.server().add_faults({{{"match", "/metadata.json"}, {"action", "hold"}, {"gate", "metadata"}},
                             {{"match", "/lfs/"}, {"action", "hold"}, {"gate", "library"}}});
    FetchResult result;
    std::string failure;
    std::thread fetch([&] {
        try {
            result = Client(env.options(hub.server().endpoint())).fetch("vector-add");
        } catch (const std::exception& e) {
            failure = e.what();
        }
    });
    struct Join {
        std::thread& thread;
        ~Join() {
            if (thread.joinable()) thread.join();
        }
    } join{fetch};
    const bool both = hub.server().wait_held("metadata") && hub.server().wait_held("library");
    // The library's bytes come first; it is verified against the hub's hash
    // but waits for metadata.json's digest before its blob is made.
    hub.server().release("library");
    // Waits (bounded) for the event that decides: the library's partial
    // holds all its bytes, or its blob was made, which must not happen yet.
    const std::uint64_t library_size = fs::file_size(vector_add_so());
    bool whole_partial = false;
    bool committed = false;
    for (int i = 0; i < 4000 && !whole_partial && !committed; ++i) {
        for (const fs::path& blob : blobs_of(repo_folder(env, "vector-add"))) {
            const std::string name = blob.filename().string();
            std::error_code ec;
            if (name.size() == 64) committed = true;
            if (name.size() > 64 && name.find(".incomplete") != std::string::npos &&
                fs::file_size(blob, ec) == library_size) {
                whole_partial = true;
            }
        }
        if (!whole_partial && !committed) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    hub.server().release("metadata");
    fetch.join();
    CHECK(both);
    CHECK(whole_partial);
    CHECK_FALSE(committed);
    REQUIRE(failure.empty());
    CHECK(result.files.size() == 2);
    CHECK(hub.server().count_requests("/metadata.json") == 1);
}
