#include "cache/posix_io.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <system_error>

#include "digest/digest.hpp"

namespace kernhub::cache::detail {

std::string random_hex(std::size_t chars) {
    // random_device reads the kernel's source on every call, so a forked
    // child never repeats its parent's sequence.
    std::random_device source;
    digest::Bytes bytes((chars + 1) / 2);
    for (std::uint8_t& byte : bytes) byte = static_cast<std::uint8_t>(source());
    std::string out = digest::to_hex(bytes);
    out.resize(chars);
    return out;
}

int write_all(int fd, const void* data, std::size_t size) {
    const char* cursor = static_cast<const char*>(data);
    while (size > 0) {
        ssize_t n = ::write(fd, cursor, size);
        if (n < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        if (n == 0) return EIO;  // should not happen for regular files; avoid spinning
        cursor += n;
        size -= static_cast<std::size_t>(n);
    }
    return 0;
}

int fsync_directory(const std::filesystem::path& dir) {
    int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return errno;
    int err = 0;
    if (::fsync(fd) != 0 && errno != EINVAL) err = errno;
    ::close(fd);
    return err;
}

int make_directories(const std::filesystem::path& dir) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (!ec) return 0;
    return ec.category() == std::generic_category() || ec.category() == std::system_category() ? ec.value() : EIO;
}

std::string errno_text(int err) {
    return std::strerror(err);
}

UniqueFd::~UniqueFd() {
    if (m_fd >= 0) ::close(m_fd);
}

}  // namespace kernhub::cache::detail
