// The Python kernels library's verification receipts under
// <root>/.verified-kernels/ are another tool's data (docs/cache-format.md,
// "Other tools' data"): never damage, kept while their variant is whole,
// removed with a variant prune removes, never exported, refused in an
// archive, dropped when an import adds files to their variant.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <set>

#include "archive/archive.hpp"
#include "archive/tar_builder.hpp"
#include "cacheadmin/cache_archive.hpp"
#include "cacheadmin/cache_fixture.hpp"
#include "cacheadmin/inventory.hpp"
#include "cacheadmin/prune.hpp"
#include "cacheadmin/verify_cache.hpp"
#include "kernhub/error.hpp"
#include "support/slurp.hpp"

using namespace kernhub::test::cacheadmin;
using kernhub::Error;
using kernhub::ErrorCode;
using kernhub::test::TarBuilder;
using kernhub::test::TempDir;
namespace kc = kernhub::cacheadmin;
namespace cache = kernhub::cache;

namespace {

std::set<std::string> removed_set(const kernhub::PruneReport& report) {
    return {report.removed.begin(), report.removed.end()};
}

}  // namespace

TEST_CASE("receipt_name is what kernels 0.19.1 names a KernelLocation.remote receipt", "[cache]") {
    // Both names come from receipts the real kernels 0.19.1 wrote.
    CHECK(cache::receipt_name("org/repo", std::string(40, 'a'), "torch-cpu") ==
          "dfcb332475625637b30b47a9d677448c4be4f09ebab546c567aa5e3c025da56c");
    CHECK(cache::receipt_name("Org/Repo2", std::string(40, 'b'), "torch-cuda") ==
          "c6d9876dc956201543e08562b9b6d2e7e2741b20010c54e95b795a82c2636556");
    // The length prefixes keep field boundaries apart.
    CHECK(cache::receipt_name("org/ab", std::string(40, 'a'), "c") !=
          cache::receipt_name("org/a", std::string(40, 'a'), "bc"));
}

TEST_CASE("scan_receipts reads only receipts it can account for, and a linked store as kernels does", "[cache]") {
    TempDir dir;
    const fs::path root = dir.path();
    const auto good = write_receipts(root, "org/kernel", k_commit_a, k_variant);
    const fs::path store = root / ".verified-kernels/digest/v1";
    write_file(store / ".tmpAbC123", "half written");                       // kernels' temp file
    write_file(store / "README", "unknown name");                           // not a receipt name
    write_file(store / std::string(64, 'f'), good[0].filename().string());  // does not parse
    // Valid JSON whose name is not its location's: another location's bytes.
    fs::copy_file(good[0], store / std::string(64, 'e'));
    write_file(store / std::string(64, 'd'), std::string(cache::k_max_receipt_bytes + 1, ' '));  // oversized
    fs::create_symlink(good[0], store / std::string(64, 'c'));
    const auto receipts = cache::scan_receipts(root).receipts;
    REQUIRE(receipts.size() == 2);
    for (const auto& r : receipts) {
        CHECK(r.repo_id == "org/kernel");
        CHECK(r.commit == k_commit_a);
        CHECK(r.variant == k_variant);
    }

    // kernels reads and writes its receipts through a linked
    // .verified-kernels, so kernhub reads and removes them there too.
    TempDir other;
    const auto linked = write_receipts(other.path(), "org/kernel", k_commit_a, k_variant);
    fs::create_directories(root / "linked");
    fs::create_symlink(other.path() / ".verified-kernels", root / "linked/.verified-kernels");
    CHECK(cache::scan_receipts(root / "linked").receipts.size() == 2);
    CHECK(cache::remove_receipts(root / "linked", "org/kernel", k_commit_a, k_variant).size() == 2);
    CHECK(none_exist(linked));
    CHECK(fs::is_directory(other.path() / ".verified-kernels/digest/v1"));  // the store itself stays
}

TEST_CASE("remove_receipts removes a link at a receipt's name, not its target, and leaves a folder there",
          "[cache]") {
    TempDir dir;
    const fs::path root = dir.path();
    const std::string name = cache::receipt_name("org/kernel", k_commit_a, k_variant);
    const fs::path target = root / "target.json";
    write_file(target, "{}");
    fs::create_directories(root / ".verified-kernels/digest/v1");
    fs::create_symlink(target, root / ".verified-kernels/digest/v1" / name);
    fs::create_directories(root / ".verified-kernels/signature/v1" / name / "inner");
    const auto removed = cache::remove_receipts(root, "org/kernel", k_commit_a, k_variant);
    REQUIRE(removed.size() == 1);
    CHECK(removed[0] == root / ".verified-kernels/digest/v1" / name);
    CHECK_FALSE(fs::exists(fs::symlink_status(removed[0])));
    CHECK(fs::exists(target));
    CHECK(fs::is_directory(root / ".verified-kernels/signature/v1" / name / "inner"));
}

TEST_CASE("scan_receipts stops at k_max_receipts entries with the limit named", "[cache]") {
    TempDir dir;
    const fs::path store = dir.path() / ".verified-kernels/signature/v1";
    fs::create_directories(store);
    const int fd = ::open(store.c_str(), O_RDONLY | O_DIRECTORY);
    REQUIRE(fd >= 0);
    std::size_t made = 0;
    for (std::size_t i = 0; i <= cache::k_max_receipts; ++i) {
        const int file = ::openat(fd, std::to_string(i).c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
        if (file < 0) break;
        ::close(file);
        ++made;
    }
    ::close(fd);
    REQUIRE(made == cache::k_max_receipts + 1);
    // The other store is read whole: the receipt there of a variant the
    // cache does not hold is swept all the same.
    const auto gone = write_receipt(dir.path(), "digest/v1", "org/gone", k_commit_a, k_variant);
    const cache::ReceiptScan scan = cache::scan_receipts(dir.path());
    REQUIRE(scan.over_limit.size() == 1);
    CHECK_THAT(scan.over_limit[0], Catch::Contains("k_max_receipts"));
    CHECK_THAT(scan.over_limit[0], Catch::Contains("signature/v1"));
    REQUIRE(scan.receipts.size() == 1);
    // Prune reports it and keeps the store; the rest of its work is done.
    const auto report = kc::prune_cache(dir.path(), kc::PruneRequest{});
    REQUIRE(report.kept.size() == 1);
    CHECK_THAT(report.kept[0].reason, Catch::Contains("k_max_receipts"));
    CHECK_FALSE(fs::exists(gone));
}

TEST_CASE("receipts are no damage and stay while their variant is whole", "[cache]") {
    TempDir dir;
    RepoFixture kernel(dir.path(), "org/kernel");
    kernel.variant(k_commit_a, "object A");
    kernel.repo.write_ref("main", k_commit_a);
    age(dir.path(), 2);
    const auto receipts = write_receipts(dir.path(), "org/kernel", k_commit_a, k_variant);

    const auto verify = kc::verify_cache(dir.path(), kc::VerifyOptions{});
    CHECK(verify.problems.empty());
    const auto listing = kc::list_cache(dir.path());
    REQUIRE(listing.repos.size() == 1);

    const auto report = kc::prune_cache(dir.path(), kc::PruneRequest{});
    CHECK(report.removed.empty());
    CHECK(all_exist(receipts));
}

TEST_CASE("prune removes the receipts of the variants it removes, and those of variants not held in full", "[cache]") {
    TempDir dir;
    const fs::path root = dir.path();
    RepoFixture kernel(root, "org/kernel");
    kernel.variant(k_commit_a, "object A");
    kernel.variant(k_commit_b, "object B");
    kernel.variant(k_commit_c, "object C");
    kernel.repo.write_ref("main", k_commit_a);
    kernel.repo.write_ref("v2", k_commit_b);
    // B's .so is gone (a blob removed from under its link): B is held in part.
    fs::remove(kernel.blob_path(kernel.blob("object B")));
    age(root, 2);
    const auto live = write_receipts(root, "org/kernel", k_commit_a, k_variant);
    const auto partial = write_receipts(root, "org/kernel", k_commit_b, k_variant);
    const auto pruned = write_receipts(root, "org/kernel", k_commit_c, k_variant);
    const auto elsewhere = write_receipts(root, "org/gone", k_commit_a, k_variant);
    // A receipt whose location could not be a path kernhub holds is left alone.
    const fs::path odd = write_receipt(root, "digest/v1", "org/kernel", k_commit_a, "../escape");
    const fs::path odd_repo = write_receipt(root, "digest/v1", "../../etc/x", k_commit_a, k_variant);
    const fs::path temp = root / ".verified-kernels/digest/v1/.tmpXyZ789";
    write_file(temp, "kernels writing");

    SECTION("dry run lists them and removes nothing") {
        kc::PruneRequest request;
        request.dry_run = true;
        const auto report = kc::prune_cache(root, request);
        const auto removed = removed_set(report);
        for (const auto* group : {&partial, &pruned, &elsewhere}) {
            for (const auto& p : *group) CHECK(removed.count(p.string()) == 1);
        }
        CHECK(all_exist(partial));
        CHECK(all_exist(pruned));
        CHECK(all_exist(elsewhere));
    }
    SECTION("prune") {
        const auto report = kc::prune_cache(root, kc::PruneRequest{});
        const auto removed = removed_set(report);
        CHECK(none_exist(partial));
        CHECK(none_exist(pruned));
        CHECK(none_exist(elsewhere));
        for (const auto* group : {&partial, &pruned, &elsewhere}) {
            for (const auto& p : *group) CHECK(removed.count(p.string()) == 1);
        }
        CHECK(!fs::exists(kernel.snapshot(k_commit_c)));
        CHECK(all_exist(live));
        CHECK(fs::exists(odd));
        CHECK(fs::exists(odd_repo));
        CHECK(fs::exists(temp));
        // Nothing left to do: a second prune keeps every receipt there is.
        CHECK(kc::prune_cache(root, kc::PruneRequest{}).removed.empty());
        CHECK(all_exist(live));
    }
}

TEST_CASE("a receipt for the models folder of a repo is kept while that folder holds the variant", "[cache]") {
    TempDir dir;
    RepoFixture model(dir.path(), "org/legacy", kernhub::RepoType::model);
    model.variant(k_commit_a, "object A");
    model.repo.write_ref("main", k_commit_a);
    age(dir.path(), 2);
    const auto receipts = write_receipts(dir.path(), "org/legacy", k_commit_a, k_variant);
    CHECK(kc::prune_cache(dir.path(), kc::PruneRequest{}).removed.empty());
    CHECK(all_exist(receipts));
}

TEST_CASE("export carries no receipt, import refuses an archive with one and drops those of variants it adds to",
          "[cache]") {
    TempDir dir;
    const fs::path root = dir.path() / "cache";
    RepoFixture kernel(root, "org/kernel");
    kernel.variant(k_commit_a, "object A");
    kernel.repo.write_ref("main", k_commit_a);
    write_receipts(root, "org/kernel", k_commit_a, k_variant);

    const fs::path tar = dir.path() / "out.tar";
    kc::export_cache(root, {}, tar);
    const fs::path unpacked = dir.path() / "unpacked";
    fs::create_directories(unpacked);
    {
        const auto tree = kernhub::archive::extract(tar, unpacked, kc::import_policy());
        for (const auto& entry : tree.entries()) CHECK(entry.path.find(".verified-kernels") == std::string::npos);
    }

    // An archive holding a receipt is refused, and the cache is as it was.
    const fs::path other = dir.path() / "other";
    const fs::path bad = dir.path() / "bad.tar";
    {
        TarBuilder builder(bad);
        builder.file(".verified-kernels/digest/v1/" + cache::receipt_name("org/kernel", k_commit_a, k_variant), "{}");
    }
    const auto before = tree_of(root);
    for (const fs::path& target : {root, other}) {
        try {
            kc::import_cache(target, bad);
            FAIL("no refusal");
        } catch (const Error& e) {
            CHECK(e.code() == ErrorCode::verification);
            CHECK_THAT(e.plain_message(), Catch::Contains("verification receipts"));
        }
    }
    CHECK(tree_of(root) == before);

    // Another cache whose variant lacks a file the archive brings: its
    // receipts go (the variant changes); a receipt of a variant the import
    // does not touch stays.
    RepoFixture partial(other, "org/kernel");
    partial.file(k_commit_a, "build/" + k_variant + "/libkernel.so", "object A");
    const auto touched = write_receipts(other, "org/kernel", k_commit_a, k_variant);
    const auto untouched = write_receipts(other, "org/kernel", k_commit_a, "other-variant");
    const auto stats = kc::import_cache(other, tar);
    CHECK(stats.links == 1);
    CHECK(none_exist(touched));
    CHECK(all_exist(untouched));

    // Importing the same archive again adds nothing, and a receipt kernels
    // wrote since stays.
    const auto again = write_receipts(other, "org/kernel", k_commit_a, k_variant);
    CHECK(kc::import_cache(other, tar).links == 0);
    CHECK(all_exist(again));
}

TEST_CASE("remove_receipts removes a variant's receipt from every store and nothing else", "[cache]") {
    TempDir dir;
    const auto mine = write_receipts(dir.path(), "org/kernel", k_commit_a, k_variant);
    const auto other = write_receipts(dir.path(), "org/kernel", k_commit_b, k_variant);
    CHECK(cache::remove_receipts(dir.path(), "org/kernel", k_commit_a, k_variant, true).size() == 2);
    CHECK(all_exist(mine));
    CHECK(cache::remove_receipts(dir.path(), "org/kernel", k_commit_a, k_variant).size() == 2);
    CHECK(none_exist(mine));
    CHECK(all_exist(other));
    CHECK(cache::remove_receipts(dir.path(), "org/kernel", k_commit_a, k_variant).empty());
    // No store at all is nothing to remove.
    TempDir empty;
    CHECK(cache::remove_receipts(empty.path(), "org/kernel", k_commit_a, k_variant).empty());
}

TEST_CASE("verify says when kernels holds a receipt for a damaged variant, and repair removes it first", "[cache]") {
    TempDir dir;
    RepoFixture kernel(dir.path(), "org/kernel");
    kernel.variant(k_commit_a, "object A");
    kernel.variant(k_commit_b, "object B");
    kernel.repo.write_ref("main", k_commit_a);
    const auto damaged = write_receipts(dir.path(), "org/kernel", k_commit_a, k_variant);
    const auto whole = write_receipts(dir.path(), "org/kernel", k_commit_b, k_variant);
    flip_first_byte(kernel.blob_path(kernel.blob("object A")));

    const auto report = kc::verify_cache(dir.path(), kc::VerifyOptions{});
    std::size_t mentions = 0;
    for (const auto& problem : report.problems) {
        CHECK(problem.path.find(".verified-kernels") == std::string::npos);  // a receipt is never the damage
        if (problem.problem.find("verification receipt") != std::string::npos) ++mentions;
    }
    CHECK(mentions == 1);
    CHECK(all_exist(damaged));

    kc::VerifyOptions repair;
    repair.repair = true;
    kc::verify_cache(dir.path(), repair);
    CHECK(none_exist(damaged));
    CHECK(all_exist(whole));
    CHECK(kc::verify_cache(dir.path(), kc::VerifyOptions{}).problems.empty());
}

TEST_CASE("prune removes the receipt of a variant that lacks a file its listing names", "[cache]") {
    TempDir dir;
    RepoFixture kernel(dir.path(), "org/kernel");
    kernel.variant(k_commit_a, "object A");
    kernel.variant(k_commit_b, "object B");
    kernel.repo.write_ref("main", k_commit_a);
    kernel.repo.write_ref("v2", k_commit_b);
    const auto listing = [](const std::string& so) {
        const std::string meta = "{\"id\": \"" + so + "\"}";
        return nlohmann::json::array({{{"type", "file"},
                                       {"path", "build/" + k_variant + "/libkernel.so"},
                                       {"size", so.size()},
                                       {"oid", git_blob_id(so)},
                                       {"lfs", {{"oid", kernhub::digest::sha256_hex(so)}, {"size", so.size()}}}},
                                      {{"type", "file"},
                                       {"path", "build/" + k_variant + "/metadata.json"},
                                       {"size", meta.size()},
                                       {"oid", git_blob_id(meta)}}})
            .dump();
    };
    kernel.repo.write_tree(k_commit_a, listing("object A"));
    kernel.repo.write_tree(k_commit_b, listing("object B"));
    // B's metadata.json link is gone: no dangling link, but the listing names it.
    fs::remove(kernel.snapshot(k_commit_b) / "build" / k_variant / "metadata.json");
    const auto whole = write_receipts(dir.path(), "org/kernel", k_commit_a, k_variant);
    const auto partial = write_receipts(dir.path(), "org/kernel", k_commit_b, k_variant);
    kc::prune_cache(dir.path(), kc::PruneRequest{});
    CHECK(all_exist(whole));
    CHECK(none_exist(partial));
}

TEST_CASE("bytecode Python wrote into a snapshot is no part of the variant, for prune and export alike", "[cache]") {
    TempDir dir;
    const fs::path root = dir.path() / "cache";
    RepoFixture kernel(root, "org/kernel");
    kernel.variant(k_commit_a, "object A");
    kernel.variant(k_commit_b, "object B");
    kernel.repo.write_ref("main", k_commit_a);
    kernel.repo.write_ref("v2", k_commit_b);
    // What `import` of the package leaves beside it in the snapshot.
    for (const std::string& commit : {k_commit_a, k_commit_b}) {
        write_file(kernel.snapshot(commit) / "build" / k_variant / "__pycache__/__init__.cpython-311.pyc", "pyc");
    }
    // B keeps nothing but that bytecode.
    fs::remove(kernel.snapshot(k_commit_b) / "build" / k_variant / "libkernel.so");
    fs::remove(kernel.snapshot(k_commit_b) / "build" / k_variant / "metadata.json");
    const auto whole = write_receipts(root, "org/kernel", k_commit_a, k_variant);
    const auto bytecode_only = write_receipts(root, "org/kernel", k_commit_b, k_variant);

    kc::PruneRequest request;
    request.dry_run = true;
    const auto removed = removed_set(kc::prune_cache(root, request));
    for (const auto& p : bytecode_only) CHECK(removed.count(p.string()) == 1);
    for (const auto& p : whole) CHECK(removed.count(p.string()) == 0);

    // Export takes the snapshot without it (it was: exit 4, "not a link into blobs/").
    const fs::path tar = dir.path() / "out.tar";
    kc::export_cache(root, {}, tar);
    const fs::path unpacked = dir.path() / "unpacked";
    fs::create_directories(unpacked);
    const auto tree = kernhub::archive::extract(tar, unpacked, kc::import_policy());
    bool has_so = false;
    for (const auto& entry : tree.entries()) {
        CHECK(entry.path.find("__pycache__") == std::string::npos);
        has_so = has_so || entry.path.find(k_commit_a + "/build/" + k_variant + "/libkernel.so") != std::string::npos;
    }
    CHECK(has_so);
}
