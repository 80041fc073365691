// The cache scan and `cache ls`: what is listed, and that nothing below the
// root is followed through a symlink or read past its bounds.
#include <unistd.h>

#include "cacheadmin/cache_fixture.hpp"
#include "cacheadmin/inventory.hpp"
#include "kernhub/error.hpp"

using namespace kernhub::test::cacheadmin;
using kernhub::CachedRepo;
using kernhub::Error;
using kernhub::ErrorCode;
using kernhub::RepoType;
using kernhub::test::TempDir;
namespace kc = kernhub::cacheadmin;

namespace {

const CachedRepo& repo_named(const kernhub::CacheListing& listing, const std::string& repo_id) {
    for (const auto& repo : listing.repos) {
        if (repo.repo_id == repo_id) return repo;
    }
    FAIL("no repo " << repo_id << " in the listing");
    throw std::logic_error("unreachable");
}

}  // namespace

TEST_CASE("ls lists repos, refs, commits, variants, blobs and partial downloads", "[cache]") {
    TempDir dir;
    RepoFixture kernel(dir.path(), "org/kernel");
    kernel.variant(k_commit_a, std::string(1000, 'a'));
    kernel.variant(k_commit_a, std::string(300, 'c'), "native-cu128-x86_64-linux");
    kernel.file(k_commit_a, "README.md", "readme", false);
    kernel.variant(k_commit_b, std::string(1000, 'a'));  // the same .so: one blob for both commits
    kernel.repo.write_ref("main", k_commit_a);
    kernel.repo.write_ref("v1", k_commit_a);
    kernel.repo.write_ref("feature/x", k_commit_b);
    write_file(kernel.repo.folder() / "blobs" / (std::string(64, 'e') + ".0123.incomplete"), "12345");
    RepoFixture model(dir.path(), "org/model", RepoType::model);
    model.file(k_commit_c, "build/" + k_variant + "/lib.so", "model kernel");  // no record
    fs::create_directories(dir.path() / "datasets--org--data" / "blobs");
    fs::create_directories(dir.path() / "kernels--not-a-repo");

    kernhub::CacheListing listing = kc::list_cache(dir.path());
    CHECK(listing.root == dir.path().string());
    REQUIRE(listing.repos.size() == 2);
    const CachedRepo& k = repo_named(listing, "org/kernel");
    CHECK(k.repo_type == RepoType::kernel);
    CHECK(k.folder == (dir.path() / "kernels--org--kernel").string());
    CHECK(k.refs ==
          std::map<std::string, std::string>{{"feature/x", k_commit_b}, {"main", k_commit_a}, {"v1", k_commit_a}});
    // .so (shared), two metadata.json, cu .so, README
    CHECK(k.blobs == 5);
    CHECK(k.partials == 1);
    const std::uint64_t meta = std::string("{\"id\": \"\"}").size();
    CHECK(k.size == 1000 + (meta + 1000) + 300 + (meta + 300) + 6 + 5);
    REQUIRE(k.commits.size() == 2);
    const auto& a = k.commits[0];
    CHECK(a.commit == k_commit_a);
    CHECK(a.refs == std::vector<std::string>{"main", "v1"});
    CHECK(a.files == 5);
    REQUIRE(a.variants.size() == 2);
    CHECK(a.variants[0].name == "native-cpu-x86_64-linux");
    CHECK(a.variants[0].files == 2);
    CHECK(a.variants[0].size == 1000 + meta + 1000);
    CHECK(a.variants[0].recorded);
    CHECK(a.variants[1].name == "native-cu128-x86_64-linux");
    CHECK(a.variants[1].recorded);
    CHECK(k.commits[1].refs == std::vector<std::string>{"feature/x"});

    const CachedRepo& m = repo_named(listing, "org/model");
    CHECK(m.repo_type == RepoType::model);
    CHECK(m.refs.empty());
    REQUIRE(m.commits.size() == 1);
    REQUIRE(m.commits[0].variants.size() == 1);
    CHECK_FALSE(m.commits[0].variants[0].recorded);  // huggingface_hub-style: links only
    CHECK(listing.size == k.size + m.size);
}

TEST_CASE("a variant record that no longer matches its links is not shown as recorded", "[cache]") {
    TempDir dir;
    RepoFixture kernel(dir.path(), "org/kernel");
    kernel.variant(k_commit_a, "so bytes");
    fs::remove(kernel.snapshot(k_commit_a) / "build" / k_variant / "metadata.json");
    auto listing = kc::list_cache(dir.path());
    REQUIRE(listing.repos.size() == 1);
    REQUIRE(listing.repos[0].commits.size() == 1);
    REQUIRE(listing.repos[0].commits[0].variants.size() == 1);
    CHECK(listing.repos[0].commits[0].variants[0].files == 1);
    CHECK_FALSE(listing.repos[0].commits[0].variants[0].recorded);
}

TEST_CASE("the scan never enters a symlink below the root", "[cache]") {
    TempDir dir;
    TempDir outside;
    for (int i = 0; i < 3; ++i) write_file(outside.path() / "build" / "x" / std::to_string(i), "outside");
    fs::create_directories(outside.path() / "refs");
    write_file(outside.path() / "refs" / "main", k_commit_a);

    RepoFixture kernel(dir.path(), "org/kernel");
    kernel.variant(k_commit_a, "so");
    // A variant folder, refs/ and a whole repo folder that are links elsewhere.
    fs::create_directory_symlink(outside.path() / "build" / "x", kernel.snapshot(k_commit_a) / "build" / "linked");
    fs::create_directory_symlink(outside.path() / "refs", kernel.repo.folder() / "refs");
    fs::create_directory_symlink(outside.path(), dir.path() / "kernels--org--elsewhere");

    auto listing = kc::list_cache(dir.path());
    REQUIRE(listing.repos.size() == 1);
    const auto& repo = listing.repos[0];
    CHECK(repo.refs.empty());
    REQUIRE(repo.commits.size() == 1);
    REQUIRE(repo.commits[0].variants.size() == 1);  // "linked" is a link, not a variant folder
    CHECK(repo.commits[0].files == 3);              // two files and the link itself
}

TEST_CASE("the root itself may be a symlink", "[cache]") {
    TempDir dir;
    RepoFixture kernel(dir.path() / "real", "org/kernel");
    kernel.variant(k_commit_a, "so");
    fs::create_directory_symlink(dir.path() / "real", dir.path() / "root");
    auto listing = kc::list_cache(dir.path() / "root");
    CHECK(listing.repos.size() == 1);
    CHECK(kc::list_cache(dir.path() / "missing").repos.empty());
}

TEST_CASE("folders nested deeper than k_max_cache_depth stop the scan with an error naming the limit", "[cache]") {
    TempDir dir;
    RepoFixture kernel(dir.path(), "org/kernel");
    fs::path deep = kernel.snapshot(k_commit_a);
    for (std::size_t i = 0; i <= kc::k_max_cache_depth + 1; ++i) deep /= "d";
    fs::create_directories(deep);
    try {
        kc::scan_cache(dir.path());
        FAIL("the scan accepted " << kc::k_max_cache_depth + 2 << " nested folders");
    } catch (const Error& e) {
        CHECK(e.code() == ErrorCode::verification);
        CHECK(std::string(e.what()).find("k_max_cache_depth") != std::string::npos);
    }
}

TEST_CASE("a symlink target longer than k_max_link_bytes is read as unreadable", "[cache]") {
    TempDir dir;
    RepoFixture kernel(dir.path(), "org/kernel");
    fs::create_directories(kernel.snapshot(k_commit_a));
    const std::string long_target = std::string(kc::k_max_link_bytes + 10, 'x');
    REQUIRE(::symlink(long_target.c_str(), (kernel.snapshot(k_commit_a) / "long").c_str()) == 0);
    auto repos = kc::scan_cache(dir.path());
    REQUIRE(repos.size() == 1);
    REQUIRE(repos[0].snapshots.size() == 1);
    REQUIRE(repos[0].snapshots[0].entries.size() == 1);
    CHECK(repos[0].snapshots[0].entries[0].type == kc::EntryType::symlink);
    CHECK(repos[0].snapshots[0].entries[0].link.empty());
}

TEST_CASE("linked_etag accepts only the relative link into the same repo's blobs", "[cache]") {
    const std::string etag(64, 'a');
    CHECK(kc::linked_etag("build/v/f", "../../../../blobs/" + etag) == etag);
    CHECK(kc::linked_etag("f", "../../blobs/" + etag) == etag);
    CHECK(kc::linked_etag("build/v/f", "../../../blobs/" + etag).empty());        // one level short
    CHECK(kc::linked_etag("build/v/f", "../../../../../blobs/" + etag).empty());  // leaves the repo
    CHECK(kc::linked_etag("build/v/f", "/cache/kernels--o--n/blobs/" + etag).empty());
    CHECK(kc::linked_etag("build/v/f", "../../../../blobs/" + etag.substr(1)).empty());  // not an etag
    CHECK(kc::linked_etag("build/v/f", "../../../../blobs/../blobs/" + etag).empty());
}
