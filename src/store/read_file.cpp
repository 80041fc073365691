// Whole-file reads: kernhub's one way to take a file into memory. Callers
// differ only in how they phrase a failure and whether they cap the size, so
// the read reports an errno and leaves the wording to them.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>

#include "kernhub/error.hpp"
#include "store/cache.hpp"
#include "store/posix_io.hpp"

namespace kernhub::store {

namespace {

// Reads all of `fd` into `content`, at most max_bytes. Closes fd.
template <typename Container>
ReadStatus read_fd(int fd, Container& content, std::size_t max_bytes) {
    ReadStatus status{0, true};
    // One allocation for a regular file; a pipe or device reports no size.
    struct stat info {};
    if (::fstat(fd, &info) == 0 && info.st_size > 0) {
        content.reserve(std::min(static_cast<std::size_t>(info.st_size), max_bytes));
    }
    std::array<char, 64 * 1024> buffer{};
    for (;;) {
        const ssize_t n = ::read(fd, buffer.data(), buffer.size());
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            status.error = errno;
            break;
        }
        if (n == 0) break;
        const auto got = static_cast<std::size_t>(n);
        if (got > max_bytes - content.size()) {
            status.error = EFBIG;
            break;
        }
        content.insert(content.end(), buffer.data(), buffer.data() + got);
    }
    ::close(fd);
    return status;
}

template <typename Container>
ReadStatus read_whole(const fs::path& path, Container& content, std::size_t max_bytes) {
    content.clear();
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ReadStatus{errno, false};
    return read_fd(fd, content, max_bytes);
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
    throw Error(ErrorCode::internal, "cannot read " + path.string() + ": " + detail::errno_text(status.error) +
                                         (status.opened ? "; check the disk" : "; check permissions"));
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
        int err = errno;
        throw Error(ErrorCode::internal,
                    "cannot read " + path.string() + ": " + detail::errno_text(err) + "; check permissions");
    }
    struct stat info {};
    if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
        ::close(fd);
        throw refuse("is not a regular file");
    }
    std::string content;
    const ReadStatus status = read_fd(fd, content, max_bytes);
    if (status.error == EFBIG) {
        throw refuse("is larger than the " + std::to_string(max_bytes >> 10) + " KiB limit for " + what);
    }
    if (status.error != 0) {
        throw Error(ErrorCode::internal,
                    "cannot read " + path.string() + ": " + detail::errno_text(status.error) + "; check the disk");
    }
    return content;
}

}  // namespace kernhub::store
