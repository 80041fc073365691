// cache::refusal_advice, the next step a refusal by permissions gets in the
// store's errors: worked out by a process of another user (a forked child
// switched to k_other_uid) over entries root owns, and by root over
// entries that user owns.
#include <grp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "cache/cache.hpp"
#include "support/process.hpp"
#include "support/requirements.hpp"
#include "support/temp_dir.hpp"
#include "support/users.hpp"

namespace fs = std::filesystem;
using kernhub::cache::refusal_advice;
using kernhub::test::k_other_uid;
using kernhub::test::login_name;
using kernhub::test::TempDir;

namespace {

constexpr const char* k_advice = "check permissions and free space";

// refusal_advice(path, err, k_advice) for each path, worked out by a child
// process that runs as k_other_uid. The test process has no other thread,
// so the child may allocate before it exits.
std::vector<std::string> advice_of_other_user(const std::vector<fs::path>& paths, int err) {
    kernhub::test::Pipe pipe = kernhub::test::make_pipe();
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        if (::setgroups(0, nullptr) != 0 || ::setresgid(k_other_uid, k_other_uid, k_other_uid) != 0 ||
            ::setresuid(k_other_uid, k_other_uid, k_other_uid) != 0) {
            ::_exit(2);
        }
        std::string out;
        for (const fs::path& path : paths) out += refusal_advice(path, err, k_advice) + "\n";
        const char* data = out.data();
        std::size_t left = out.size();
        while (left > 0) {
            const ssize_t n = ::write(pipe.write.get(), data, left);
            if (n <= 0) ::_exit(3);
            data += n;
            left -= static_cast<std::size_t>(n);
        }
        ::_exit(0);
    }
    pipe.write.reset();
    std::string text;
    std::array<char, 4096> buffer{};
    for (;;) {
        const ssize_t n = ::read(pipe.read.get(), buffer.data(), buffer.size());
        if (n < 0 && errno == EINTR) continue;
        REQUIRE(n >= 0);
        if (n == 0) break;
        text.append(buffer.data(), static_cast<std::size_t>(n));
    }
    REQUIRE(kernhub::test::wait_process(pid) == 0);
    std::vector<std::string> lines;
    for (std::size_t start = 0, end; (end = text.find('\n', start)) != std::string::npos; start = end + 1) {
        lines.push_back(text.substr(start, end - start));
    }
    REQUIRE(lines.size() == paths.size());
    return lines;
}

void make_folder(const fs::path& dir, uid_t owner) {
    fs::create_directories(dir);
    fs::permissions(dir, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read |
                             fs::perms::others_exec);
    REQUIRE(::chown(dir.c_str(), owner, owner) == 0);
}

}  // namespace

// Root, to switch a child to another user, who must be able to enter the
// folder TempDir works in.
KERNHUB_TEST_REQUIREMENT("needs:root", []() -> std::string {
    if (::geteuid() != 0) return "not run as root, so no child can switch to another user";
    const char* base = std::getenv("TMPDIR");
    for (fs::path dir = base != nullptr && *base != '\0' ? base : "/tmp"; dir.has_relative_path();
         dir = dir.parent_path()) {
        struct stat st {};
        if (::stat(dir.c_str(), &st) != 0 || (st.st_mode & S_IXOTH) == 0) {
            return "other users cannot enter " + dir.string();
        }
    }
    return "";
});

TEST_CASE("refusal_advice names the entry of root's in the way and the chown that gives the cache back",
          "[store][needs:root]") {
    TempDir dir;
    make_folder(dir.path(), 0);  // the other user must reach what lies below
    const std::string other = login_name(k_other_uid);
    const fs::path cache = dir.path() / "cache";
    const fs::path repo = cache / "kernels--org--name";
    make_folder(repo / "blobs", 0);
    make_folder(cache / ".locks" / "kernels--org--name", 0);
    const fs::path spaced = dir.path() / "my cache";
    make_folder(spaced / "models--org--name", 0);
    const fs::path project = dir.path() / "project";
    make_folder(project, 0);
    const fs::path mine = dir.path() / "mine";
    make_folder(mine / "kernels--org--name" / "refs", k_other_uid);

    const std::vector<std::string> advice = advice_of_other_user(
        {repo / "blobs" / "abc.incomplete", cache / ".locks" / "kernels--org--name" / "abc.lock",
         spaced / "models--org--name" / "refs" / "main", dir.path() / "absent" / "kernels--org--name" / "blobs",
         project / "kernhub.lock", mine / "kernels--org--name" / "refs" / "main"},
        EACCES);
    // A new name in root's folder: that folder, and the whole cache back.
    CHECK(advice[0] == (repo / "blobs").string() + " is owned by root, not " + other + "; run: sudo chown -R " + other +
                           " " + cache.string());
    // A repo's folder of locks belongs to the cache root above .locks.
    CHECK(advice[1] == (cache / ".locks" / "kernels--org--name").string() + " is owned by root, not " + other +
                           "; run: sudo chown -R " + other + " " + cache.string());
    // A name the shell would split is quoted.
    CHECK(advice[2] == (spaced / "models--org--name").string() + " is owned by root, not " + other +
                           "; run: sudo chown -R " + other + " '" + spaced.string() + "'");
    // A cache root that does not exist yet is made for the user.
    CHECK(advice[3] == dir.path().string() + " is owned by root, not " + other + "; run: sudo install -d -o " + other +
                           " " + (dir.path() / "absent").string());
    // Outside a cache no command fits every case: the owner, then the advice.
    CHECK(advice[4] == project.string() + " is owned by root, not " + other + "; " + k_advice);
    // The user's own folder: the refusal is about modes, not owners.
    CHECK(advice[5] == k_advice);

    // Another errno keeps the caller's advice.
    CHECK(advice_of_other_user({repo / "blobs" / "abc.incomplete"}, ENOSPC)[0] == k_advice);

    // Root refused by another user's entry (a root-squashed network file
    // system) is told whose it is, not to chown it.
    CHECK(refusal_advice(mine / "kernels--org--name" / "refs" / "main", EACCES, k_advice) ==
          (mine / "kernels--org--name" / "refs").string() + " is owned by " + other +
              ", and this file system refuses root there; run kernhub as " + other);
}
