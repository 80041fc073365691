// The mirror module on its own: the static hub tree it writes from blobs,
// adding to an existing tree, and the nginx configuration generated from a
// tree (docs/ci-images.md, "How a mirror tree is written").
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cache/place_file.hpp"
#include "digest/digest.hpp"
#include "kernhub/error.hpp"
#include "mirror/mirror.hpp"
#include "mirror/serve_support.hpp"
#include "support/process.hpp"
#include "support/requirements.hpp"
#include "support/slurp.hpp"
#include "support/temp_dir.hpp"

using namespace kernhub;
using namespace kernhub::test;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const std::string k_commit_a(40, 'a');
const std::string k_commit_b(40, 'b');
const hub::RepoRef k_repo{RepoType::kernel, "org/kern"};
const hub::RepoRef k_model{RepoType::model, "org/model"};

std::string file_text(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return kernhub::test::read_all(in);
}

json read_json(const fs::path& path) {
    return json::parse(file_text(path));
}

// A "blob" holding `text`, and its listing entry at `path` (LFS or plain, as
// the hub would list it).
mirror::MirrorFile blob(const fs::path& dir, const std::string& path, const std::string& text, bool lfs) {
    const fs::path source = dir / ("blob-" + digest::sha256_hex(path + text));
    std::ofstream(source, std::ios::binary) << text;
    mirror::MirrorFile file;
    file.source = source;
    file.entry.path = path;
    file.entry.is_file = true;
    file.entry.size = text.size();
    file.entry.oid = digest::git_blob_sha1_file_hex(source);
    if (lfs) file.entry.lfs_sha256 = digest::sha256_file_hex(source);
    return file;
}

std::vector<std::string> listed_paths(const fs::path& listing) {
    std::vector<std::string> paths;
    for (const auto& item : read_json(listing)) paths.push_back(item.at("path"));
    return paths;
}

bool same_inode(const fs::path& a, const fs::path& b) {
    struct stat sa {
    }, sb{};
    return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

// A second filesystem to copy across: /dev/shm is a tmpfs on Linux hosts.
const fs::path k_other_fs = "/dev/shm";

std::string why_no_second_filesystem() {
    TempDir probe;
    struct stat here {};
    struct stat there {};
    if (::stat(probe.path().c_str(), &here) != 0 || ::stat(k_other_fs.c_str(), &there) != 0 ||
        here.st_dev == there.st_dev || ::access(k_other_fs.c_str(), W_OK) != 0) {
        return k_other_fs.string() + " is not a writable filesystem other than the temp dir's";
    }
    return {};
}

KERNHUB_TEST_REQUIREMENT("needs:second-filesystem", why_no_second_filesystem);

}  // namespace

TEST_CASE("a hub tree holds the Hubs layout, its files hard-linked from the blobs", "[mirror]") {
    TempDir dir;
    const fs::path root = dir.path() / "tree";
    std::vector<mirror::MirrorFile> files = {
        blob(dir.path(), "build/native-cpu-x86_64-linux/libk.so", "shared object bytes", true),
        blob(dir.path(), "build/native-cpu-x86_64-linux/metadata.json", "{\"digest\":{}}", false),
    };
    mirror::HubTree tree(root);
    mirror::PlaceCounts placed = tree.add_files(k_repo, k_commit_a, files);
    tree.set_revision(k_repo, "main", k_commit_a);
    CHECK(placed.linked == 2);
    CHECK(placed.copied == 0);

    const fs::path api = root / "api/kernels/org/kern";
    for (const auto& file : files) {
        const fs::path served = root / "kernels/org/kern/resolve" / k_commit_a / file.entry.path;
        CHECK(file_text(served) == file_text(file.source));
        CHECK(same_inode(served, file.source));
    }
    json listing = read_json(api / "tree" / k_commit_a / "build");
    REQUIRE(listing.size() == 2);
    CHECK(listing[0]["path"] == "build/native-cpu-x86_64-linux/libk.so");
    CHECK(listing[0]["type"] == "file");
    CHECK(listing[0]["oid"] == files[0].entry.oid);
    CHECK(listing[0]["lfs"]["oid"] == files[0].entry.lfs_sha256);
    // The pointer file git would hold: "version ...\noid sha256:<64>\nsize 19\n".
    CHECK(listing[0]["lfs"]["pointerSize"] == 127);
    CHECK_FALSE(listing[1].contains("lfs"));
    CHECK(read_json(api / "tree" / (k_commit_a + ".json")) == listing);

    json revision = read_json(api / "revision/main");
    CHECK(revision["id"] == "org/kern");
    CHECK(revision["sha"] == k_commit_a);
    CHECK(revision["siblings"].size() == 2);
    CHECK(read_json(api / "revision" / k_commit_a)["sha"] == k_commit_a);
    json refs = read_json(api / "refs");
    REQUIRE(refs["branches"].size() == 1);
    CHECK(refs["branches"][0]["name"] == "main");
    CHECK(refs["branches"][0]["targetCommit"] == k_commit_a);
    // Nothing is left under a temp name.
    CHECK(fs::is_empty(root / ".kernhub-tmp"));
}

TEST_CASE("adding to a tree keeps other repos, commits and files, and moves a revision to its new commit", "[mirror]") {
    TempDir dir;
    const fs::path root = dir.path() / "tree";
    const auto cpu = blob(dir.path(), "build/native-cpu-x86_64-linux/libk.so", "cpu", true);
    const auto cuda = blob(dir.path(), "build/native-cu128-x86_64-linux/libk.so", "cuda", true);
    const auto newer = blob(dir.path(), "build/native-cpu-x86_64-linux/libk.so", "cpu, newer", true);
    const auto model = blob(dir.path(), "build/native-cpu-x86_64-linux/model.bin", "weights", true);
    {
        mirror::HubTree tree(root);
        tree.add_files(k_repo, k_commit_a, {cpu});
        tree.set_revision(k_repo, "main", k_commit_a);
        tree.set_revision(k_repo, "v1", k_commit_a);
    }
    mirror::HubTree tree(root);
    tree.add_files(k_repo, k_commit_a, {cuda});  // a second variant of the same commit
    tree.add_files(k_repo, k_commit_b, {newer});
    tree.set_revision(k_repo, "main", k_commit_b);
    tree.add_files(k_model, k_commit_a, {model});
    tree.set_revision(k_model, "main", k_commit_a);

    const fs::path api = root / "api/kernels/org/kern";
    CHECK(listed_paths(api / "tree" / k_commit_a / "build") ==
          std::vector<std::string>{cpu.entry.path, cuda.entry.path});
    CHECK(read_json(api / "revision/v1")["siblings"].size() == 2);  // v1 names commit a, which grew
    CHECK(read_json(api / "revision/main")["sha"] == k_commit_b);
    CHECK(read_json(api / "revision" / k_commit_a)["sha"] == k_commit_a);
    json refs = read_json(api / "refs");
    REQUIRE(refs["branches"].size() == 2);
    CHECK(refs["branches"][0]["name"] == "main");
    CHECK(refs["branches"][0]["targetCommit"] == k_commit_b);
    CHECK(refs["branches"][1]["targetCommit"] == k_commit_a);
    CHECK(file_text(root / "kernels/org/kern/resolve" / k_commit_a / cpu.entry.path) == "cpu");
    CHECK(file_text(root / "kernels/org/kern/resolve" / k_commit_b / newer.entry.path) == "cpu, newer");
    // Model repos resolve without the kernels/ prefix.
    CHECK(file_text(root / "org/model/resolve" / k_commit_a / model.entry.path) == "weights");
    CHECK(read_json(root / "api/models/org/model/revision/main")["sha"] == k_commit_a);

    SECTION("a tag keeps being a tag") {
        json tagged = {{"branches", json::array()},
                       {"tags", {{{"name", "v1"}, {"ref", "refs/tags/v1"}, {"targetCommit", k_commit_a}}}},
                       {"converts", json::array()}};
        std::ofstream(api / "refs") << tagged.dump();
        tree.set_revision(k_repo, "v1", k_commit_b);
        json after = read_json(api / "refs");
        CHECK(after["branches"].empty());
        CHECK(after["tags"][0]["targetCommit"] == k_commit_b);
    }
}

TEST_CASE("revisions 'a/b' and 'a' in one tree are refused with exit 2 naming the clash, in either order", "[mirror]") {
    for (const auto& [first, second] : {std::pair<std::string, std::string>{"a/b", "a"}, {"a", "a/b"}}) {
        INFO(first << " then " << second);
        TempDir dir;
        const fs::path root = dir.path() / "tree";
        const auto cpu = blob(dir.path(), "build/native-cpu-x86_64-linux/libk.so", "cpu", true);
        mirror::HubTree tree(root);
        tree.add_files(k_repo, k_commit_a, {cpu});
        tree.set_revision(k_repo, first, k_commit_a);
        const fs::path revisions = root / "api/kernels/org/kern/revision";
        const std::string before = file_text(revisions / first);
        try {
            tree.set_revision(k_repo, second, k_commit_a);
            FAIL("both revisions were written");
        } catch (const kernhub::Error& e) {
            CHECK(e.code() == kernhub::ErrorCode::usage);
            CHECK_THAT(e.what(), Catch::Contains("revision 'a'") && Catch::Contains("separate trees"));
        }
        // The first is kept as it was, and the refs name only it.
        CHECK(file_text(revisions / first) == before);
        CHECK(read_json(root / "api/kernels/org/kern/refs")["branches"].size() == 1);
        // Another revision under the same folder is fine.
        if (first == "a/b") CHECK_NOTHROW(tree.set_revision(k_repo, "a/c", k_commit_a));
    }
}

TEST_CASE("a tree file is left alone when it holds the right bytes and replaced when not", "[mirror]") {
    TempDir dir;
    const fs::path root = dir.path() / "tree";
    const auto file = blob(dir.path(), "build/v/libk.so", "right bytes", true);
    const fs::path served = root / "kernels/org/kern/resolve" / k_commit_a / file.entry.path;
    mirror::HubTree tree(root);
    CHECK(tree.add_files(k_repo, k_commit_a, {file}).linked == 1);
    CHECK(tree.add_files(k_repo, k_commit_a, {file}).unchanged == 1);

    // A copy with the same bytes (another inode) is recognised by its hash.
    fs::remove(served);
    std::ofstream(served, std::ios::binary) << "right bytes";
    CHECK(tree.add_files(k_repo, k_commit_a, {file}).unchanged == 1);

    fs::remove(served);
    std::ofstream(served, std::ios::binary) << "wrong bytes";
    CHECK(tree.add_files(k_repo, k_commit_a, {file}).linked == 1);
    CHECK(file_text(served) == "right bytes");
    CHECK(same_inode(served, file.source));
}

TEST_CASE("a tree on another filesystem gets read-only copies", "[mirror][needs:second-filesystem]") {
    TempDir dir;
    const auto file = blob(dir.path(), "build/v/libk.so", "bytes to copy", true);
    const fs::path other = k_other_fs / ("kernhub-mirror-test-" + std::to_string(::getpid()));
    struct Cleanup {
        fs::path path;
        ~Cleanup() {
            std::error_code ec;
            fs::permissions(path, fs::perms::owner_all, fs::perm_options::add, ec);
            fs::remove_all(path, ec);
        }
    } cleanup{other};
    const fs::path target = other / "tree/file";
    CHECK(cache::place_file(file.source, target, other / "tmp") == cache::Placed::copied);
    CHECK(file_text(target) == "bytes to copy");
    CHECK_FALSE(same_inode(target, file.source));
    CHECK((fs::status(target).permissions() & fs::perms::all) ==
          (fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read));
    CHECK(fs::is_empty(other / "tmp"));

    mirror::HubTree tree(other / "hub");
    mirror::PlaceCounts placed = tree.add_files(k_repo, k_commit_a, {file});
    CHECK(placed.copied == 1);
    CHECK(placed.linked == 0);
}

TEST_CASE("the nginx configuration maps revisions onto commits and gives every file its hub headers", "[mirror]") {
    TempDir dir;
    const fs::path root = dir.path() / "tree";
    const auto so = blob(dir.path(), "build/v/libk.so", "so", true);
    const auto meta = blob(dir.path(), "build/v/meta \"odd\".json", "{}", false);
    mirror::HubTree tree(root);
    tree.add_files(k_repo, k_commit_a, {so, meta});
    tree.set_revision(k_repo, "main", k_commit_a);
    tree.set_revision(k_repo, "release/2", k_commit_a);

    const std::string conf = mirror::nginx_conf(root, "127.0.0.1:8123");
    auto has = [&](const std::string& text) {
        INFO("looking for: " << text << "\nin:\n" << conf);
        CHECK(conf.find(text) != std::string::npos);
    };
    auto count = [&](const std::string& text) {
        std::size_t n = 0;
        for (auto at = conf.find(text); at != std::string::npos; at = conf.find(text, at + 1)) ++n;
        return n;
    };
    CHECK(count("server {") == 1);
    has("listen 127.0.0.1:8123;");
    has("root \"" + root.string() + "\";");
    has("etag off;");
    has("location = \"/kernels/org/kern/resolve/" + k_commit_a + "/build/v/libk.so\" {");
    has("add_header ETag '\"" + so.entry.lfs_sha256 + "\"';");
    has("add_header X-Linked-Etag '\"" + meta.entry.oid + "\"';");
    has("add_header X-Linked-Size " + std::to_string(so.entry.size) + ";");
    has("add_header X-Repo-Commit " + k_commit_a + ";");
    // A quote in a file name is escaped, not a syntax error.
    has("location = \"/kernels/org/kern/resolve/" + k_commit_a + "/build/v/meta \\\"odd\\\".json\" {");
    // Revision names, one path segment or more, become the commit.
    has("location ^~ \"/kernels/org/kern/resolve/main/\" {\n        rewrite \"^/(?:[^/]+/){5}(.*)$\" "
        "/kernels/org/kern/resolve/" +
        k_commit_a + "/$1 last;");
    has("location ^~ \"/kernels/org/kern/resolve/release/2/\" {\n        rewrite \"^/(?:[^/]+/){6}(.*)$\"");
    // huggingface_hub's tree/<commit> is the tree's <commit>.json.
    has("rewrite \"^(.*/tree/([0-9a-f]{40}|[0-9a-f]{64}))$\" $1.json break;");
    // The same tree gives the same configuration.
    CHECK(mirror::nginx_conf(root, "127.0.0.1:8123") == conf);

    SECTION("bad --listen values and an empty tree are usage errors") {
        for (const char* bad : {"", "8080x", "host:", ":80", "1.2.3.4:99999", "a b:80", "127.0.0.1:0"}) {
            INFO(bad);
            CHECK_THROWS_AS(mirror::check_listen(bad), Error);
        }
        for (const char* good : {"8080", "127.0.0.1:8080", "[::1]:8080", "*:80", "mirror.example:443"}) {
            INFO(good);
            CHECK_NOTHROW(mirror::check_listen(good));
        }
        fs::create_directories(dir.path() / "empty");
        try {
            mirror::nginx_conf(dir.path() / "empty", "8080");
            FAIL("an empty tree was accepted");
        } catch (const Error& e) {
            CHECK(e.code() == ErrorCode::usage);
            CHECK(std::string(e.what()).find("mirror kernels into it first (Client::mirror)") != std::string::npos);
        }
    }
    SECTION("a damaged revision document is named") {
        std::ofstream(root / "api/kernels/org/kern/revision/main") << "not json";
        try {
            mirror::nginx_conf(root, "8080");
            FAIL("a damaged revision document was accepted");
        } catch (const Error& e) {
            CHECK(e.code() == ErrorCode::verification);
            CHECK(std::string(e.what()).find("revision/main") != std::string::npos);
        }
    }
}

TEST_CASE("nginx accepts the generated configuration", "[mirror][nginx][needs:nginx]") {
    TempDir dir;
    const fs::path root = dir.path() / "tree with space";
    mirror::HubTree tree(root);
    tree.add_files(k_repo, k_commit_a, {blob(dir.path(), "build/v/a;b{c}$d.so", "x", true)});
    tree.set_revision(k_repo, "main", k_commit_a);
    tree.add_files(k_model, k_commit_b, {blob(dir.path(), "build/v/model.bin", "y", true)});
    tree.set_revision(k_model, "v1", k_commit_b);
    const fs::path conf = dir.path() / "mirror.conf";
    std::ofstream(conf) << mirror::nginx_conf(root, "127.0.0.1:" + std::to_string(test::serve::free_port()));
    const fs::path main = dir.path() / "nginx.conf";
    std::ofstream(main) << "pid " << (dir.path() / "nginx.pid").string() << ";\nerror_log "
                        << (dir.path() / "error.log").string() << ";\nevents {}\nhttp {\n  include " << conf.string()
                        << ";\n}\n";
    ProcessResult check =
        run_process({test::serve::find_nginx().string(), "-t", "-c", main.string(), "-p", dir.path().string()});
    INFO(check.err);
    CHECK(check.exit_code == 0);
}

TEST_CASE("a killed run's temporaries go before anything else, and a finished run leaves no staging folder",
          "[mirror]") {
    TempDir dir;
    const fs::path root = dir.path() / "tree";
    // What a mirror killed while placing a file leaves inside the tree.
    fs::create_directories(root / ".kernhub-tmp");
    std::ofstream(root / ".kernhub-tmp" / ".place.Ab12Cd.tmp") << std::string(4096, 'x');
    {
        mirror::HubTree tree(root);
        CHECK_FALSE(fs::exists(root / ".kernhub-tmp" / ".place.Ab12Cd.tmp"));
        std::vector<mirror::MirrorFile> files = {
            blob(dir.path(), "build/native-cpu-x86_64-linux/libk.so", "shared object bytes", true)};
        tree.add_files(k_repo, k_commit_a, files);
        tree.set_revision(k_repo, "main", k_commit_a);
    }
    // Served or uploaded as is, the tree holds no temporary and no staging folder.
    CHECK_FALSE(fs::exists(root / ".kernhub-tmp"));
    for (const auto& entry : fs::recursive_directory_iterator(root)) {
        INFO(entry.path());
        CHECK(entry.path().filename().string().find(".tmp") == std::string::npos);
    }
}
