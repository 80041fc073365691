// Cache import over crafted archives: the cache layout goes in, checked;
// everything else is refused with Error(verification) and leaves the cache
// exactly as it was (docs/cache-format.md, "Cache archives").
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <functional>
#include <map>
#include <string>

#include "archive/tar_builder.hpp"
#include "cacheadmin/cache_archive.hpp"
#include "digest/digest.hpp"
#include "kernhub/error.hpp"
#include "support/slurp.hpp"
#include "support/temp_dir.hpp"

namespace fs = std::filesystem;
using kernhub::Error;
using kernhub::ErrorCode;
using namespace kernhub::test;

namespace {

std::string git_blob_id(const std::string& content) {
    kernhub::digest::GitBlobHasher hasher(content.size());
    hasher.update(content.data(), content.size());
    return hasher.finish_hex();
}

// Every path under `root` with what it holds: link targets, file bytes.
std::map<std::string, std::string> tree_state(const fs::path& root) {
    std::map<std::string, std::string> state;
    std::error_code ec;
    for (fs::recursive_directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string rel = it->path().lexically_relative(root).generic_string();
        if (it->is_symlink()) {
            state[rel] = "-> " + fs::read_symlink(it->path()).string();
        } else if (it->is_regular_file()) {
            state[rel] = slurp(it->path());
        } else {
            state[rel] = "dir";
        }
    }
    return state;
}

// A small, valid cache of one kernel repo: an LFS-style blob (SHA-256 name)
// and a plain one (git blob id), their snapshot links, a ref, and side data.
struct ValidCache {
    std::string folder = "kernels--kh-test--vec";
    std::string commit = "0123456789abcdef0123456789abcdef01234567";
    std::string so =
        "\x7f"
        "ELF shared object bytes";
    std::string so_etag = kernhub::digest::sha256_hex(so);
    std::string meta = "{\"python-depends\": []}";
    std::string meta_etag = git_blob_id(meta);
    std::string snap = folder + "/snapshots/" + commit;
    std::string hf_tree = "[]";  // huggingface_hub's listing of the commit (none it reads)

    void add_to(TarBuilder& tar) const {
        tar.dir(folder).dir(folder + "/blobs");
        tar.file(folder + "/blobs/" + so_etag, so).file(folder + "/blobs/" + meta_etag, meta);
        tar.symlink(snap + "/build/native-cpu/lib.so", "../../../../blobs/" + so_etag);
        tar.symlink(snap + "/build/native-cpu/metadata.json", "../../../../blobs/" + meta_etag);
        tar.file(folder + "/refs/main", commit).file(folder + "/refs/v1", commit);
        tar.file(folder + "/trees/" + commit + ".json", hf_tree);
        tar.file(folder + "/.kernhub/trees/" + commit + ".json", "[]");
        tar.file(folder + "/.kernhub/variants/" + commit + "/native-cpu.json", "{\"format\": 1}");
        tar.file("CACHEDIR.TAG", "Signature: 8a477f597d28d172789f06886806bc55\n");
    }
};

struct Scratch {
    TempDir dir;
    fs::path root = dir.path() / "cache";
    fs::path tar = dir.path() / "in.tar";
};

bool leftovers_in(const fs::path& root) {
    std::error_code ec;
    for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
        if (it->path().filename().string().rfind(".kernhub-extract-", 0) == 0) return true;
    }
    return false;
}

}  // namespace

TEST_CASE("import moves a checked cache archive in, and a second import adds nothing", "[archive]") {
    Scratch s;
    ValidCache valid;
    {
        TarBuilder tar(s.tar, TarBuilder::Filter::zstd);
        valid.add_to(tar);
    }
    auto stats = kernhub::cacheadmin::import_cache(s.root, s.tar);
    CHECK(stats.blobs == 2);
    CHECK(stats.links == 2);
    CHECK(stats.refs == 2);
    CHECK(stats.side_files == 1);  // huggingface_hub's listing; kernhub's side data is never taken
    CHECK(stats.skipped == 0);
    CHECK(stats.repos == std::vector<std::string>{valid.folder});
    const fs::path repo = s.root / valid.folder;
    CHECK(slurp(repo / "blobs" / valid.so_etag) == valid.so);
    struct stat st {};
    REQUIRE(::lstat((repo / "blobs" / valid.so_etag).c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0444);
    CHECK(fs::read_symlink(repo / "snapshots" / valid.commit / "build/native-cpu/lib.so") ==
          "../../../../blobs/" + valid.so_etag);
    CHECK(slurp(repo / "snapshots" / valid.commit / "build/native-cpu/metadata.json") == valid.meta);
    CHECK(slurp(repo / "refs/main") == valid.commit);
    // kernhub's record that it verified a variant is never taken from an
    // archive: the first verified use in this cache writes its own.
    CHECK_FALSE(fs::exists(repo / ".kernhub/variants"));
    CHECK(slurp(repo / "trees" / (valid.commit + ".json")) == "[]");
    CHECK(fs::exists(s.root / "CACHEDIR.TAG"));
    CHECK(!leftovers_in(s.root));
    CHECK((!fs::exists(repo / ".kernhub/tmp") || fs::is_empty(repo / ".kernhub/tmp")));

    const auto before = tree_state(s.root);
    auto again = kernhub::cacheadmin::import_cache(s.root, s.tar);
    CHECK(again.blobs + again.links + again.refs + again.side_files == 0);
    CHECK(again.skipped == 7);
    CHECK(tree_state(s.root) == before);
}

TEST_CASE("import refuses anything outside the cache layout and leaves the cache as it was", "[archive]") {
    ValidCache valid;
    const std::string f = valid.folder;
    const std::string other_blob = kernhub::digest::sha256_hex("other");
    struct Case {
        const char* what;
        std::function<void(TarBuilder&)> add;
        std::vector<std::string> names;
    };
    const std::vector<Case> cases = {
        {"absolute path",
         [](TarBuilder& t) { t.file("/etc/kernhub-import", "x"); },
         {"/etc/kernhub-import", "absolute"}},
        {"'..'", [&](TarBuilder& t) { t.file(f + "/blobs/../../escape", "x"); }, {"escape", "'..'"}},
        {"symlink to /etc/passwd",
         [&](TarBuilder& t) { t.symlink(valid.snap + "/build/native-cpu/passwd", "/etc/passwd"); },
         {"passwd", "leads out of the archive"}},
        {"symlink leaving the repo",
         [&](TarBuilder& t) {
             t.symlink(valid.snap + "/build/native-cpu/x",
                       "../../../../../kernels--kh-test--other/blobs/" + other_blob);
         },
         {"native-cpu/x", "blobs/ of its own repo folder"}},
        {"symlink outside snapshots/",
         [&](TarBuilder& t) { t.symlink(f + "/refs/v2", "main"); },
         {"refs/v2", "only under snapshots"}},
        {"hard link",
         [&](TarBuilder& t) { t.hardlink(f + "/blobs/" + other_blob, f + "/blobs/" + valid.so_etag); },
         {other_blob, "hard link"}},
        {"device", [&](TarBuilder& t) { t.special(f + "/blobs/" + other_blob, AE_IFCHR); }, {"character device"}},
        {"fifo", [&](TarBuilder& t) { t.special(f + "/refs/pipe", AE_IFIFO); }, {"refs/pipe", "FIFO"}},
        {"oversized blob",
         [&](TarBuilder& t) { t.header_only(f + "/blobs/" + other_blob, 17ull << 30); },
         {other_blob, "max_entry_bytes", "16 GiB"}},
        {"oversized ref",
         [&](TarBuilder& t) { t.file(f + "/refs/big", std::string(5000, 'a')); },
         {"refs/big", "max_ref_bytes"}},
        {"long path",
         [&](TarBuilder& t) {
             std::string path = f + "/refs";
             for (int i = 0; i < 6; ++i) path += "/" + std::string(200, 'r');
             t.file(path, valid.commit);
         },
         {"max_path_bytes", "1024"}},
        {"blob not matching its SHA-256 name",
         [&](TarBuilder& t) { t.file(f + "/blobs/" + other_blob, "not other"); },
         {other_blob, "does not match its name"}},
        {"blob not matching its git blob id",
         [&](TarBuilder& t) { t.file(f + "/blobs/" + git_blob_id("a"), "b"); },
         {git_blob_id("a"), "does not match its name", git_blob_id("b")}},
        {"blob with a name that is no digest",
         [&](TarBuilder& t) { t.file(f + "/blobs/notahash", "x"); },
         {"notahash", "lowercase hex digest"}},
        {"unknown top-level file",
         [](TarBuilder& t) { t.file("README", "hi"); },
         {"README", "outside any repo folder"}},
        {".locks",
         [&](TarBuilder& t) { t.file(".locks/" + f + "/x.lock", ""); },
         {".locks", "outside any repo folder"}},
        {"not a kernhub repo folder", [](TarBuilder& t) { t.dir("datasets--a--b"); }, {"datasets--a--b"}},
        {".kernhub/tmp",
         [&](TarBuilder& t) { t.file(f + "/.kernhub/tmp/.x.tmp", ""); },
         {"not part of the cache layout"}},
        {"file under snapshots/",
         [&](TarBuilder& t) { t.file(valid.snap + "/build/native-cpu/plain", "x"); },
         {"native-cpu/plain", "only links into blobs/"}},
        {"link to a blob nobody has",
         [&](TarBuilder& t) { t.symlink(valid.snap + "/build/native-cpu/gone", "../../../../blobs/" + other_blob); },
         {"native-cpu/gone", "neither the archive nor the cache"}},
        {"ref to a commit nobody has",
         [&](TarBuilder& t) { t.file(f + "/refs/v4", std::string(40, 'e')); },
         {"refs/v4", "neither the archive nor the cache"}},
        {"ref without a commit",
         [&](TarBuilder& t) { t.file(f + "/refs/v3", "not a commit"); },
         {"refs/v3", "commit id"}},
        {"a listing that is not JSON",
         [&](TarBuilder& t) { t.file(f + "/trees/" + valid.commit.substr(0, 39) + "f.json", "{"); },
         {"/trees/", "not JSON"}},
    };
    // A cache that already holds something, to show it is left alone. Catch
    // runs this body once per section: the import (which fsyncs) runs once,
    // and each case gets a copy.
    static const Scratch filled;
    static const bool imported = [&] {
        {
            TarBuilder tar(filled.tar);
            valid.add_to(tar);
        }
        kernhub::cacheadmin::import_cache(filled.root, filled.tar);
        return true;
    }();
    REQUIRE(imported);
    for (const auto& c : cases) {
        DYNAMIC_SECTION(c.what) {
            Scratch s;
            fs::copy(filled.root, s.root, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
            const auto before = tree_state(s.root);
            REQUIRE(before == tree_state(filled.root));
            {
                TarBuilder tar(s.tar);  // plain, so a header_only() entry really ends the file there
                valid.add_to(tar);
                c.add(tar);
            }
            std::string message;
            ErrorCode code = ErrorCode::ok;
            try {
                kernhub::cacheadmin::import_cache(s.root, s.tar);
            } catch (const Error& e) {
                code = e.code();
                message = e.what();
            }
            INFO(message);
            CHECK(code == ErrorCode::verification);
            for (const auto& name : c.names) {
                INFO("expected in the message: " << name);
                CHECK(message.find(name) != std::string::npos);
            }
            CHECK(tree_state(s.root) == before);
            CHECK(!leftovers_in(s.root));
        }
    }
}

TEST_CASE("import refuses a commit's file that differs from what the cache holds, and never takes kernhub's side data",
          "[archive]") {
    Scratch s;
    ValidCache valid;
    {
        TarBuilder tar(s.tar);
        valid.add_to(tar);
    }
    kernhub::cacheadmin::import_cache(s.root, s.tar);
    const fs::path repo = s.root / valid.folder;
    // kernhub's listing copy and variant record came in the archive, but
    // the cache holds neither: they are this cache's own trust.
    CHECK_FALSE(fs::exists(repo / ".kernhub/trees"));
    CHECK_FALSE(fs::exists(repo / ".kernhub/variants"));

    // A second archive claims other bytes for the same commit's lib.so: a
    // blob that matches its own name, and a link to it.
    const std::string evil =
        "\x7f"
        "ELF other code";
    const std::string evil_etag = kernhub::digest::sha256_hex(evil);
    Scratch second;
    {
        TarBuilder tar(second.tar);
        tar.file(valid.folder + "/blobs/" + evil_etag, evil);
        tar.symlink(valid.snap + "/build/native-cpu/lib.so", "../../../../blobs/" + evil_etag);
    }
    const auto before = tree_state(s.root);
    std::string message;
    try {
        kernhub::cacheadmin::import_cache(s.root, second.tar);
    } catch (const Error& e) {
        CHECK(e.code() == ErrorCode::verification);
        message = e.what();
    }
    INFO(message);
    CHECK(message.find("native-cpu/lib.so") != std::string::npos);
    CHECK(message.find("differs from the file the cache already holds") != std::string::npos);
    CHECK(tree_state(s.root) == before);
    CHECK(!leftovers_in(s.root));
}

TEST_CASE("a refused import into a missing cache leaves no cache behind", "[archive]") {
    Scratch s;
    TarBuilder(s.tar).file("README", "x").finish();
    CHECK_THROWS_AS(kernhub::cacheadmin::import_cache(s.root, s.tar), Error);
    CHECK(!fs::exists(s.root));
}

TEST_CASE("import refuses huggingface_hub's listing of a commit when it disagrees with the archive's snapshot",
          "[archive]") {
    ValidCache valid;
    const auto listing = [&](const nlohmann::json& files) {
        return nlohmann::json{{"format_version", 1}, {"files", files}}.dump(1);
    };
    const nlohmann::json so = {{"size", valid.so.size()},
                               {"blob_id", std::string(40, 'a')},
                               {"lfs_sha256", valid.so_etag},
                               {"lfs_size", valid.so.size()}};
    const nlohmann::json meta = {{"size", valid.meta.size()}, {"blob_id", valid.meta_etag}};
    const std::string lib = "build/native-cpu/lib.so", metadata = "build/native-cpu/metadata.json";
    // What agrees: both links listed as they are, and files of another
    // variant the snapshot does not hold (a fetch takes one variant).
    const std::string agrees =
        listing({{lib, so}, {metadata, meta}, {"build/native-cu128/lib.so", so}, {"README.md", meta}});
    const struct {
        std::string text;
        std::string problem;
    } cases[] = {
        {listing({{lib, so}}), "does not list build/native-cpu/metadata.json, which the snapshot holds"},
        {listing({{lib, so}, {metadata, {{"size", 3}, {"blob_id", valid.meta_etag}}}}), "of 3 bytes"},
        {listing({{lib, {{"size", valid.so.size()}, {"blob_id", std::string(40, 'b')}}}, {metadata, meta}}),
         "as blob '" + std::string(40, 'b') + "'"},
        {listing({{lib, so}, {metadata, meta}, {"build/native-cpu/extra.so", so}}),
         "lists build/native-cpu/extra.so, which the snapshot of that variant lacks"},
        // Two "files": Python's json takes the last, which no check saw.
        {"{\"format_version\": 1, \"files\": " + nlohmann::json{{lib, so}, {metadata, meta}}.dump() +
             ", \"files\": " + nlohmann::json{{lib, so}}.dump() + "}",
         "is not a listing kernhub can read"},
    };
    for (const auto& bad : cases) {
        INFO(bad.problem);
        Scratch s;
        valid.hf_tree = bad.text;
        {
            TarBuilder tar(s.tar);
            valid.add_to(tar);
        }
        std::string message;
        try {
            kernhub::cacheadmin::import_cache(s.root, s.tar);
        } catch (const Error& e) {
            CHECK(e.code() == ErrorCode::verification);
            message = e.what();
        }
        CHECK_THAT(message, Catch::Contains("/trees/" + valid.commit + ".json") && Catch::Contains(bad.problem));
        CHECK_FALSE(fs::exists(s.root / valid.folder / "snapshots"));
    }
    Scratch s;
    valid.hf_tree = agrees;
    {
        TarBuilder tar(s.tar);
        valid.add_to(tar);
    }
    CHECK(kernhub::cacheadmin::import_cache(s.root, s.tar).links == 2);
}

TEST_CASE("a listing in an archive must describe the snapshot the cache already holds for its commit", "[archive]") {
    Scratch s;
    ValidCache valid;
    {
        TarBuilder tar(s.tar);
        valid.add_to(tar);
    }
    kernhub::cacheadmin::import_cache(s.root, s.tar);
    const auto listing = [&](const nlohmann::json& files) {
        return nlohmann::json{{"format_version", 1}, {"files", files}}.dump(1);
    };
    const std::string other =
        "\x7f"
        "ELF other code";
    const std::string other_etag = kernhub::digest::sha256_hex(other);
    const nlohmann::json meta = {{"size", valid.meta.size()}, {"blob_id", valid.meta_etag}};
    const nlohmann::json swapped = {{"size", other.size()},
                                    {"blob_id", std::string(40, 'a')},
                                    {"lfs_sha256", other_etag},
                                    {"lfs_size", other.size()}};
    const struct {
        nlohmann::json files;
        std::string problem;
    } cases[] = {
        // Another blob for lib.so, which the cache links: an offline fetch
        // would follow the listing to the other bytes.
        {{{"build/native-cpu/lib.so", swapped}, {"build/native-cpu/metadata.json", meta}},
         "lists build/native-cpu/lib.so as blob '" + other_etag + "'"},
        // A listing that leaves out a file the cache's snapshot holds.
        {{{"build/native-cpu/lib.so", swapped}}, "which the snapshot holds"},
    };
    for (const auto& bad : cases) {
        INFO(bad.problem);
        Scratch second;
        {
            TarBuilder tar(second.tar);
            tar.file(valid.folder + "/blobs/" + other_etag, other);
            tar.file(valid.folder + "/trees/" + valid.commit + ".json", listing(bad.files));
        }
        const auto before = tree_state(s.root);
        std::string message;
        try {
            kernhub::cacheadmin::import_cache(s.root, second.tar);
        } catch (const Error& e) {
            CHECK(e.code() == ErrorCode::verification);
            message = e.what();
        }
        CHECK_THAT(message, Catch::Contains(bad.problem));
        CHECK(tree_state(s.root) == before);
    }
}
