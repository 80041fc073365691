// A load fetches what it loads (docs/cache-format.md, "Partial variants"):
// against the loopback hub, with its request log, which files a load asks
// for, where they are linked, what a later fetch still asks for, offline
// use, verify_on_load and cache prune over the partial area.
#include <fcntl.h>
#include <sys/stat.h>

#include <ctime>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "hub/hub_env.hpp"
#include "kernhub/kernhub.hpp"
#include "support/kernel_hub.hpp"
#include "support/slurp.hpp"

using namespace kernhub;
using namespace kernhub::test;
using namespace kernhub::test::hub_env;
namespace fs = std::filesystem;

namespace {

// The files of variant `variant` the hub was asked for since the last
// reset (both hosts: an LFS file's redirect and its CDN transfer count
// once, by name).
std::set<std::string> files_requested(HubServer& server, const std::string& variant) {
    std::set<std::string> out;
    const std::string marker = "/build/" + variant + "/";
    const nlohmann::json stats = server.stats();  // kept: the loop walks into it
    for (const auto& request : stats["requests"]) {
        // The target as sent, percent-encoded: decoded here.
        const std::string sent = request["path"].get<std::string>();
        std::string path;
        for (std::size_t i = 0; i < sent.size(); ++i) {
            if (sent[i] == '%' && i + 2 < sent.size()) {
                path += static_cast<char>(std::stoi(sent.substr(i + 1, 2), nullptr, 16));
                i += 2;
            } else {
                path += sent[i];
            }
        }
        const std::size_t at = path.find(marker);
        if (at != std::string::npos) out.insert(path.substr(at + marker.size()));
    }
    return out;
}

std::set<std::string> paths_of(const FetchResult& fetched) {
    std::set<std::string> out;
    for (const FileInfo& file : fetched.files) out.insert(file.path);
    return out;
}

// Every entry below `dir`, relative to it ("" when it does not exist).
std::set<std::string> tree_of(const fs::path& dir) {
    std::set<std::string> out;
    std::error_code ec;
    for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        out.insert(it->path().lexically_relative(dir).generic_string());
    }
    return out;
}

// Sets every blob's time two hours back, past cache prune's grace period.
void age_blobs(const fs::path& folder) {
    const struct timespec old[2] = {{std::time(nullptr) - 7200, 0}, {std::time(nullptr) - 7200, 0}};
    for (const auto& entry : fs::directory_iterator(folder / "blobs")) {
        REQUIRE(::utimensat(AT_FDCWD, entry.path().c_str(), old, AT_SYMLINK_NOFOLLOW) == 0);
    }
}

}  // namespace

TEST_CASE("a load fetches only the library and metadata.json, outside the snapshot, and a fetch completes it",
          "[hub][partial]") {
    KernelHub hub;
    Env env;
    const std::string variant = host_cpu_variant();
    // vector-add v2: metadata.json, libvector_add.so and NOTES.txt, which no load reads.
    LoadResult loaded = Client(env.options(hub.server().endpoint())).load("vector-add-v2");
    const FetchResult& cold = loaded.fetch;
    CHECK(files_requested(hub.server(), variant) == std::set<std::string>{"metadata.json", "libvector_add.so"});
    CHECK(paths_of(cold) == std::set<std::string>{"metadata.json", "libvector_add.so"});
    const fs::path partial = env.folder() / ".kernhub" / "partial" / cold.commit;
    CHECK(fs::path(cold.path) == partial / "build" / variant);
    CHECK(fs::path(loaded.file) == partial / "build" / variant / "libvector_add.so");
    // Nothing of the variant is in the snapshot, where the kernels library
    // would take a variant held in part for a damaged one; the partial
    // record lists exactly what is held.
    CHECK_FALSE(fs::exists(env.folder() / "snapshots" / cold.commit / "build" / variant));
    CHECK_FALSE(fs::exists(env.folder() / ".kernhub" / "variants" / cold.commit / (variant + ".json")));
    CHECK(tree_of(partial / "build" / variant) == std::set<std::string>{"metadata.json", "libvector_add.so"});
    const nlohmann::json record = nlohmann::json::parse(slurp(partial / (variant + ".json")));
    std::set<std::string> recorded;
    for (const auto& file : record["files"]) recorded.insert(file["path"].get<std::string>());
    CHECK(recorded == paths_of(cold));
    // Each link is the snapshot's link with one more "../".
    CHECK(fs::read_symlink(partial / "build" / variant / "metadata.json").string().rfind("../../../../../blobs/", 0) ==
          0);
    CHECK(slurp(env.folder() / "refs" / "v2") == cold.commit);

    // Warm: the partial record vouches, nothing but the revision is asked for.
    hub.server().reset();
    LoadResult warm = Client(env.options(hub.server().endpoint())).load("vector-add-v2");
    CHECK(warm.fetch.path == cold.path);
    CHECK(warm.fetch.requests == 1);
    CHECK(files_requested(hub.server(), variant).empty());

    // Offline: the same, with no request at all; a fetch of the whole
    // variant is exit 6 naming the file kernhub lacks.
    Options offline = env.options(hub.server().endpoint());
    offline.offline = true;
    hub.server().reset();
    CHECK(Client(offline).load("vector-add-v2").fetch.path == cold.path);
    std::string message;
    CHECK(code_of([&] { Client(offline).fetch("vector-add-v2"); }, &message) == ErrorCode::offline);
    CHECK(message.find("missing NOTES.txt") != std::string::npos);
    CHECK(message.find("libvector_add.so") == std::string::npos);
    CHECK(hub.server().stats()["requests"].empty());

    // A fetch takes only the missing file, links the whole variant into
    // the snapshot, records it complete and clears the partial area.
    hub.server().reset();
    const FetchResult full = Client(env.options(hub.server().endpoint())).fetch("vector-add-v2");
    CHECK(files_requested(hub.server(), variant) == std::set<std::string>{"NOTES.txt"});
    CHECK(fs::path(full.path) == env.folder() / "snapshots" / cold.commit / "build" / variant);
    CHECK(paths_of(full) == std::set<std::string>{"metadata.json", "libvector_add.so", "NOTES.txt"});
    CHECK(fs::exists(env.folder() / ".kernhub" / "variants" / cold.commit / (variant + ".json")));
    CHECK_FALSE(fs::exists(partial / (variant + ".json")));
    CHECK_FALSE(fs::exists(partial / "build" / variant));
    // Nor are the folders left behind, empty.
    CHECK_FALSE(fs::exists(env.folder() / ".kernhub" / "partial"));

    // The next load takes the complete variant, as before this change.
    hub.server().reset();
    LoadResult after = Client(env.options(hub.server().endpoint())).load("vector-add-v2");
    CHECK(after.fetch.path == full.path);
    CHECK(files_requested(hub.server(), variant).empty());
}

TEST_CASE("a load that needs every file of a variant takes it whole into the snapshot", "[hub][partial]") {
    KernelHub hub;
    Env env;
    // vector-add@main's host variant is metadata.json and libvector_add.so.
    const LoadResult loaded = Client(env.options(hub.server().endpoint())).load("vector-add");
    CHECK(fs::path(loaded.fetch.path) ==
          env.folder() / "snapshots" / loaded.fetch.commit / "build" / host_cpu_variant());
    CHECK(fs::exists(env.folder() / ".kernhub" / "variants" / loaded.fetch.commit / (host_cpu_variant() + ".json")));
    CHECK_FALSE(fs::exists(env.folder() / ".kernhub" / "partial"));
}

TEST_CASE("offline, a load whose file the cache lacks is exit 6 naming it", "[hub][partial]") {
    KernelHub hub;
    Env env;
    const LoadResult loaded = Client(env.options(hub.server().endpoint())).load("vector-add-v2");
    // The library's blob goes (as a user or a tool might remove it).
    const fs::path link = fs::path(loaded.fetch.path) / "libvector_add.so";
    const fs::path blob = fs::canonical(link);
    fs::remove(blob);
    Options offline = env.options(hub.server().endpoint());
    offline.offline = true;
    std::string message;
    CHECK(code_of([&] { Client(offline).load("vector-add-v2"); }, &message) == ErrorCode::offline);
    CHECK(message.find("missing libvector_add.so") != std::string::npos);
    CHECK(message.find("NOTES.txt") == std::string::npos);
    // Online, the next load downloads that one file again.
    hub.server().reset();
    Client(env.options(hub.server().endpoint())).load("vector-add-v2");
    CHECK(files_requested(hub.server(), host_cpu_variant()) == std::set<std::string>{"libvector_add.so"});
}

TEST_CASE("verify_on_load loads a partial variant's library from its blob, and a changed link is made again",
          "[hub][partial]") {
    KernelHub hub;
    Env env;
    const LoadResult loaded = Client(env.options(hub.server().endpoint(), true)).load("vector-add-v2");
    CHECK(loaded.address != nullptr);
    // The partial link replaced by one that leads out of the cache: the
    // next load does not trust it, hashes the blob and links it again.
    const fs::path link = fs::path(loaded.fetch.path) / "libvector_add.so";
    const fs::path target = fs::read_symlink(link);
    const fs::path copy = env.dir.path() / "copy.so";
    fs::copy_file(fs::canonical(link), copy);
    fs::remove(link);
    fs::create_symlink(copy, link);
    hub.server().reset();
    const LoadResult again = Client(env.options(hub.server().endpoint(), true)).load("vector-add-v2");
    CHECK(again.address != nullptr);
    CHECK(fs::read_symlink(link) == target);
    CHECK(files_requested(hub.server(), host_cpu_variant()).empty());
}

TEST_CASE("cache prune keeps the blobs only a partial variant links", "[hub][partial]") {
    KernelHub hub;
    Env env;
    Options options = env.options(hub.server().endpoint());
    const LoadResult loaded = Client(options).load("vector-add-v2");
    age_blobs(env.folder());
    const PruneReport report = Client(options).cache_prune(PruneOptions{});
    for (const std::string& removed : report.removed) CHECK(removed.find("/blobs/") == std::string::npos);
    // The partial variant still loads warm, offline, from the same blobs.
    options.offline = true;
    hub.server().reset();
    CHECK(Client(options).load("vector-add-v2").fetch.path == loaded.fetch.path);
    CHECK(hub.server().stats()["requests"].empty());
}
