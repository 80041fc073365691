// cache verify: every blob against its name, every snapshot link, every
// variant record; --repair removes exactly what is damaged.
#include <unistd.h>

#include <atomic>
#include <optional>
#include <thread>

#include "cacheadmin/cache_fixture.hpp"
#include "cacheadmin/verify_cache.hpp"

using namespace kernhub::test::cacheadmin;
using kernhub::CacheVerifyReport;
using kernhub::test::TempDir;
namespace kc = kernhub::cacheadmin;

namespace {

// path (relative to the root) -> problem
std::map<std::string, std::string> problems(const CacheVerifyReport& report, const fs::path& root) {
    std::map<std::string, std::string> out;
    for (const auto& p : report.problems) out[fs::path(p.path).lexically_relative(root).string()] = p.problem;
    return out;
}

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

bool exists_entry(const fs::path& path) {
    std::error_code ec;
    return fs::exists(fs::symlink_status(path, ec));
}

}  // namespace

TEST_CASE("verify finds nothing wrong in a clean cache and counts what it checked", "[cache]") {
    TempDir dir;
    RepoFixture kernel(dir.path(), "org/kernel");
    kernel.variant(k_commit_a, "shared object");
    kernel.file(k_commit_a, "README.md", "plain", false);
    kernel.repo.write_ref("main", k_commit_a);
    write_file(kernel.repo.folder() / "blobs" / (std::string(64, 'e') + ".0123.incomplete"), "partial");
    CacheVerifyReport report = kc::verify_cache(dir.path(), {});
    CHECK(report.root == dir.path().string());
    CHECK(report.problems.empty());
    CHECK(report.blobs_checked == 3);
    CHECK(report.links_checked == 3);
    CHECK(report.records_checked == 1);
}

TEST_CASE("verify names a flipped byte in an LFS blob and in a plain one, with the links and record on them",
          "[cache]") {
    TempDir dir;
    RepoFixture kernel(dir.path(), "org/kernel");
    kernel.variant(k_commit_a, "shared object");
    const std::string so = kernel.blob("shared object");
    const std::string meta = kernel.blob("{\"id\": \"shared object\"}", false);
    flip_first_byte(kernel.blob_path(so));
    flip_first_byte(kernel.blob_path(meta));

    auto found = problems(kc::verify_cache(dir.path(), {}), dir.path());
    const std::string folder = "kernels--org--kernel/";
    const std::string links = folder + "snapshots/" + k_commit_a + "/build/" + k_variant + "/";
    REQUIRE(found.size() == 5);
    CHECK(contains(found[folder + "blobs/" + so], "does not match its name (its SHA-256 is"));
    CHECK(contains(found[folder + "blobs/" + meta], "does not match its name (its git blob SHA-1 is"));
    CHECK(found[links + "libkernel.so"] == "links the damaged blob blobs/" + so);
    CHECK(found[links + "metadata.json"] == "links the damaged blob blobs/" + meta);
    CHECK(contains(found[folder + ".kernhub/variants/" + k_commit_a + "/" + k_variant + ".json"], "names "));
}

TEST_CASE("verify names a blob replaced by a symlink, a dangling link and links leading out of the repo", "[cache]") {
    TempDir dir;
    TempDir outside;
    RepoFixture kernel(dir.path(), "org/kernel");
    RepoFixture other(dir.path(), "org/other");
    kernel.variant(k_commit_a, "shared object");
    const std::string so = kernel.blob("shared object");
    // The same bytes outside the cache, linked in place of the blob.
    write_file(outside.path() / "copy", "shared object");
    fs::remove(kernel.blob_path(so));
    fs::create_symlink(outside.path() / "copy", kernel.blob_path(so));
    const fs::path snap = kernel.snapshot(k_commit_a);
    fs::create_symlink("../../blobs/" + std::string(64, 'd'), snap / "dangling");
    fs::create_symlink("/etc/hostname", snap / "absolute");
    const std::string theirs = other.blob("other repo's blob");
    fs::create_symlink("../../../kernels--org--other/blobs/" + theirs, snap / "sideways");
    REQUIRE(::mkfifo((snap / "fifo").c_str(), 0644) == 0);

    auto found = problems(kc::verify_cache(dir.path(), {}), dir.path());
    const std::string folder = "kernels--org--kernel/";
    const std::string s = folder + "snapshots/" + k_commit_a + "/";
    CHECK(found[folder + "blobs/" + so] == "is a symbolic link where a blob belongs");
    CHECK(found[s + "build/" + k_variant + "/libkernel.so"] == "links the damaged blob blobs/" + so);
    CHECK(found[s + "dangling"] == "is dangling: blobs/" + std::string(64, 'd') + " is missing");
    CHECK(contains(found[s + "absolute"], "links '/etc/hostname', not the relative link"));
    CHECK(contains(found[s + "sideways"], "not the relative link into this repo's blobs/"));
    CHECK(found[s + "fifo"] == "is neither a link nor a file");
    CHECK(found.count(folder + ".kernhub/variants/" + k_commit_a + "/" + k_variant + ".json") == 1);
    CHECK(found.size() == 7);
}

TEST_CASE("verify --repair removes what is damaged and nothing else", "[cache]") {
    TempDir dir;
    TempDir outside;
    RepoFixture kernel(dir.path(), "org/kernel");
    kernel.variant(k_commit_a, "shared object");
    kernel.variant(k_commit_b, "another object");
    kernel.repo.write_ref("main", k_commit_a);
    write_file(kernel.repo.folder() / "refs" / "broken", "not a commit");
    const std::string so = kernel.blob("shared object");
    flip_first_byte(kernel.blob_path(so));
    write_file(outside.path() / "target", "keep me");
    const fs::path out_link = kernel.snapshot(k_commit_b) / "out";
    fs::create_symlink(outside.path() / "target", out_link);

    kc::VerifyOptions options;
    options.repair = true;
    CacheVerifyReport report = kc::verify_cache(dir.path(), options);
    CHECK(report.problems.size() == 5);  // blob, its link, record A, link out, refs/broken
    for (const auto& p : report.problems) CHECK(p.repaired);
    CHECK_FALSE(exists_entry(kernel.blob_path(so)));
    CHECK_FALSE(exists_entry(kernel.snapshot(k_commit_a) / "build" / k_variant / "libkernel.so"));
    CHECK_FALSE(exists_entry(kernel.repo.folder() / ".kernhub" / "variants" / k_commit_a / (k_variant + ".json")));
    CHECK_FALSE(exists_entry(out_link));
    CHECK_FALSE(exists_entry(kernel.repo.folder() / "refs" / "broken"));
    // Untouched: the link target outside, the good file, commit B, the good ref.
    CHECK(fs::exists(outside.path() / "target"));
    CHECK(fs::exists(kernel.snapshot(k_commit_a) / "build" / k_variant / "metadata.json"));
    CHECK(fs::exists(kernel.repo.folder() / ".kernhub" / "variants" / k_commit_b / (k_variant + ".json")));
    CHECK(kernel.repo.read_ref("main") == k_commit_a);
    CHECK(kc::verify_cache(dir.path(), {}).problems.empty());
}

TEST_CASE("verify --repair waits for the blob's lock before removing a damaged blob", "[cache]") {
    TempDir dir;
    RepoFixture kernel(dir.path(), "org/kernel");
    const std::string etag = kernel.blob("content");
    flip_first_byte(kernel.blob_path(etag));
    std::atomic<bool> done{false};
    CacheVerifyReport report;
    std::string failure;
    std::optional<kernhub::cache::FileLock> lock;
    lock.emplace(kernel.repo.lock_blob(etag));  // a fetch replacing this blob
    std::thread repair([&] {
        try {
            kc::VerifyOptions options;
            options.repair = true;
            report = kc::verify_cache(dir.path(), options);
        } catch (const std::exception& e) {
            failure = e.what();
        }
        done = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    CHECK_FALSE(done);
    CHECK(fs::exists(kernel.blob_path(etag)));
    // The fetch puts a good copy in place before it lets go: that one stays.
    fs::remove(kernel.blob_path(etag));
    kernel.blob("content");
    lock.reset();
    repair.join();
    CHECK(failure.empty());
    REQUIRE(report.problems.size() == 1);
    CHECK(fs::exists(kernel.blob_path(etag)));
    CHECK(kc::verify_cache(dir.path(), {}).problems.empty());
}
