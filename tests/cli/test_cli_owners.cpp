// One cache, two users: its owner (uid 65534, through setpriv) and root,
// as after one `sudo kernhub fetch` into the owner's cache. What root left
// behind must not stop the owner where nothing of root's needs changing;
// where something does, the error names it, its owner and the chown that
// gives the cache back (docs/cache.md, "Another user's files in your cache").
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli_support.hpp"
#include "support/requirements.hpp"
#include "support/users.hpp"

using namespace kernhub::test;
using namespace kernhub::test::cli;

namespace {

constexpr uid_t k_owner = k_other_uid;

// Who runs a command: the cache's owner, root, or root with umask 077 (its
// new files and folders are then root's alone).
enum class As { owner, root, private_root };

const std::vector<std::string> k_as_owner{"setpriv", "--reuid=" + std::to_string(k_owner),
                                          "--regid=" + std::to_string(k_owner), "--clear-groups"};

// Where TempDir makes its folders.
fs::path temp_base() {
    const char* base = std::getenv("TMPDIR");
    return base != nullptr && *base != '\0' ? base : "/tmp";
}

uid_t owner_of(const fs::path& path) {
    struct stat st {};
    REQUIRE(::lstat(path.c_str(), &st) == 0);
    return st.st_uid;
}

// Files under `dir` (not followed through links) that root owns.
std::size_t owned_by_root(const fs::path& dir) {
    std::size_t n = 0;
    for (const auto& entry : fs::recursive_directory_iterator(dir)) {
        struct stat st {};
        if (::lstat(entry.path().c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == 0) ++n;
    }
    return n;
}

// A sandbox whose cache folder belongs to the owner, with a copy of the CLI
// the owner may run: the build tree may lie in a folder only root enters.
struct SharedCache {
    KernelHub hub;
    Sandbox box;
    fs::path cli = box.dir.path() / "bin" / "kernhub";

    SharedCache() {
        constexpr fs::perms k_public_folder = fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                              fs::perms::others_read | fs::perms::others_exec;
        fs::permissions(box.dir.path(), k_public_folder);
        fs::permissions(box.registry, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                                          fs::perms::others_read);
        fs::create_directories(cli.parent_path());
        fs::permissions(cli.parent_path(), k_public_folder);
        fs::copy_file(KERNHUB_CLI_PATH, cli);
        fs::permissions(cli, k_public_folder);
        fs::create_directories(box.cache);
        for (const fs::path& dir : {box.cache, box.home}) REQUIRE(::chown(dir.c_str(), k_owner, k_owner) == 0);
    }

    // `kernhub fetch REF --registry R --endpoint E --cache-dir C --quiet MORE...`.
    ProcessResult fetch(As who, const std::string& ref, const std::vector<std::string>& more = {}) {
        std::vector<std::string> argv;
        if (who == As::owner) argv = k_as_owner;
        if (who == As::private_root) argv = {"/bin/sh", "-c", "umask 077 && exec \"$@\"", "sh"};
        for (const std::string& arg : {cli.string(), std::string("fetch"), ref, std::string("--registry"),
                                       box.registry.string(), std::string("--endpoint"), hub.server().endpoint(),
                                       std::string("--cache-dir"), box.cache.string(), std::string("--quiet")}) {
            argv.push_back(arg);
        }
        argv.insert(argv.end(), more.begin(), more.end());
        return run_process(argv, box.env(), box.dir.path().string());
    }

    ProcessResult owner_cache(const std::string& sub) {
        std::vector<std::string> argv = k_as_owner;
        for (const std::string& arg : {cli.string(), std::string("cache"), sub, std::string("--cache-dir"),
                                       box.cache.string(), std::string("--quiet")}) {
            argv.push_back(arg);
        }
        return run_process(argv, box.env({{"KERNHUB_ENDPOINT", k_dead_endpoint}}), box.dir.path().string());
    }
};

// The command an error message offers after "run: ", run as root (who
// needs no sudo): proof that it is the right one.
void run_suggested(const ProcessResult& failed) {
    const std::size_t at = failed.err.find("run: sudo ");
    REQUIRE(at != std::string::npos);
    std::string command = failed.err.substr(at + std::string("run: sudo ").size());
    command.erase(command.find_last_not_of('\n') + 1);
    INFO(command);
    const ProcessResult r = run_process({"/bin/sh", "-c", command});
    INFO(describe(r));
    REQUIRE(r.exit_code == 0);
}

}  // namespace

// Switching to another user takes root and setpriv; that user must reach
// the test's temp folder.
KERNHUB_TEST_REQUIREMENT("needs:other-user", []() -> std::string {
    if (::geteuid() != 0) return "not run as root, so no process of another user can be started";
    std::vector<std::string> argv = k_as_owner;
    argv.insert(argv.end(), {"test", "-x", temp_base().string()});
    try {
        if (run_process(argv).exit_code != 0) {
            return "uid " + std::to_string(k_owner) + " cannot enter " + temp_base().string();
        }
    } catch (const std::exception&) {
        return "setpriv is not installed (util-linux)";
    }
    return "";
});

TEST_CASE("after root fetched into the owner's cache, the owner's fetches, verify and prune still work",
          "[cli][needs:other-user]") {
    SharedCache shared;
    ProcessResult r = shared.fetch(As::owner, "vector-add");
    INFO(describe(r));
    REQUIRE(r.exit_code == 0);
    // Root adds a revision of the owner's repo (new blobs, lock files, a
    // snapshot and a ref of root's among the owner's) and a repo of its own
    // (a repo folder and a folder of locks that are root's).
    for (const char* name : {"vector-add-v2", "vector-add", "model-kernel"}) {
        r = shared.fetch(As::root, name);
        INFO(describe(r));
        REQUIRE(r.exit_code == 0);
    }
    REQUIRE(owned_by_root(shared.box.cache / ".locks" / k_vector_add_folder) > 0);

    for (const char* name : {"vector-add", "vector-add-v2", "model-kernel"}) {
        r = shared.fetch(As::owner, name);
        INFO(name << "\n" << describe(r));
        CHECK(r.exit_code == 0);
    }
    for (const char* sub : {"verify", "prune"}) {
        r = shared.owner_cache(sub);
        INFO(sub << "\n" << describe(r));
        CHECK(r.exit_code == 0);
    }

    // A blob of root's in the owner's blobs/ that grew a byte (the warm
    // check compares sizes): the owner's fetch replaces it under root's lock
    // file, which it may only read.
    const fs::path repo = shared.box.cache / k_vector_add_folder;
    const std::string v2 = read_text(repo / "refs" / "v2");
    const fs::path notes = repo / "snapshots" / v2 / "build" / host_cpu_variant() / "NOTES.txt";
    const fs::path blob = (notes.parent_path() / fs::read_symlink(notes)).lexically_normal();
    const fs::path lock = shared.box.cache / ".locks" / k_vector_add_folder / (blob.filename().string() + ".lock");
    REQUIRE(owner_of(blob) == 0);
    REQUIRE(owner_of(lock) == 0);
    const std::string text = read_text(blob);
    fs::permissions(blob, fs::perms::owner_write, fs::perm_options::add);
    std::ofstream(blob, std::ios::binary | std::ios::app) << 'x';
    r = shared.fetch(As::owner, "vector-add-v2");
    INFO(describe(r));
    CHECK(r.exit_code == 0);
    CHECK(read_text(blob) == text);
    CHECK(owner_of(blob) == k_owner);
}

TEST_CASE("a fetch that must write into root's folders exits 1 naming the folder, root and the chown to run",
          "[cli][needs:other-user]") {
    SharedCache shared;
    const std::string owner = login_name(k_owner);
    const std::string chown = "run: sudo chown -R " + owner + " " + shared.box.cache.string();
    // The owner's first fetch makes .locks; root's, of another repo, makes
    // that repo's folder, its blobs/ and its folder of locks.
    ProcessResult r = shared.fetch(As::owner, "model-kernel");
    INFO(describe(r));
    REQUIRE(r.exit_code == 0);
    r = shared.fetch(As::root, "vector-add");
    INFO(describe(r));
    REQUIRE(r.exit_code == 0);

    // The first thing the owner's fetch of another variant needs is the
    // lock of a blob root never locked, in root's folder of locks.
    const fs::path locks = shared.box.cache / ".locks" / k_vector_add_folder;
    const std::vector<std::string> other_variant{"--target", "native-cpu-aarch64-linux"};
    r = shared.fetch(As::owner, "vector-add", other_variant);
    check_error(r, 1,
                {"cannot lock " + locks.string() + "/", "Permission denied",
                 locks.string() + " is owned by root, not " + owner, chown});

    // With that folder its own, the owner's fetch must put the new blob into
    // root's blobs/.
    REQUIRE(::chown(locks.c_str(), k_owner, k_owner) == 0);
    const fs::path blobs = shared.box.cache / k_vector_add_folder / "blobs";
    r = shared.fetch(As::owner, "vector-add", other_variant);
    check_error(r, 1,
                {"cannot write " + blobs.string() + "/", blobs.string() + " is owned by root, not " + owner, chown});

    // The command offered gives the cache back: the same fetch then works.
    run_suggested(r);
    r = shared.fetch(As::owner, "vector-add", other_variant);
    INFO(describe(r));
    CHECK(r.exit_code == 0);
}

TEST_CASE("after root fetched with umask 077, what the owner may not read is named with its owner and the chown",
          "[cli][needs:other-user]") {
    SharedCache shared;
    const std::string owner = login_name(k_owner);
    const std::string chown = "run: sudo chown -R " + owner + " " + shared.box.cache.string();
    ProcessResult r = shared.fetch(As::owner, "vector-add");
    INFO(describe(r));
    REQUIRE(r.exit_code == 0);
    r = shared.fetch(As::private_root, "vector-add-v2");
    INFO(describe(r));
    REQUIRE(r.exit_code == 0);

    // What the owner fetched is still the owner's.
    r = shared.fetch(As::owner, "vector-add");
    INFO(describe(r));
    CHECK(r.exit_code == 0);
    // Root's lock files of the new blobs are 0600: not even a read-only
    // descriptor can lock them.
    r = shared.fetch(As::owner, "vector-add-v2");
    check_error(r, 1,
                {"cannot lock " + (shared.box.cache / ".locks" / k_vector_add_folder).string() + "/",
                 ".lock is owned by root, not " + owner, chown});
    // verify cannot read root's snapshot folder (0700).
    r = shared.owner_cache("verify");
    check_error(r, 1,
                {"cannot read the folder " + (shared.box.cache / k_vector_add_folder / "snapshots").string(),
                 "is owned by root, not " + owner, chown});

    run_suggested(r);
    r = shared.fetch(As::owner, "vector-add-v2");
    INFO(describe(r));
    CHECK(r.exit_code == 0);
    r = shared.owner_cache("verify");
    INFO(describe(r));
    CHECK(r.exit_code == 0);
}

TEST_CASE("an import into a cache root owned by root exits 1 naming root as its owner", "[cli][needs:other-user]") {
    SharedCache shared;
    ProcessResult r = shared.fetch(As::owner, "vector-add");
    REQUIRE(r.exit_code == 0);
    const fs::path archive = shared.box.dir.path() / "cache.tar";
    r = run_process({shared.cli.string(), "cache", "export", "--to", archive.string(), "--cache-dir",
                     shared.box.cache.string(), "--quiet"},
                    shared.box.env(), shared.box.dir.path().string());
    INFO(describe(r));
    REQUIRE(r.exit_code == 0);
    REQUIRE(::chmod(archive.c_str(), 0644) == 0);
    const fs::path root_cache = shared.box.dir.path() / "root-cache";
    fs::create_directories(root_cache);  // root's, 0755
    std::vector<std::string> argv = k_as_owner;
    for (const std::string& arg : {shared.cli.string(), std::string("cache"), std::string("import"), archive.string(),
                                   std::string("--cache-dir"), root_cache.string()}) {
        argv.push_back(arg);
    }
    r = run_process(argv, shared.box.env(), shared.box.dir.path().string());
    check_error(r, 1,
                {"cannot unpack " + archive.string(), "Permission denied",
                 root_cache.string() + " is owned by root, not " + login_name(k_owner)});
    CHECK(fs::is_empty(root_cache));
}
