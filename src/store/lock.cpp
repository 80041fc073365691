#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>

#include "kernhub/error.hpp"
#include "store/cache.hpp"
#include "store/posix_io.hpp"

namespace kernhub::store {

[[noreturn]] static void throw_lock_error(const fs::path& path, int err) {
    throw Error(ErrorCode::internal, "cannot lock " + path.string() + ": " + detail::errno_text(err) +
                                         "; check permissions on the cache's .locks folder");
}

FileLock::FileLock(const fs::path& lock_path) {
    if (int err = detail::make_directories(lock_path.parent_path()); err != 0) {
        throw_lock_error(lock_path, err);
    }
    // The lock file is never removed: unlinking it would let a later process
    // lock a fresh inode while an earlier one still holds the old one.
    m_fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (m_fd < 0) throw_lock_error(lock_path, errno);
    while (::flock(m_fd, LOCK_EX) != 0) {
        if (errno == EINTR) continue;
        int err = errno;
        ::close(m_fd);
        m_fd = -1;
        throw_lock_error(lock_path, err);
    }
}

FileLock::~FileLock() {
    // Closing the last descriptor of the open file releases the flock.
    if (m_fd >= 0) ::close(m_fd);
}

FileLock::FileLock(FileLock&& other) noexcept : m_fd(other.m_fd) {
    other.m_fd = -1;
}

}  // namespace kernhub::store
