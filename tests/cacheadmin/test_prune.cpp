// cache prune: what goes (unreferenced blobs and snapshots, abandoned
// partials), what stays (referenced, kept, fresh, in use), and --dry-run.
#include <sys/stat.h>

#include <set>

#include "cacheadmin/cache_fixture.hpp"
#include "cacheadmin/prune.hpp"
#include "kernhub/error.hpp"
#include "lockfile/lockfile.hpp"
#include "support/slurp.hpp"

using namespace kernhub::test::cacheadmin;
using kernhub::PruneReport;
using kernhub::RepoType;
using kernhub::test::TempDir;
namespace kc = kernhub::cacheadmin;

namespace {

std::set<std::string> relative(const std::vector<std::string>& paths, const fs::path& root) {
    std::set<std::string> out;
    for (const auto& p : paths) out.insert(fs::path(p).lexically_relative(root).string());
    return out;
}

std::map<std::string, std::string> kept_reasons(const PruneReport& report, const fs::path& root) {
    std::map<std::string, std::string> out;
    for (const auto& k : report.kept) out[fs::path(k.path).lexically_relative(root).string()] = k.reason;
    return out;
}

// Commit A is named by a ref, B only by the keep set, C by nothing; blob
// "loose" is linked by no snapshot. Everything is two hours old.
struct ThreeCommits {
    TempDir dir;
    RepoFixture kernel{dir.path(), "org/kernel"};
    std::string loose;

    ThreeCommits() {
        kernel.variant(k_commit_a, "object A");
        kernel.variant(k_commit_b, "object B");
        kernel.variant(k_commit_c, "object C");
        kernel.repo.write_tree(k_commit_c, "[]");
        kernel.repo.write_ref("main", k_commit_a);
        loose = kernel.blob("nobody links me");
        age(dir.path(), 2);
    }

    kc::PruneRequest request(bool dry_run = false) const {
        kc::PruneRequest r;
        r.dry_run = dry_run;
        r.keep["kernels--org--kernel"] = {k_commit_b};
        return r;
    }

    std::set<std::string> expected_removed() const {
        const std::string f = "kernels--org--kernel/";
        return {f + "snapshots/" + k_commit_c,
                f + ".kernhub/variants/" + k_commit_c,
                f + ".kernhub/trees/" + k_commit_c + ".json",
                f + "blobs/" + kernhub::digest::sha256_hex("object C"),
                f + "blobs/" + git_blob_id("{\"id\": \"object C\"}"),
                f + "blobs/" + loose};
    }
};

}  // namespace

TEST_CASE("prune --dry-run lists what prune removes and removes nothing", "[cache]") {
    ThreeCommits cache;
    const auto before = tree_of(cache.dir.path());
    PruneReport dry = kc::prune_cache(cache.dir.path(), cache.request(true));
    CHECK(dry.dry_run);
    CHECK(tree_of(cache.dir.path()) == before);
    CHECK(relative(dry.removed, cache.dir.path()) == cache.expected_removed());

    PruneReport real = kc::prune_cache(cache.dir.path(), cache.request());
    CHECK_FALSE(real.dry_run);
    CHECK(relative(real.removed, cache.dir.path()) == cache.expected_removed());
    CHECK(real.bytes == dry.bytes);
    CHECK(real.bytes == std::string("object C").size() + std::string("{\"id\": \"object C\"}").size() +
                            std::string("nobody links me").size());
    for (const auto& path : cache.expected_removed()) {
        std::error_code ec;
        CHECK_FALSE(fs::exists(fs::symlink_status(cache.dir.path() / path, ec)));
    }
}

TEST_CASE("prune keeps the snapshots refs and kept locks name, with their blobs and records", "[cache]") {
    ThreeCommits cache;
    kc::prune_cache(cache.dir.path(), cache.request());
    for (const std::string& commit : {k_commit_a, k_commit_b}) {
        const fs::path variant = cache.kernel.snapshot(commit) / "build" / k_variant;
        CHECK(fs::is_regular_file(variant / "libkernel.so"));  // the link resolves: its blob stayed
        CHECK(fs::is_regular_file(variant / "metadata.json"));
        CHECK(fs::exists(cache.kernel.repo.folder() / ".kernhub" / "variants" / commit / (k_variant + ".json")));
    }
    CHECK(cache.kernel.repo.read_ref("main") == k_commit_a);
    // A second run finds nothing more to do.
    CHECK(kc::prune_cache(cache.dir.path(), cache.request()).removed.empty());
    // Without the keep set, B goes too.
    CHECK(kc::prune_cache(cache.dir.path(), kc::PruneRequest{}).removed.size() == 4);  // snapshot, record, 2 blobs
}

TEST_CASE("prune keeps anything modified within k_prune_grace", "[cache]") {
    TempDir dir;
    RepoFixture kernel(dir.path(), "org/kernel");
    kernel.variant(k_commit_a, "fresh snapshot");
    const std::string fresh_blob = kernel.blob("fresh blob");
    const fs::path partial = kernel.repo.folder() / "blobs" / (fresh_blob + ".1234.incomplete");
    write_file(partial, "fresh partial");
    // Old except for one link: a fetch adding to the snapshot right now.
    kernel.variant(k_commit_b, "old snapshot");
    age(kernel.snapshot(k_commit_b), 2);
    fs::remove(kernel.snapshot(k_commit_b) / "build" / k_variant / "libkernel.so");
    kernel.file(k_commit_b, "build/" + k_variant + "/libkernel.so", "old snapshot");

    PruneReport report = kc::prune_cache(dir.path(), {});
    CHECK(report.removed.empty());
    auto kept = kept_reasons(report, dir.path());
    const std::string f = "kernels--org--kernel/";
    CHECK(kept.count(f + "snapshots/" + k_commit_a) == 1);
    CHECK(kept.count(f + "snapshots/" + k_commit_b) == 1);
    CHECK(kept.count(f + "blobs/" + fresh_blob) == 1);
    CHECK(kept.count(f + "blobs/" + fresh_blob + ".1234.incomplete") == 1);
    for (const auto& [path, reason] : kept) CHECK(reason.find("k_prune_grace") != std::string::npos);

    age(dir.path(), 2);
    // Two snapshots with their records and two blobs each, the loose blob, the partial.
    CHECK(kc::prune_cache(dir.path(), {}).removed.size() == 2 * 4 + 2);
}

TEST_CASE("prune removes a stale partial, but not one whose blob lock a live download holds", "[cache]") {
    TempDir dir;
    RepoFixture kernel(dir.path(), "org/kernel");
    const std::string free_etag = kernhub::digest::sha256_hex("abandoned");
    const std::string busy_etag = kernhub::digest::sha256_hex("downloading");
    const fs::path blobs = kernel.repo.folder() / "blobs";
    write_file(blobs / (free_etag + ".aaaa.incomplete"), "aband");
    write_file(blobs / (busy_etag + ".bbbb.incomplete"), "downl");
    age(dir.path(), 2);
    auto lock = kernel.repo.lock_blob(busy_etag);  // another open file description: a download in flight

    PruneReport report = kc::prune_cache(dir.path(), {});
    CHECK(relative(report.removed, dir.path()) ==
          std::set<std::string>{"kernels--org--kernel/blobs/" + free_etag + ".aaaa.incomplete"});
    CHECK(report.bytes == 5);
    CHECK(fs::exists(blobs / (busy_etag + ".bbbb.incomplete")));
    auto kept = kept_reasons(report, dir.path());
    CHECK(kept["kernels--org--kernel/blobs/" + busy_etag + ".bbbb.incomplete"].find("lock is held") !=
          std::string::npos);
}

TEST_CASE("without working file locks a partial is removed only after k_stale_partial_age", "[cache]") {
    TempDir dir;
    RepoFixture kernel(dir.path(), "org/kernel");
    const fs::path blobs = kernel.repo.folder() / "blobs";
    const fs::path recent = blobs / (std::string(64, '1') + ".aaaa.incomplete");
    const fs::path stale = blobs / (std::string(64, '2') + ".bbbb.incomplete");
    write_file(recent, "two hours");
    write_file(stale, "a day and more");
    age(recent, 2);
    age(stale, 25);
    kc::PruneRequest request;
    request.use_locks = false;
    PruneReport report = kc::prune_cache(dir.path(), request);
    CHECK(report.removed == std::vector<std::string>{stale.string()});
    CHECK(fs::exists(recent));
    CHECK(kept_reasons(report, dir.path()).count(recent.lexically_relative(dir.path()).string()) == 1);
}

TEST_CASE("prune removes temp entries abandoned for k_stale_partial_age, never what their links point to", "[cache]") {
    TempDir dir;
    RepoFixture kernel(dir.path(), "org/kernel");
    const fs::path tmp = kernel.repo.folder() / ".kernhub" / "tmp";
    const fs::path outside = dir.path() / "outside.txt";
    write_file(outside, "not the cache's");
    // An unpack folder left by a killed fetch, with a link out of the cache.
    const fs::path unpack = tmp / "unpack.1234";
    write_file(unpack / "lib" / "libk.so", "12345678");
    write_file(unpack / "top.txt", "abc");
    fs::create_symlink(outside, unpack / "lib" / "out");
    const fs::path old_write = tmp / ".ref.0123.tmp";
    write_file(old_write, "xy");
    const fs::path live_write = tmp / ".ref.4567.tmp";
    write_file(live_write, "in use");
    age(unpack, 25);
    age(old_write, 25);
    age(live_write, 2);

    SECTION("--dry-run reports them and removes nothing") {
        kc::PruneRequest request;
        request.dry_run = true;
        PruneReport report = kc::prune_cache(dir.path(), request);
        std::set<std::string> removed(report.removed.begin(), report.removed.end());
        CHECK(removed == std::set<std::string>{unpack.string(), old_write.string()});
        CHECK(report.bytes == 13);
        CHECK(fs::exists(unpack / "lib" / "libk.so"));
        CHECK(fs::exists(old_write));
    }
    SECTION("prune removes them") {
        PruneReport report = kc::prune_cache(dir.path(), {});
        std::set<std::string> removed(report.removed.begin(), report.removed.end());
        CHECK(removed == std::set<std::string>{unpack.string(), old_write.string()});
        CHECK(report.bytes == 13);
        CHECK_FALSE(fs::exists(fs::symlink_status(unpack)));
        CHECK_FALSE(fs::exists(old_write));
        CHECK(fs::exists(live_write));
        CHECK(kept_reasons(report, dir.path())[live_write.lexically_relative(dir.path()).string()].find(
                  "k_stale_partial_age") != std::string::npos);
        CHECK(kernhub::test::slurp(outside) == "not the cache's");
    }
}

TEST_CASE("prune never removes through a .kernhub that is a link out of the repo folder", "[cache]") {
    TempDir dir;
    RepoFixture kernel(dir.path(), "org/kernel");
    kernel.variant(k_commit_c, "object C");
    kernel.repo.write_tree(k_commit_c, "[]");
    const fs::path outside = dir.path() / "elsewhere";
    fs::rename(kernel.repo.folder() / ".kernhub", outside);
    fs::create_symlink(outside, kernel.repo.folder() / ".kernhub");
    write_file(outside / "tmp" / "notes.txt", "someone else's");
    age(dir.path(), 25);

    PruneReport report = kc::prune_cache(dir.path(), {});
    // The snapshot goes; nothing below the link does.
    CHECK(relative(report.removed, dir.path()).count("kernels--org--kernel/snapshots/" + k_commit_c) == 1);
    for (const auto& path : report.removed) CHECK(path.find(".kernhub") == std::string::npos);
    CHECK(fs::exists(outside / "tmp" / "notes.txt"));
    CHECK(fs::exists(outside / "variants" / k_commit_c));
    CHECK(fs::exists(outside / "trees" / (k_commit_c + ".json")));
}

TEST_CASE("prune keeps blobs that another tool's links name in another form", "[cache]") {
    TempDir dir;
    RepoFixture kernel(dir.path(), "org/kernel");
    const std::string etag = kernel.blob("linked absolutely");
    fs::create_directories(kernel.snapshot(k_commit_a));
    fs::create_symlink(kernel.blob_path(etag), kernel.snapshot(k_commit_a) / "file");
    kernel.repo.write_ref("main", k_commit_a);
    age(dir.path(), 2);
    CHECK(kc::prune_cache(dir.path(), {}).removed.empty());
    CHECK(fs::exists(kernel.blob_path(etag)));
}

TEST_CASE("a ref that does not hold a commit keeps every snapshot of its repo", "[cache]") {
    TempDir dir;
    RepoFixture kernel(dir.path(), "org/kernel");
    kernel.variant(k_commit_a, "object A");
    write_file(kernel.repo.folder() / "refs" / "main", "garbage");
    age(dir.path(), 2);
    PruneReport report = kc::prune_cache(dir.path(), {});
    CHECK(report.removed.empty());
    CHECK(fs::exists(kernel.snapshot(k_commit_a)));
    CHECK(kept_reasons(report, dir.path()).count("kernels--org--kernel/refs") == 1);
}

TEST_CASE("locked_commits reads kernhub.lock and both kernels.lock formats", "[cache]") {
    TempDir dir;
    kernhub::lockfile::KernhubLock lock;
    kernhub::lockfile::LockedKernel kernel;
    kernel.repo_id = "org/kernel";
    kernel.revision = "main";
    kernel.commit = k_commit_a;
    kernel.symbol = "f";
    lock.kernels["kernel"] = kernel;
    kernel.repo_id = "org/model";
    kernel.repo_type = RepoType::model;
    kernel.commit = k_commit_b;
    lock.kernels["model"] = kernel;
    write_file(dir.path() / "kernhub.lock", kernhub::lockfile::write_kernhub_lock(lock));
    CHECK(kc::locked_commits(dir.path() / "kernhub.lock") ==
          kc::KeptCommits{{"kernels--org--kernel", {k_commit_a}}, {"models--org--model", {k_commit_b}}});

    write_file(dir.path() / "kernels.lock", R"([{"dependency": {"repo-id": "org/kernel", "version": 1},
        "lock": {"commit": ")" + k_commit_b + R"("}}])");
    CHECK(kc::locked_commits(dir.path() / "kernels.lock") == kc::KeptCommits{{"kernels--org--kernel", {k_commit_b}}});

    write_file(dir.path() / "old.lock", R"([{"repo_id": "org/kernel", "sha": ")" + k_commit_c +
                                            R"(", "variants": {"torch-universal": {"hash": "sha256-)" +
                                            std::string(64, '0') + R"(", "hash_type": "git_lfs_concat"}}}])");
    CHECK(kc::locked_commits(dir.path() / "old.lock") == kc::KeptCommits{{"kernels--org--kernel", {k_commit_c}}});
}

TEST_CASE("a --keep-lock file that is missing, oversized or not a lock is refused", "[cache]") {
    TempDir dir;
    auto code_of = [](const fs::path& path) {
        try {
            kc::locked_commits(path);
        } catch (const kernhub::Error& e) {
            return e.code();
        }
        return kernhub::ErrorCode::ok;
    };
    CHECK(code_of(dir.path() / "absent.lock") == kernhub::ErrorCode::not_found);
    write_file(dir.path() / "big.lock", std::string(kernhub::lockfile::k_max_lock_bytes + 1, ' '));
    CHECK(code_of(dir.path() / "big.lock") == kernhub::ErrorCode::usage);
    write_file(dir.path() / "registry.json", R"({"format": 1, "kernels": {}, "extra": true})");
    CHECK(code_of(dir.path() / "registry.json") == kernhub::ErrorCode::usage);
}

TEST_CASE("prune keeps an unlinked blob whose lock a fetch holds", "[cache]") {
    ThreeCommits cache;
    // A fetch holds the lock from its look at the blob until its link is made.
    auto lock = cache.kernel.repo.lock_blob(cache.loose);
    PruneReport report = kc::prune_cache(cache.dir.path(), cache.request());
    std::set<std::string> expected = cache.expected_removed();
    expected.erase("kernels--org--kernel/blobs/" + cache.loose);
    CHECK(relative(report.removed, cache.dir.path()) == expected);
    CHECK(fs::exists(cache.kernel.blob_path(cache.loose)));
    CHECK(kept_reasons(report, cache.dir.path())["kernels--org--kernel/blobs/" + cache.loose].find("lock is held") !=
          std::string::npos);
}

TEST_CASE("a link made after prune's scan keeps its old blob, in a snapshot the scan did not see", "[cache]") {
    ThreeCommits cache;
    for (bool dry_run : {false, true}) {
        CAPTURE(dry_run);
        TempDir other;
        fs::copy(cache.dir.path(), other.path(), fs::copy_options::recursive | fs::copy_options::copy_symlinks);
        RepoFixture kernel(other.path(), "org/kernel");
        const auto scan = kc::scan_cache(other.path());
        // A fetch of a new commit that reuses the old, unlinked blob links it
        // (under its lock) after prune's scan.
        const std::string new_commit(40, 'd');
        kernel.repo.link_snapshot(new_commit, "build/" + k_variant + "/reused.bin", cache.loose);
        kernel.repo.write_ref("main", new_commit);
        PruneReport report = kc::prune_scanned(scan, cache.request(dry_run));
        CHECK(relative(report.removed, other.path()).count("kernels--org--kernel/blobs/" + cache.loose) == 0);
        CHECK(fs::exists(kernel.snapshot(new_commit) / "build" / k_variant / "reused.bin"));  // follows the link
    }
}

TEST_CASE("prune removes unlinked blobs beyond one batch of blob locks", "[cache]") {
    TempDir dir;
    RepoFixture kernel(dir.path(), "org/kernel");
    for (int i = 0; i < 600; ++i) kernel.blob("orphan " + std::to_string(i));
    age(dir.path(), 2);
    PruneReport report = kc::prune_cache(dir.path(), {});
    CHECK(report.removed.size() == 600);
    CHECK(fs::is_empty(kernel.repo.folder() / "blobs"));
}

TEST_CASE("a snapshot claimed after prune's scan survives that prune, and one claimed after its removal is missing",
          "[cache]") {
    // What a warm fetch, a prewarm or an import does before it names commit
    // C in a ref or hands out its path: claim it. The scan prune decided
    // from said nothing named C.
    ThreeCommits cache;
    const auto scan = kc::scan_cache(cache.dir.path());
    REQUIRE(cache.kernel.repo.claim_snapshot(k_commit_c));
    cache.kernel.repo.write_ref("v0", k_commit_c);
    PruneReport report = kc::prune_scanned(scan, cache.request());
    CHECK(relative(report.removed, cache.dir.path()).count("kernels--org--kernel/snapshots/" + k_commit_c) == 0);
    CHECK(fs::exists(cache.kernel.snapshot(k_commit_c) / "build" / k_variant));
    CHECK(fs::exists(cache.kernel.repo.folder() / ".kernhub" / "variants" / k_commit_c));
    CHECK(kept_reasons(report, cache.dir.path())["kernels--org--kernel/snapshots/" + k_commit_c].find("last hour") !=
          std::string::npos);

    // Without the claim the same prune removes it: the claim is what keeps it.
    ThreeCommits unclaimed;
    const auto scan2 = kc::scan_cache(unclaimed.dir.path());
    unclaimed.kernel.repo.write_ref("v0", k_commit_c);
    PruneReport removed = kc::prune_scanned(scan2, unclaimed.request());
    CHECK(relative(removed.removed, unclaimed.dir.path()).count("kernels--org--kernel/snapshots/" + k_commit_c) == 1);
    // A claim after the removal reports the snapshot missing: the caller
    // fetches it again instead of trusting it.
    CHECK_FALSE(unclaimed.kernel.repo.claim_snapshot(k_commit_c));
}
