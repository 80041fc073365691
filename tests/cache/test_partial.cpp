// Partial downloads across runs: which partial a new download continues,
// which ones are removed, and whether this filesystem's flock excludes.
#include <sys/file.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "cache/cache.hpp"
#include "digest/digest.hpp"
#include "kernhub/error.hpp"
#include "support/slurp.hpp"
#include "support/temp_dir.hpp"

namespace fs = std::filesystem;
using kernhub::RepoType;
using kernhub::cache::IncompleteBlob;
using kernhub::cache::RepoCache;
using kernhub::test::slurp;
using kernhub::test::TempDir;

namespace {

std::vector<std::string> partial_names(const RepoCache& cache) {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(cache.folder() / "blobs")) {
        if (e.path().extension() == ".incomplete") out.push_back(e.path().filename().string());
    }
    std::sort(out.begin(), out.end());
    return out;
}

}  // namespace

TEST_CASE("open_partial with adopt continues the largest partial and removes the others", "[store]") {
    TempDir dir;
    RepoCache cache(dir.path(), RepoType::kernel, "org/name");
    const std::string etag = kernhub::digest::sha256_hex("whatever");
    const std::string other = kernhub::digest::sha256_hex("another blob");
    fs::create_directories(cache.folder() / "blobs");
    const fs::path blobs = cache.folder() / "blobs";
    std::ofstream(blobs / (etag + ".aaaa.incomplete")) << "abc";
    std::ofstream(blobs / (etag + ".bbbb.incomplete")) << "abcdefgh";
    std::ofstream(blobs / (etag + ".cccc.incomplete")) << "";
    std::ofstream(blobs / (other + ".dddd.incomplete")) << "another blob's partial";
    fs::create_directory(blobs / (etag + ".eeee.incomplete"));  // not a file: never taken

    IncompleteBlob blob = cache.open_partial(etag, true);
    CHECK(blob.temp_path().filename() == etag + ".bbbb.incomplete");
    CHECK(blob.size() == 8);
    blob.write("ij", 2);
    CHECK(slurp(blob.temp_path()) == "abcdefghij");
    std::vector<std::string> kept{etag + ".bbbb.incomplete", etag + ".eeee.incomplete", other + ".dddd.incomplete"};
    std::sort(kept.begin(), kept.end());
    CHECK(partial_names(cache) == kept);
}

TEST_CASE("open_partial without adopt starts a new partial and removes only stale ones", "[store]") {
    TempDir dir;
    RepoCache cache(dir.path(), RepoType::kernel, "org/name");
    const std::string etag = kernhub::digest::sha256_hex("whatever");
    fs::create_directories(cache.folder() / "blobs");
    const fs::path blobs = cache.folder() / "blobs";
    std::ofstream(blobs / (etag + ".live.incomplete")) << "being written by someone";
    std::ofstream(blobs / (etag + ".dead.incomplete")) << "left two days ago";
    fs::last_write_time(blobs / (etag + ".dead.incomplete"),
                        fs::file_time_type::clock::now() - kernhub::cache::k_stale_partial_age - std::chrono::hours(1));

    IncompleteBlob blob = cache.open_partial(etag, false);
    CHECK(blob.size() == 0);
    CHECK(fs::exists(blobs / (etag + ".live.incomplete")));
    CHECK_FALSE(fs::exists(blobs / (etag + ".dead.incomplete")));
    CHECK(partial_names(cache).size() == 2);  // the live one and the new one
}

TEST_CASE("adopting with no partial, or an empty one, starts afresh", "[store]") {
    TempDir dir;
    RepoCache cache(dir.path(), RepoType::kernel, "org/name");
    const std::string etag = kernhub::digest::sha256_hex("whatever");
    {
        IncompleteBlob blob = cache.open_partial(etag, true);
        CHECK(blob.size() == 0);
    }
    REQUIRE(partial_names(cache).size() == 1);  // kept by the destructor, empty
    IncompleteBlob again = cache.open_partial(etag, true);
    CHECK(again.size() == 0);
    CHECK(partial_names(cache).size() == 1);  // the empty one was removed, not stacked up
}

TEST_CASE("flock_excludes is true on a local filesystem, and its probe leaves nothing behind", "[store]") {
    TempDir dir;
    CHECK(kernhub::cache::flock_excludes(dir.path()));
    std::vector<fs::path> left;
    for (const auto& e : fs::directory_iterator(dir.path() / ".locks")) left.push_back(e.path());
    CHECK(left.empty());
}

TEST_CASE("a lock wait ends with Error(interrupted) when the cancel flag is set", "[store]") {
    TempDir dir;
    RepoCache cache(dir.path(), RepoType::kernel, "org/name");
    const std::string etag = kernhub::digest::sha256_hex("whatever");
    auto held = cache.lock_blob(etag);
    std::atomic<bool> cancel{false};
    std::thread stopper([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        cancel = true;
    });
    kernhub::ErrorCode code = kernhub::ErrorCode::ok;
    try {
        auto second = cache.lock_blob(etag, &cancel);  // another open file description: must wait
    } catch (const kernhub::Error& e) {
        code = e.code();
    }
    stopper.join();
    CHECK(code == kernhub::ErrorCode::interrupted);
}

TEST_CASE("a partial with another name elsewhere (a hard link) is never continued", "[store]") {
    TempDir dir;
    RepoCache cache(dir.path(), RepoType::kernel, "org/name");
    const std::string etag = kernhub::digest::sha256_hex("whatever");
    fs::create_directories(cache.folder() / "blobs");
    const fs::path outside = dir.path() / "outside.txt";
    std::ofstream(outside) << "a file outside the cache";
    fs::create_hard_link(outside, cache.folder() / "blobs" / (etag + ".link.incomplete"));

    IncompleteBlob blob = cache.open_partial(etag, true);
    CHECK(blob.size() == 0);
    blob.write("new", 3);
    CHECK(slurp(outside) == "a file outside the cache");
    CHECK(blob.temp_path().filename() != etag + ".link.incomplete");
}

TEST_CASE("commit refuses a partial that was swapped for another file while it was written", "[store]") {
    TempDir dir;
    RepoCache cache(dir.path(), RepoType::kernel, "org/name");
    const std::string etag = kernhub::digest::sha256_hex("verified bytes");
    IncompleteBlob blob = cache.begin_blob(etag);
    blob.write("verified bytes", 14);
    // Another writer renames its own file over the partial's name.
    const fs::path planted = dir.path() / "planted";
    std::ofstream(planted) << "EVIL";
    fs::rename(planted, blob.temp_path());
    kernhub::ErrorCode code = kernhub::ErrorCode::ok;
    try {
        blob.commit();
    } catch (const kernhub::Error& e) {
        code = e.code();
    }
    CHECK(code == kernhub::ErrorCode::verification);
    CHECK_FALSE(fs::exists(cache.blob_path(etag)));
}
