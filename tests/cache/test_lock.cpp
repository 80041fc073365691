// Many processes fetching one blob at once: the flock in FileLock must make
// exactly one of them download while the others wait and then find the blob.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "cache/cache.hpp"
#include "digest/digest.hpp"
#include "support/temp_dir.hpp"

namespace fs = std::filesystem;
using kernhub::RepoType;
using kernhub::cache::RepoCache;
using kernhub::test::TempDir;

namespace {

std::vector<std::string> lines_of(const fs::path& path) {
    std::ifstream in(path);
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
}

// One forked "rank": take the blob lock, download only when the blob is
// still absent, and log the download. Runs in a child, so it reports through
// its exit status instead of Catch assertions.
int rank_fetch(const fs::path& root, const std::string& etag, const std::string& content, const fs::path& log_path,
               int start_fd) {
    try {
        char byte = 0;
        while (::read(start_fd, &byte, 1) < 0 && errno == EINTR) {
        }  // returns at EOF, when the parent releases all ranks at once
        RepoCache cache(root, RepoType::kernel, "org/name");
        auto lock = cache.lock_blob(etag);
        if (cache.has_blob(etag)) return 0;
        auto blob = cache.begin_blob(etag);
        const std::size_t chunk = 64 * 1024;
        for (std::size_t at = 0; at < content.size(); at += chunk) {
            blob.write(content.data() + at, std::min(chunk, content.size() - at));
            // Holds the lock long enough that the other ranks queue on it.
            std::this_thread::sleep_for(std::chrono::milliseconds(3));
        }
        blob.commit();
        int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (log < 0) return 2;
        std::string line = "downloaded by " + std::to_string(::getpid()) + "\n";
        bool logged = ::write(log, line.data(), line.size()) == static_cast<ssize_t>(line.size());
        ::close(log);
        return logged ? 0 : 3;
    } catch (...) {
        return 1;
    }
}

}  // namespace

TEST_CASE("concurrent ranks download a blob once", "[store]") {
    TempDir dir;
    const fs::path root = dir.path() / "cache";
    const fs::path log_path = dir.path() / "downloads.log";
    std::string content(1024 * 1024, '\0');
    for (std::size_t i = 0; i < content.size(); ++i) content[i] = static_cast<char>(i * 2654435761u >> 24);
    const std::string etag = kernhub::digest::sha256_hex(content);

    int start[2];
    REQUIRE(::pipe(start) == 0);
    std::vector<pid_t> ranks;
    for (int i = 0; i < 4; ++i) {
        pid_t pid = ::fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            ::close(start[1]);
            ::_exit(rank_fetch(root, etag, content, log_path, start[0]));
        }
        ranks.push_back(pid);
    }
    ::close(start[0]);
    ::close(start[1]);  // EOF on the pipe starts every rank together
    for (pid_t pid : ranks) {
        int status = 0;
        REQUIRE(::waitpid(pid, &status, 0) == pid);
        CHECK(WIFEXITED(status));
        CHECK(WEXITSTATUS(status) == 0);
    }

    CHECK(lines_of(log_path).size() == 1);
    RepoCache cache(root, RepoType::kernel, "org/name");
    REQUIRE(cache.has_blob(etag));
    CHECK(kernhub::digest::sha256_file_hex(cache.blob_path(etag)) == etag);
    // No temp file survives: the winner renamed its own, nobody else made one.
    CHECK(std::distance(fs::directory_iterator(cache.folder() / "blobs"), fs::directory_iterator()) == 1);
}
