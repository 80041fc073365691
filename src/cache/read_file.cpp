// Whole-file reads: kernhub's one way to take a file into memory. Callers
// differ only in how they phrase a failure and whether they cap the size, so
// the read reports an errno and leaves the wording to them.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>

#include "cache/cache.hpp"
#include "cache/io_error.hpp"
#include "cache/posix_io.hpp"
#include "kernhub/error.hpp"

namespace kernhub::cache {

namespace {

// Reads all of `fd` into `content`, at most max_bytes. Closes fd. `known`
// is the size fstat already reported, if the caller has it.
template <typename Container>
ReadStatus read_fd(int fd, Container& content, std::size_t max_bytes, std::optional<struct stat> known = {}) {
    ReadStatus status{0, true};
    struct stat info {};
    if (known) {
        info = *known;
    } else if (::fstat(fd, &info) != 0) {
        info = {};
    }
    // A regular file with a size: one allocation, and a read that comes back
    // short is taken as the end (local filesystems shorten a read of a
    // regular file only there), which saves the final empty read. A pipe,
    // a device or a file reporting size 0 (procfs, some FUSE mounts) is read
    // in chunks until read() returns 0.
    const bool regular = S_ISREG(info.st_mode) && info.st_size > 0;
    std::size_t chunk = std::size_t{64} * 1024;
    if (regular) chunk = std::min(static_cast<std::size_t>(info.st_size), max_bytes - 1) + 1;
    for (;;) {
        const std::size_t have = content.size();
        // One byte past the limit shows a file that exceeds it.
        const std::size_t room = max_bytes - have;
        const std::size_t want = room >= chunk ? chunk : room + 1;
        content.resize(have + want);
        const ssize_t n = ::read(fd, content.data() + have, want);
        if (n < 0 && errno == EINTR) {
            content.resize(have);
            continue;
        }
        content.resize(have + static_cast<std::size_t>(std::max<ssize_t>(n, 0)));
        if (n < 0) {
            status.error = errno;
            break;
        }
        if (content.size() > max_bytes) {
            content.resize(max_bytes);
            status.error = EFBIG;
            break;
        }
        // A short read ends it only once the size fstat reported is in: one
        // read() returns at most about 2 GiB, and a network filesystem may
        // shorten any read.
        if (n == 0 || (regular && static_cast<std::size_t>(n) < want &&
                       content.size() >= static_cast<std::size_t>(info.st_size))) {
            break;
        }
    }
    ::close(fd);
    return status;
}

template <typename Container>
ReadStatus read_whole(const fs::path& path, Container& content, std::size_t max_bytes) {
    content.clear();
    // O_NONBLOCK: a FIFO must not make the open wait for a writer; only a
    // regular file is read at all (a device such as /dev/zero never ends).
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return ReadStatus{errno, false};
    struct stat info {};
    if (::fstat(fd, &info) != 0) {
        const int err = errno;
        ::close(fd);
        return ReadStatus{err, true};
    }
    if (!S_ISREG(info.st_mode)) {
        ::close(fd);
        return S_ISDIR(info.st_mode) ? ReadStatus{EISDIR, true} : ReadStatus{EINVAL, true, true};
    }
    return read_fd(fd, content, max_bytes, info);
}

}  // namespace

ReadStatus read_file_into(const fs::path& path, std::string& content, std::size_t max_bytes) {
    return read_whole(path, content, max_bytes);
}

ReadStatus read_file_into(const fs::path& path, std::vector<std::uint8_t>& content, std::size_t max_bytes) {
    return read_whole(path, content, max_bytes);
}

std::optional<std::string> read_file(const fs::path& path) {
    std::string content;
    const ReadStatus status = read_file_into(path, content);
    if (status.error == 0) return content;
    // ENOTDIR: a path component is a file, which also means "not there".
    if (!status.opened && (status.error == ENOENT || status.error == ENOTDIR)) return std::nullopt;
    detail::throw_io_error("read", path, status.error, status.opened ? "check the disk" : "check permissions");
}

std::optional<std::string> read_cache_file(const fs::path& path, std::size_t max_bytes, const char* what) {
    // O_NONBLOCK: opening a FIFO planted here must not wait for a writer.
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
    if (fd < 0 && (errno == ENOENT || errno == ENOTDIR)) return std::nullopt;
    auto refuse = [&](const std::string& why) {
        return Error(ErrorCode::verification, path.string() + " " + why + "; remove it and fetch again while online");
    };
    if (fd < 0 && errno == ELOOP) throw refuse("is a symbolic link, where kernhub expects a plain file");
    if (fd < 0) {
        const int err = errno;
        detail::throw_io_error("read", path, err, "check permissions");
    }
    struct stat info {};
    if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
        ::close(fd);
        throw refuse("is not a regular file");
    }
    std::string content;
    const ReadStatus status = read_fd(fd, content, max_bytes, info);
    if (status.error == EFBIG) {
        throw refuse("is larger than the " + std::to_string(max_bytes >> 10) + " KiB limit for " + what);
    }
    if (status.error != 0) {
        detail::throw_io_error("read", path, status.error, "check the disk");
    }
    return content;
}

}  // namespace kernhub::cache
