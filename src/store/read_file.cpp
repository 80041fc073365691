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

template <typename Container>
ReadStatus read_whole(const fs::path& path, Container& content, std::size_t max_bytes) {
    content.clear();
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ReadStatus{errno, false};
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

}  // namespace kernhub::store
