// What cache ls, verify and prune make of the partial area, where a load
// keeps the files it read (.kernhub/partial/<commit>/, docs/cache-format.md,
// "Partial variants"): a part is listed as such, its links and record are
// verified, what it lacks is no damage, and prune removes the parts that are
// stale or point at nothing.
#include <unistd.h>

#include "cacheadmin/cache_fixture.hpp"
#include "cacheadmin/inventory.hpp"
#include "cacheadmin/prune.hpp"
#include "cacheadmin/verify_cache.hpp"

using namespace kernhub::test::cacheadmin;
using kernhub::CachedPart;
using kernhub::CacheVerifyReport;
using kernhub::PruneReport;
using kernhub::test::TempDir;
namespace kc = kernhub::cacheadmin;

namespace {

const std::string k_so = "the library a load opens";
const std::string k_meta = "{\"id\": \"part\"}";
const std::string k_notes = "notes no load reads";

// The hub's listing of commit A: libkernel.so, metadata.json and NOTES.txt.
std::string part_listing() {
    nlohmann::json files = nlohmann::json::array();
    for (const auto& [name, content, lfs] : {std::tuple<std::string, std::string, bool>{"libkernel.so", k_so, true},
                                             {"metadata.json", k_meta, false},
                                             {"NOTES.txt", k_notes, true}}) {
        nlohmann::json entry = {{"type", "file"},
                                {"path", "build/" + k_variant + "/" + name},
                                {"size", content.size()},
                                {"oid", git_blob_id(content)}};
        if (lfs) entry["lfs"] = {{"oid", kernhub::digest::sha256_hex(content)}, {"size", content.size()}};
        files.push_back(entry);
    }
    return files.dump();
}

// A cache whose repo holds two of commit A's three files as a load left
// them, named by refs/main.
struct PartCache {
    TempDir dir;
    RepoFixture kernel{dir.path(), "org/kernel"};

    explicit PartCache(bool with_ref = true) {
        kernel.part(k_commit_a, k_variant, {{"libkernel.so", k_so}, {"metadata.json", k_meta}});
        kernel.repo.write_tree(k_commit_a, part_listing());
        if (with_ref) kernel.repo.write_ref("main", k_commit_a);
    }

    fs::path area() const { return kernel.partial(k_commit_a); }
    fs::path record() const { return area() / (k_variant + ".json"); }
    fs::path links() const { return area() / "build" / k_variant; }

    // The rest of the variant fetched: the whole of it linked and recorded in the snapshot.
    void complete() const {
        kernel.file(k_commit_a, "build/" + k_variant + "/libkernel.so", k_so);
        kernel.file(k_commit_a, "build/" + k_variant + "/metadata.json", k_meta, false);
        kernel.file(k_commit_a, "build/" + k_variant + "/NOTES.txt", k_notes);
        kernel.record(k_commit_a, k_variant,
                      {{"libkernel.so", k_so}, {"metadata.json", k_meta}, {"NOTES.txt", k_notes}});
    }
};

std::set<std::string> removed_under(const PruneReport& report, const fs::path& root) {
    std::set<std::string> out;
    for (const auto& p : report.removed) out.insert(fs::path(p).lexically_relative(root).string());
    return out;
}

std::map<std::string, std::string> verify_problems(const CacheVerifyReport& report, const fs::path& root) {
    std::map<std::string, std::string> out;
    for (const auto& p : report.problems) out[fs::path(p.path).lexically_relative(root).string()] = p.problem;
    return out;
}

bool entry_there(const fs::path& path) {
    std::error_code ec;
    return fs::exists(fs::symlink_status(path, ec));
}

}  // namespace

TEST_CASE("ls lists a variant held in part on a commit without a snapshot, with what it holds of the listing",
          "[cache][partial]") {
    PartCache cache;
    const kernhub::CacheListing listing = kc::list_cache(cache.dir.path());
    REQUIRE(listing.repos.size() == 1);
    const kernhub::CachedRepo& repo = listing.repos[0];
    CHECK(repo.blobs == 2);
    REQUIRE(repo.commits.size() == 1);
    const kernhub::CachedCommit& commit = repo.commits[0];
    CHECK(commit.commit == k_commit_a);
    CHECK_FALSE(commit.snapshot);
    CHECK(commit.refs == std::vector<std::string>{"main"});
    CHECK(commit.files == 0);
    REQUIRE(commit.variants.size() == 1);
    const kernhub::CachedVariant& variant = commit.variants[0];
    CHECK(variant.name == k_variant);
    CHECK(variant.files == 0);
    CHECK_FALSE(variant.recorded);
    REQUIRE(variant.part);
    const CachedPart& part = *variant.part;
    CHECK(part.folder == cache.links().string());
    CHECK(part.files == std::vector<std::string>{"libkernel.so", "metadata.json"});
    CHECK(part.listed == 3);
    CHECK(part.size == k_so.size() + k_meta.size());
    CHECK(part.recorded);
    CHECK_FALSE(part.stale);

    // A record naming a link that went is no longer "recorded".
    fs::remove(cache.links() / "metadata.json");
    const kernhub::CacheListing after = kc::list_cache(cache.dir.path());
    REQUIRE(after.repos[0].commits[0].variants[0].part);
    CHECK(after.repos[0].commits[0].variants[0].part->files == std::vector<std::string>{"libkernel.so"});
    CHECK_FALSE(after.repos[0].commits[0].variants[0].part->recorded);
}

TEST_CASE("ls shows a part beside the variant the snapshot holds whole as stale", "[cache][partial]") {
    PartCache cache;
    cache.complete();
    const kernhub::CacheListing listing = kc::list_cache(cache.dir.path());
    REQUIRE(listing.repos.at(0).commits.size() == 1);
    const kernhub::CachedCommit& commit = listing.repos[0].commits[0];
    CHECK(commit.snapshot);
    CHECK(commit.files == 3);
    REQUIRE(commit.variants.size() == 1);
    CHECK(commit.variants[0].recorded);
    CHECK(commit.variants[0].files == 3);
    REQUIRE(commit.variants[0].part);
    CHECK(commit.variants[0].part->stale);
}

TEST_CASE("verify checks a partial variant's links and record and calls the files it lacks no damage",
          "[cache][partial]") {
    PartCache cache;
    const CacheVerifyReport clean = kc::verify_cache(cache.dir.path(), {});
    CHECK(clean.problems.empty());
    CHECK(clean.blobs_checked == 2);
    CHECK(clean.links_checked == 2);
    CHECK(clean.records_checked == 1);
    REQUIRE(clean.parts.size() == 1);
    CHECK(clean.parts[0].repo_id == "org/kernel");
    CHECK(clean.parts[0].commit == k_commit_a);
    CHECK(clean.parts[0].variant == k_variant);
    CHECK(clean.parts[0].part.files == std::vector<std::string>{"libkernel.so", "metadata.json"});
    CHECK(clean.parts[0].part.listed == 3);

    // Links alone, without a record (a load killed before it), are no damage either.
    fs::remove(cache.record());
    const CacheVerifyReport unrecorded = kc::verify_cache(cache.dir.path(), {});
    CHECK(unrecorded.problems.empty());
    CHECK(unrecorded.records_checked == 0);
    CHECK(unrecorded.parts.size() == 1);
}

TEST_CASE("verify names a wrong byte behind a partial link, the link and the partial record, and repair removes them",
          "[cache][partial]") {
    PartCache cache;
    const fs::path root = cache.dir.path();
    const std::string so = cache.kernel.blob(k_so);
    flip_first_byte(cache.kernel.blob_path(so));
    const auto rel = [&](const fs::path& p) { return p.lexically_relative(root).string(); };
    const auto found = verify_problems(kc::verify_cache(root, {}), root);
    CHECK(found.size() == 3);
    CHECK(found.count(rel(cache.kernel.blob_path(so))) == 1);
    CHECK(found.count(rel(cache.links() / "libkernel.so")) == 1);
    REQUIRE(found.count(rel(cache.record())) == 1);
    CHECK(found.at(rel(cache.record())).find("libkernel.so") != std::string::npos);

    kc::VerifyOptions repair;
    repair.repair = true;
    const CacheVerifyReport repaired = kc::verify_cache(root, repair);
    CHECK(repaired.problems.size() == 3);
    for (const auto& p : repaired.problems) CHECK(p.repaired);
    CHECK_FALSE(entry_there(cache.record()));
    CHECK_FALSE(entry_there(cache.links() / "libkernel.so"));
    CHECK(entry_there(cache.links() / "metadata.json"));
    CHECK(kc::verify_cache(root, {}).problems.empty());
}

TEST_CASE("verify reports a partial link that leads elsewhere and a plain file in the partial area",
          "[cache][partial]") {
    PartCache cache;
    const fs::path root = cache.dir.path();
    write_file(root / "outside", k_meta);
    fs::remove(cache.links() / "metadata.json");
    fs::create_symlink(root / "outside", cache.links() / "metadata.json");
    write_file(cache.links() / "extra.so", "unverified bytes");
    // The snapshot's form of the link (one "../" short) is no partial link either.
    const std::string so = cache.kernel.blob(k_so);
    fs::remove(cache.links() / "libkernel.so");
    fs::create_symlink(kernhub::cache::snapshot_link_target("build/" + k_variant + "/libkernel.so", so),
                       cache.links() / "libkernel.so");
    const auto found = verify_problems(kc::verify_cache(root, {}), root);
    const auto at = [&](const std::string& name) {
        const auto it = found.find((cache.links() / name).lexically_relative(root).string());
        return it == found.end() ? std::string() : it->second;
    };
    CHECK(at("metadata.json").find("not the relative link into this repo's blobs/") != std::string::npos);
    CHECK(at("libkernel.so").find("not the relative link") != std::string::npos);
    CHECK(at("extra.so").find("is not a link") != std::string::npos);
    CHECK(found.count(cache.record().lexically_relative(root).string()) == 1);
}

TEST_CASE("prune removes a partial variant the snapshot now holds whole and leaves no empty partial folder",
          "[cache][partial]") {
    PartCache cache;
    cache.complete();
    age(cache.dir.path(), 2);
    const PruneReport report = kc::prune_cache(cache.dir.path(), kc::PruneRequest{});
    const std::set<std::string> removed = removed_under(report, cache.dir.path());
    CHECK(removed.count(cache.record().lexically_relative(cache.dir.path()).string()) == 1);
    CHECK(removed.count(cache.links().lexically_relative(cache.dir.path()).string()) == 1);
    // No blob goes: the snapshot links all of them.
    for (const std::string& path : removed) CHECK(path.find("/blobs/") == std::string::npos);
    CHECK_FALSE(entry_there(cache.kernel.repo.folder() / ".kernhub" / "partial"));
    CHECK(kc::verify_cache(cache.dir.path(), {}).problems.empty());
}

TEST_CASE("prune removes partial links to missing blobs and the record naming them, and keeps the rest",
          "[cache][partial]") {
    PartCache cache;
    const std::string meta = cache.kernel.blob(k_meta, false);
    fs::remove(cache.kernel.blob_path(meta));
    age(cache.dir.path(), 2);
    const PruneReport report = kc::prune_cache(cache.dir.path(), kc::PruneRequest{});
    const fs::path root = cache.dir.path();
    CHECK(removed_under(report, root) ==
          std::set<std::string>{cache.record().lexically_relative(root).string(),
                                (cache.links() / "metadata.json").lexically_relative(root).string()});
    CHECK(entry_there(cache.links() / "libkernel.so"));
    CHECK(cache.kernel.repo.has_blob(cache.kernel.blob(k_so)));  // still linked by the part
    CHECK(kc::verify_cache(root, {}).problems.empty());
}

TEST_CASE("prune removes the partial area of a commit nothing names once it is old, and then its blobs",
          "[cache][partial]") {
    PartCache fresh_cache(false);
    CHECK(removed_under(kc::prune_cache(fresh_cache.dir.path(), kc::PruneRequest{}), fresh_cache.dir.path()).empty());
    CHECK(entry_there(fresh_cache.record()));

    PartCache cache(false);
    age(cache.dir.path(), 2);
    const fs::path root = cache.dir.path();
    const std::set<std::string> removed = removed_under(kc::prune_cache(root, kc::PruneRequest{}), root);
    CHECK(removed.count(cache.area().lexically_relative(root).string()) == 1);
    CHECK(removed.count(cache.record().lexically_relative(root).string()) == 1);
    CHECK(removed.count("kernels--org--kernel/blobs/" + cache.kernel.blob(k_so)) == 1);
    CHECK_FALSE(entry_there(cache.kernel.repo.folder() / ".kernhub" / "partial"));

    // A dry run says the same and removes nothing.
    PartCache dry(false);
    age(dry.dir.path(), 2);
    kc::PruneRequest request;
    request.dry_run = true;
    const std::set<std::string> would = removed_under(kc::prune_cache(dry.dir.path(), request), dry.dir.path());
    CHECK(would.count(dry.area().lexically_relative(dry.dir.path()).string()) == 1);
    CHECK(would.count("kernels--org--kernel/blobs/" + dry.kernel.blob(k_so)) == 1);
    CHECK(entry_there(dry.record()));
}

TEST_CASE("prune keeps a partial area while a load holds its lock", "[cache][partial]") {
    PartCache cache;
    cache.complete();
    age(cache.dir.path(), 2);
    std::optional<kernhub::cache::FileLock> load = cache.kernel.repo.hold_partial();
    REQUIRE(load);
    const PruneReport report = kc::prune_cache(cache.dir.path(), kc::PruneRequest{});
    CHECK(removed_under(report, cache.dir.path()).empty());
    bool said = false;
    for (const auto& kept : report.kept) {
        said = said || (kept.path == cache.area().string() && kept.reason.find("a load is reading it") == 0);
    }
    CHECK(said);
    CHECK(entry_there(cache.record()));
    load.reset();
    CHECK_FALSE(removed_under(kc::prune_cache(cache.dir.path(), kc::PruneRequest{}), cache.dir.path()).empty());
    CHECK_FALSE(entry_there(cache.area()));
}

TEST_CASE("prune removes empty partial folders a removal left", "[cache][partial]") {
    TempDir dir;
    RepoFixture kernel(dir.path(), "org/kernel");
    kernel.variant(k_commit_a, "whole");
    kernel.repo.write_ref("main", k_commit_a);
    fs::create_directories(kernel.partial(k_commit_a) / "build");
    fs::create_directories(kernel.partial(k_commit_b));
    age(dir.path(), 2);
    kc::prune_cache(dir.path(), kc::PruneRequest{});
    CHECK_FALSE(entry_there(kernel.repo.folder() / ".kernhub" / "partial"));
    fs::create_directories(kernel.repo.folder() / ".kernhub" / "partial");
    kc::prune_cache(dir.path(), kc::PruneRequest{});
    CHECK_FALSE(entry_there(kernel.repo.folder() / ".kernhub" / "partial"));
}
