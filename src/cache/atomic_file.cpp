// Crash-safe file creation: write_file_atomic for small metadata and
// IncompleteBlob for streamed downloads. Both write a temp file on the target's
// filesystem (its directory, or a staging folder such as .kernhub/tmp), fsync
// it and rename it over the target, so a reader sees either
// the old content or the complete new content, never a partial file.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "cache/cache.hpp"
#include "cache/io_error.hpp"
#include "cache/posix_io.hpp"
#include "kernhub/error.hpp"

namespace kernhub::cache {

namespace {

// `refused`: where the failing call was refused, when not at `path`.
[[noreturn]] void throw_write_error(const fs::path& path, int err, const fs::path& refused = {}) {
    detail::throw_io_error("write", path, err, "check permissions and free space", refused);
}

// Writes, syncs (unless told not to) and closes `fd`; returns 0 or the
// first errno. Always closes.
int finish_temp(int fd, const std::string& content, Durability durability) {
    int err = detail::write_all(fd, content.data(), content.size());
    if (err == 0 && durability == Durability::fsync && ::fsync(fd) != 0) err = errno;
    if (::close(fd) != 0 && err == 0) err = errno;
    return err;
}

}  // namespace

void write_file_atomic(const fs::path& path, const std::string& content, const fs::path& temp_dir,
                       Durability durability) {
    fs::path dir = path.parent_path();
    if (dir.empty()) dir = ".";
    if (int err = detail::make_directories(dir); err != 0) throw_write_error(path, err, dir);
    fs::path staging = temp_dir.empty() ? dir : temp_dir;
    if (int err = detail::make_directories(staging); err != 0) throw_write_error(path, err, staging);

    // A dot name keeps the temp out of casual listings; the random part keeps
    // concurrent writers of the same file from colliding.
    // The target's name is not part of it: a 255-byte name must still fit.
    fs::path temp = staging / (".write." + detail::random_hex(16) + ".tmp");
    int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) throw_write_error(path, errno, temp);

    int err = finish_temp(fd, content, durability);
    if (err == 0 && ::rename(temp.c_str(), path.c_str()) != 0) err = errno;
    if (err == 0 && durability == Durability::fsync) err = detail::fsync_directory(dir);
    if (err != 0) {
        ::unlink(temp.c_str());
        throw_write_error(path, err);
    }
}

void sync_directory(const fs::path& dir) {
    const int err = detail::fsync_directory(dir);
    // A folder on a read-only filesystem, or one this user may not open,
    // holds no name this process made: whoever made them flushes them.
    if (err != 0 && err != EROFS && err != EACCES && err != EPERM) {
        detail::throw_io_error("flush", dir, err, "check the disk");
    }
}

// ---- IncompleteBlob --------------------------------------------------------

IncompleteBlob::IncompleteBlob(fs::path temp_path, fs::path final_path)
    : m_temp(std::move(temp_path)), m_final(std::move(final_path)) {
    // O_EXCL: each process owns its own temp; never append to another's.
    // Read-write: the download's hasher reads the bytes back (read_at).
    m_fd = ::open(m_temp.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0644);
    if (m_fd < 0) throw_write_error(m_temp, errno);
}

IncompleteBlob IncompleteBlob::reopen(fs::path temp_path, fs::path final_path) {
    IncompleteBlob blob;
    blob.m_temp = std::move(temp_path);
    blob.m_final = std::move(final_path);
    auto refuse = [&](int err) {
        fs::path temp = blob.m_temp;
        blob.m_temp.clear();  // not ours to remove
        throw_write_error(temp, err);
    };
    // O_NONBLOCK: a FIFO swapped in under the name must not block us while
    // we hold the blob's lock; O_NOFOLLOW: nor may a symlink lead elsewhere.
    blob.m_fd = ::open(blob.m_temp.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (blob.m_fd < 0) refuse(errno);
    struct stat st {};
    if (::fstat(blob.m_fd, &st) != 0) refuse(errno);
    // Only a plain file of our own with no other name: appending to a hard
    // link would change a file outside the cache.
    if (!S_ISREG(st.st_mode) || st.st_nlink != 1 || st.st_uid != ::geteuid()) refuse(EPERM);
    if (::lseek(blob.m_fd, 0, SEEK_END) < 0) refuse(errno);
    blob.m_size = static_cast<std::uint64_t>(st.st_size);
    return blob;
}

IncompleteBlob::~IncompleteBlob() {
    // The partial file stays: the next run continues it (see discard()).
    if (m_fd >= 0) ::close(m_fd);
}

void IncompleteBlob::discard() noexcept {
    if (m_committed) return;
    if (m_fd >= 0) ::close(m_fd);
    m_fd = -1;
    // A forked child leaves the parent's partial file where it is.
    if (!m_temp.empty() && m_process == process_mark()) ::unlink(m_temp.c_str());
    m_temp.clear();
    m_committed = true;  // nothing left to do for the destructor
}

IncompleteBlob::IncompleteBlob(IncompleteBlob&& other) noexcept
    : m_temp(std::move(other.m_temp)),
      m_final(std::move(other.m_final)),
      m_fd(other.m_fd),
      m_size(other.m_size),
      m_committed(other.m_committed),
      m_process(other.m_process) {
    // The moved-from object must not close our descriptor.
    other.m_fd = -1;
    other.m_temp.clear();
    other.m_committed = true;
}

void IncompleteBlob::check_owner(const char* what) const {
    if (m_process == process_mark()) return;
    throw Error(ErrorCode::internal, std::string("cannot ") + what + " " + m_temp.string() +
                                         ": the process this one was forked from is downloading it; a "
                                         "download does not go on across fork(), call again");
}

void IncompleteBlob::write(const void* data, std::size_t size) {
    if (m_fd < 0) {
        throw Error(ErrorCode::internal, "write to " + m_temp.string() + " after commit");
    }
    check_owner("write to");
    if (int err = detail::write_all(m_fd, data, size); err != 0) {
        // What part of it was written goes, so the file is what size() says.
        if (::ftruncate(m_fd, static_cast<off_t>(m_size)) == 0)
            (void)::lseek(m_fd, static_cast<off_t>(m_size), SEEK_SET);
        throw_write_error(m_temp, err);
    }
    m_size += size;
}

void IncompleteBlob::restart() {
    if (m_fd < 0) {
        throw Error(ErrorCode::internal, "restart of " + m_temp.string() + " after commit");
    }
    check_owner("restart");
    if (::ftruncate(m_fd, 0) != 0 || ::lseek(m_fd, 0, SEEK_SET) != 0) {
        throw_write_error(m_temp, errno);
    }
    m_size = 0;
}

void IncompleteBlob::start_writeback(std::uint64_t offset, std::uint64_t length) const noexcept {
#ifdef SYNC_FILE_RANGE_WRITE
    if (m_fd >= 0) {
        (void)::sync_file_range(m_fd, static_cast<off64_t>(offset), static_cast<off64_t>(length),
                                SYNC_FILE_RANGE_WRITE);
    }
#else
    (void)offset;
    (void)length;
#endif
}

int IncompleteBlob::read_at(std::uint64_t offset, void* data, std::size_t size) const noexcept {
    auto* out = static_cast<char*>(data);
    while (size > 0) {
        const ssize_t n = ::pread(m_fd, out, size, static_cast<off_t>(offset));
        if (n < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        if (n == 0) return EIO;  // the file is shorter than what was written
        out += n;
        offset += static_cast<std::uint64_t>(n);
        size -= static_cast<std::size_t>(n);
    }
    return 0;
}

void IncompleteBlob::commit(bool sync_directory) {
    if (m_fd < 0) {
        throw Error(ErrorCode::internal, "commit of " + m_temp.string() + " twice");
    }
    check_owner("commit");
    // Read-only before the rename, so the blob is never writable once visible.
    int err = 0;
    struct stat written {};
    if (::fsync(m_fd) != 0 || ::fchmod(m_fd, 0444) != 0 || ::fstat(m_fd, &written) != 0) err = errno;
    if (err == 0 && static_cast<std::uint64_t>(written.st_size) != m_size) {
        // Bytes this object did not write: another writer of the same file.
        const std::uint64_t found = static_cast<std::uint64_t>(written.st_size);
        discard();
        throw Error(ErrorCode::verification, m_temp.string() + " holds " + std::to_string(found) + " bytes where " +
                                                 std::to_string(m_size) +
                                                 " were written: something else wrote to it; nothing was kept, "
                                                 "fetch again and check who else writes to the cache");
    }
    if (err == 0 && ::rename(m_temp.c_str(), m_final.c_str()) != 0) err = errno;
    if (err != 0) {
        discard();
        throw_write_error(m_final, err);
    }
    ::close(m_fd);
    m_fd = -1;
    m_committed = true;
    // The rename goes by name: if someone swapped another file in under the
    // partial's name, that file is what now sits at the final name. Only the
    // inode that was written and hashed may stay there.
    struct stat placed {};
    if (::lstat(m_final.c_str(), &placed) != 0 || placed.st_dev != written.st_dev || placed.st_ino != written.st_ino) {
        ::unlink(m_final.c_str());
        throw Error(ErrorCode::verification, m_temp.string() +
                                                 " was replaced by another file while it was written; nothing was "
                                                 "kept, fetch again and check who else writes to the cache");
    }
    if (!sync_directory) return;
    if (int dir_err = detail::fsync_directory(m_final.parent_path()); dir_err != 0) {
        throw_write_error(m_final.parent_path(), dir_err);
    }
}

}  // namespace kernhub::cache
