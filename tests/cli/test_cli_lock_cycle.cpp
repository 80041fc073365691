// Files fetched beside metadata.json (no signature policy): nothing of them
// is committed before metadata.json has passed.
//
// Two fetches whose variants share blobs crosswise: variant A's library has
// the bytes of variant B's metadata.json and B's library those of A's
// metadata.json (plain files, so a blob's name, and its lock, is its git
// oid). Each file downloads beside its metadata.json and waits for it before
// it commits; metadata.json needs its own blob lock. A library that waited
// holding its lock could hold what the other fetch's metadata.json needs
// while that fetch's library holds what this one's needs, and both would
// wait for ever. A hub can lay a repo out that way on purpose.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <thread>

#include "cli_support.hpp"
#include "digest/digest.hpp"
#include "support/build_paths.hpp"
#include "support/hub_builder.hpp"

using namespace kernhub::test;
using namespace kernhub::test::cli;

namespace {

const std::string k_repo = "kh-lock/cross";

std::string metadata_text(const std::string& pad) {
    return nlohmann::json{
        {"name", "cross"}, {"id", k_repo}, {"version", 1}, {"license", "Apache-2.0"}, {"backend", {{"type", "cpu"}}},
        {"pad", pad}}
        .dump();
}

// Another CPU variant name than the host's, so that --target picks each.
std::string other_cpu_variant() {
    return host_cpu_variant() == "native-cpu-x86_64-linux" ? "native-cpu-aarch64-linux" : "native-cpu-x86_64-linux";
}

// A plain (not LFS) file of a make_hub.py spec, its bytes from `path`.
nlohmann::json plain_file(const fs::path& path) {
    return {{"path", path.string()}, {"lfs", false}};
}

// A hub tree of one kernel repo with one commit on main, served.
std::unique_ptr<HubServer> serve_repo(const fs::path& dir, const std::string& repo_id, const nlohmann::json& files) {
    const nlohmann::json spec = {{"repos",
                                  {{{"repo_id", repo_id},
                                    {"type", "kernel"},
                                    {"commits", {{{"message", repo_id}, {"branches", {"main"}}, {"files", files}}}}}}}};
    make_hub(spec, dir / "hub");
    return std::make_unique<HubServer>(dir / "hub");
}

struct CrossHub {
    TempDir dir;
    std::string first_metadata = metadata_text("first");
    std::string second_metadata = metadata_text("second");
    std::unique_ptr<HubServer> server;
    std::string first_oid;   // the blob of the first variant's metadata.json
    std::string second_oid;  // ... and of the second's

    CrossHub() {
        const fs::path a = dir.path() / "a.json";
        const fs::path b = dir.path() / "b.json";
        write_text(a, first_metadata);
        write_text(b, second_metadata);
        first_oid = kernhub::digest::git_blob_sha1_file_hex(a);
        second_oid = kernhub::digest::git_blob_sha1_file_hex(b);
        const std::string first = "build/" + host_cpu_variant() + "/";
        const std::string second = "build/" + other_cpu_variant() + "/";
        server = serve_repo(dir.path(), k_repo,
                            {{first + "metadata.json", plain_file(a)},
                             {first + "libcross.so", plain_file(b)},
                             {second + "metadata.json", plain_file(b)},
                             {second + "libcross.so", plain_file(a)}});
    }
};

fs::path blob_lock(const Sandbox& box, const std::string& oid) {
    return box.cache / ".locks" / "kernels--kh-lock--cross" / (oid + ".lock");
}

// An flock on a blob's lock file, as another kernhub process holds it.
struct HeldLock {
    UniqueFd fd;
    explicit HeldLock(const fs::path& path) : fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644)) {
        REQUIRE(fd.get() >= 0);
        REQUIRE(::flock(fd.get(), LOCK_EX) == 0);
    }
};

bool lock_free(const fs::path& path) {
    UniqueFd fd(::open(path.c_str(), O_RDWR | O_CLOEXEC));
    if (fd.get() < 0) return false;
    return ::flock(fd.get(), LOCK_EX | LOCK_NB) == 0;  // released when fd closes
}

template <class Predicate>
bool within(std::chrono::seconds limit, Predicate done) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
        if (done()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return done();
}

std::vector<std::string> fetch_args(const Sandbox& box, const std::string& repo_id, const HubServer& server,
                                    const std::vector<std::string>& more = {}) {
    std::vector<std::string> args{"fetch",  repo_id, "--endpoint", server.endpoint(), "--cache-dir", box.cache.string(),
                                  "--quiet"};
    args.insert(args.end(), more.begin(), more.end());
    return args;
}

const EnvChanges k_trust{{"KERNHUB_TRUST_REMOTE_CODE", "1"}};

}  // namespace

TEST_CASE("a file waiting for metadata.json lets its blob lock go when metadata.json's lock is taken", "[cli]") {
    CrossHub hub;
    Sandbox box;
    fs::create_directories(blob_lock(box, hub.first_oid).parent_path());
    std::optional<HeldLock> other(std::in_place, blob_lock(box, hub.first_oid));  // the first metadata.json's
    Background first(box, fetch_args(box, k_repo, *hub.server, {"--target", host_cpu_variant()}), k_trust);
    // The library (the second metadata.json's bytes) is fetched while
    // metadata.json waits for the lock held here; the library must not
    // keep its own lock while it waits for metadata.json.
    const std::string library = "build/" + host_cpu_variant() + "/libcross.so";
    CHECK(within(std::chrono::seconds(20), [&] { return hub.server->count_requests(library) == 1; }));
    CHECK(within(std::chrono::seconds(20), [&] { return lock_free(blob_lock(box, hub.second_oid)); }));

    // So a second fetch, of the variant laid out the other way round, gets
    // the second metadata.json's lock and places its blob (from the first
    // fetch's partial, or downloaded), while its library waits for the
    // first metadata.json's lock.
    Background second(box, fetch_args(box, k_repo, *hub.server, {"--target", other_cpu_variant()}), k_trust);
    const fs::path second_blob = box.cache / "kernels--kh-lock--cross" / "blobs" / hub.second_oid;
    CHECK(within(std::chrono::seconds(20), [&] { return fs::exists(second_blob); }));
    other.reset();
    // Ended within a bound: waiting on each other, both would be killed.
    const std::optional<ProcessResult> first_done = first.finish_within(std::chrono::seconds(20));
    const std::optional<ProcessResult> second_done = second.finish_within(std::chrono::seconds(20));
    REQUIRE(first_done);
    REQUIRE(second_done);
    INFO(describe(*first_done) << describe(*second_done));
    CHECK(first_done->exit_code == 0);
    CHECK(second_done->exit_code == 0);

    // Both variants whole, every blob verified.
    ProcessResult verify = box.run({"cache", "verify", "--cache-dir", box.cache.string()});
    INFO(describe(verify));
    CHECK(verify.exit_code == 0);
    CHECK_FALSE(tree_has_name(box.cache / "kernels--kh-lock--cross" / "blobs", ".incomplete"));
}

// Without a policy the signature bundle is one more plain file. It has no
// digest entry (the digest does not cover it), yet it too waits for
// metadata.json: held at the hub until the bundle's answer has gone out,
// metadata.json then refuses the variant (kernels-minver), and nothing of
// the variant may stay in the snapshot, where Python kernels would find it.
TEST_CASE("a signature bundle fetched beside metadata.json is not kept when metadata.json refuses the variant",
          "[cli]") {
    TempDir dir;
    const fs::path metadata = dir.path() / "metadata.json";
    const fs::path bundle = dir.path() / "bundle.json";
    const fs::path library = dir.path() / "lib.so";
    write_text(metadata,
               nlohmann::json{{"version", 1}, {"license", "Apache-2.0"}, {"kernels-minver", "99.0.0"}}.dump());
    write_text(bundle, "{\"mediaType\": \"application/vnd.dev.sigstore.bundle.v0.3+json\"}");
    write_text(library, std::string(4096, 'k'));
    const std::string prefix = "build/" + host_cpu_variant() + "/";
    const std::unique_ptr<HubServer> hub = serve_repo(dir.path(), "kh-side/refused",
                                                      {{prefix + "metadata.json", plain_file(metadata)},
                                                       {prefix + "metadata.json.sigstore", plain_file(bundle)},
                                                       {prefix + "libside.so", plain_file(library)}});
    HubServer& server = *hub;
    // The first rule that matches applies: the bundle's target contains
    // metadata.json's, so it gets a rule of its own that changes nothing.
    server.add_faults({{{"match", "metadata.json.sigstore"}, {"action", "delay"}, {"seconds", 0}, {"count", -1}},
                       {{"match", prefix + "metadata.json"}, {"action", "hold"}, {"gate", "metadata"}}});
    Sandbox box;
    Background fetch(box, fetch_args(box, "kh-side/refused", server), k_trust);
    const bool held = server.wait_held("metadata");
    // The bundle's answer has gone out while metadata.json is held.
    const bool bundle_sent =
        within(std::chrono::seconds(20), [&] { return body_sent(server, "metadata.json.sigstore"); });
    server.release("metadata");
    const ProcessResult result = fetch.finish();
    CHECK(held);
    CHECK(bundle_sent);
    check_error(result, 7, {"kernels>=99.0.0"});
    const fs::path folder = box.cache / "kernels--kh-side--refused";
    CHECK_FALSE(tree_has_name(folder / "snapshots", "metadata.json.sigstore"));
    CHECK_FALSE(tree_has_name(folder / "snapshots", "libside.so"));
    CHECK_FALSE(tree_has_name(folder / "blobs", ".incomplete"));
    // Of the variant's blobs, only metadata.json's may stay (verified).
    std::size_t blobs = 0;
    if (fs::exists(folder / "blobs")) {
        for (const auto& entry : fs::directory_iterator(folder / "blobs")) {
            (void)entry;
            ++blobs;
        }
    }
    CHECK(blobs <= 1);
}

// A transfer of metadata.json that fails (here a 500 after the library has
// streamed whole) refuses nothing: the library's partial download stays
// for the next run, which takes it without asking for its bytes again.
TEST_CASE("when metadata.json's transfer fails the library streamed beside it is kept for the next run", "[cli]") {
    TempDir dir;
    const fs::path metadata = dir.path() / "metadata.json";
    const fs::path library = dir.path() / "lib.so";
    write_text(metadata, nlohmann::json{{"version", 1}, {"license", "Apache-2.0"}}.dump());
    write_text(library, std::string(64 << 10, 'k'));
    const std::string prefix = "build/" + host_cpu_variant() + "/";
    const std::unique_ptr<HubServer> hub =
        serve_repo(dir.path(), "kh-side/flaky",
                   {{prefix + "metadata.json", plain_file(metadata)}, {prefix + "libside.so", plain_file(library)}});
    HubServer& server = *hub;
    // The first request held, then answered 500; the retry 500 too.
    server.add_faults({{{"match", prefix + "metadata.json"}, {"action", "hold"}, {"gate", "metadata"}, {"status", 500}},
                       {{"match", prefix + "metadata.json"}, {"action", "status"}, {"status", 500}, {"count", -1}}});
    Sandbox box;
    const std::vector<std::string> args = fetch_args(box, "kh-side/flaky", server);
    Background fetch(box, args, k_trust);
    const bool held = server.wait_held("metadata");
    const fs::path blobs = box.cache / "kernels--kh-side--flaky" / "blobs";
    // The library's partial holds all its bytes, waiting for metadata.json.
    const auto whole_partial = [&] {
        std::error_code ec;
        if (!fs::is_directory(blobs, ec)) return false;
        for (const auto& entry : fs::directory_iterator(blobs, ec)) {
            if (entry.path().string().find(".incomplete") != std::string::npos &&
                fs::file_size(entry.path(), ec) == (64u << 10)) {
                return true;
            }
        }
        return false;
    };
    const bool streamed = within(std::chrono::seconds(20), whole_partial);
    server.release("metadata");
    const ProcessResult result = fetch.finish();
    CHECK(held);
    CHECK(streamed);
    check_error(result, 5, {"500"});
    CHECK(whole_partial());

    // The next run resumes at the partial's end: the library is not asked for again.
    server.reset();
    ProcessResult again = box.run(args, k_trust);
    INFO(describe(again));
    CHECK(again.exit_code == 0);
    CHECK(server.count_requests(prefix + "libside.so") == 0);
    CHECK_FALSE(tree_has_name(blobs, ".incomplete"));
}
