#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <mutex>
#include <thread>

#include "cache/cache.hpp"
#include "cache/io_error.hpp"
#include "cache/posix_io.hpp"
#include "kernhub/error.hpp"

namespace kernhub::cache {

// A lock that cannot be had at all stops the command: running on without
// it would let a prune remove a blob this process is about to link. When
// another user's entry is the reason (a lock file this user may not even
// read, or a folder of .locks this user may not create one in), the message
// names it, its owner and the chown that gives the cache back.
[[noreturn]] static void throw_lock_error(const fs::path& path, int err) {
    detail::throw_io_error("lock", path, err, "check permissions on the cache's .locks folder");
}

// Opens (with `create`, creates) a lock file. flock works on a read-only
// descriptor, so a lock file another user made (after one `sudo kernhub
// fetch`, say) that this user may read but not write still locks.
static int open_lock_file(const fs::path& lock_path, bool create) {
    int fd = ::open(lock_path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW | (create ? O_CREAT : 0), 0644);
    if (fd < 0 && errno == EACCES) {
        fd = ::open(lock_path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0) errno = EACCES;  // the reason the lock cannot be had
    }
    return fd;
}

// flock(fd, op), waiting. With a cancel flag the wait polls, so that a
// request to stop is seen even when no signal interrupts flock() (a flag set
// by another thread); then Error(interrupted), `holder` saying who holds it.
static void wait_for_flock(int fd, int op, const fs::path& lock_path, const std::atomic<bool>* cancel,
                           const char* holder) {
    const int mode = cancel != nullptr ? op | LOCK_NB : op;
    while (::flock(fd, mode) != 0) {
        const int err = errno;
        const bool busy = err == EWOULDBLOCK || err == EINTR;
        if (busy && cancel != nullptr && cancel->load()) {
            throw Error(ErrorCode::interrupted,
                        "interrupted while waiting for the lock " + lock_path.string() + "; " + holder);
        }
        if (err == EINTR) continue;
        if (busy && cancel != nullptr) {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            continue;
        }
        throw_lock_error(lock_path, err);
    }
}

FileLock::FileLock(const fs::path& lock_path, const std::atomic<bool>* cancel) {
    if (int err = detail::make_directories(lock_path.parent_path()); err != 0) {
        throw_lock_error(lock_path, err);
    }
    // The lock file is never removed: unlinking it would let a later process
    // lock a fresh inode while an earlier one still holds the old one.
    // O_NOFOLLOW: a symlink planted at the lock's name must not make us
    // create or open a file elsewhere.
    m_fd = open_lock_file(lock_path, true);
    if (m_fd < 0) throw_lock_error(lock_path, errno);
    try {
        wait_for_flock(m_fd, LOCK_EX, lock_path, cancel, "another process is downloading that file");
    } catch (...) {
        ::close(m_fd);
        m_fd = -1;
        throw;
    }
}

std::optional<FileLock> FileLock::shared(const fs::path& lock_path, const std::atomic<bool>* cancel) {
    FileLock lock;
    lock.m_fd = ::open(lock_path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    int err = lock.m_fd < 0 ? errno : 0;
    if (err == ENOENT) {
        err = detail::make_directories(lock_path.parent_path());
        if (err == 0) {
            lock.m_fd = ::open(lock_path.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
            err = lock.m_fd < 0 ? errno : 0;
        }
    }
    if (err == EACCES || err == EPERM || err == EROFS) return std::nullopt;
    if (err != 0) throw_lock_error(lock_path, err);
    wait_for_flock(lock.m_fd, LOCK_SH, lock_path, cancel, "a prune is removing a snapshot");
    return lock;
}

std::optional<FileLock> FileLock::try_acquire(const fs::path& lock_path, bool create) {
    FileLock lock;
    if (create) {
        if (int err = detail::make_directories(lock_path.parent_path()); err != 0) throw_lock_error(lock_path, err);
    }
    lock.m_fd = open_lock_file(lock_path, create);
    if (lock.m_fd < 0) {
        if (!create && (errno == ENOENT || errno == ENOTDIR)) return lock;  // never locked: free
        throw_lock_error(lock_path, errno);
    }
    while (::flock(lock.m_fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno == EINTR) continue;
        if (errno == EWOULDBLOCK) return std::nullopt;  // the destructor closes the descriptor
        throw_lock_error(lock_path, errno);
    }
    return lock;
}

FileLock::~FileLock() {
    // Unlocked before it is closed: a flock belongs to the open file, and a
    // child that fork() made meanwhile holds a copy of the descriptor (for
    // its life: the thread that would close it is not there), so closing
    // ours alone would leave the file locked for every other process,
    // the child included.
    // In such a child, only the copy of the descriptor goes: the lock is
    // the parent's, whose thread still holds it.
    if (m_fd >= 0) {
        if (m_process == process_mark()) (void)::flock(m_fd, LOCK_UN);
        ::close(m_fd);
    }
}

FileLock::FileLock(FileLock&& other) noexcept : m_fd(other.m_fd), m_process(other.m_process) {
    other.m_fd = -1;
}

// Two descriptors from two open() calls are two open file descriptions, so
// a working flock() refuses the second one while the first holds the lock.
// The probe file is private to this process so concurrent probes cannot
// disturb each other.
static bool probe_flock(const fs::path& root) {
    const fs::path dir = root / ".locks";
    if (detail::make_directories(dir) != 0) return false;
    const fs::path probe = dir / (".flock-probe." + detail::random_hex(16));
    int first = ::open(probe.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (first < 0) return false;
    int second = ::open(probe.c_str(), O_RDWR | O_CLOEXEC);
    ::unlink(probe.c_str());
    bool excludes = false;
    if (second >= 0 && ::flock(first, LOCK_EX | LOCK_NB) == 0) {
        excludes = ::flock(second, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    }
    if (second >= 0) ::close(second);
    ::close(first);
    return excludes;
}

bool flock_excludes(const fs::path& root) {
    static std::mutex mutex;
    static std::map<fs::path, bool> known;  // one-time facts about each filesystem
    std::lock_guard<std::mutex> guard(mutex);
    auto it = known.find(root);
    if (it == known.end()) it = known.emplace(root, probe_flock(root)).first;
    return it->second;
}

}  // namespace kernhub::cache
