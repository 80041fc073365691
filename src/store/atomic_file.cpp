// Crash-safe file creation: write_file_atomic for small metadata and
// IncompleteBlob for streamed downloads. Both write a temp file in the target
// directory, fsync it and rename it over the target, so a reader sees either
// the old content or the complete new content, never a partial file.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>

#include "kernhub/error.hpp"
#include "store/cache.hpp"
#include "store/posix_io.hpp"

namespace kernhub::store {

namespace {

[[noreturn]] void throw_write_error(const fs::path& path, int err) {
    throw Error(ErrorCode::internal, "cannot write " + path.string() + ": " + detail::errno_text(err) +
                                         "; check permissions and free space");
}

// Writes, syncs and closes `fd`; returns 0 or the first errno. Always closes.
int finish_temp(int fd, const std::string& content) {
    int err = detail::write_all(fd, content.data(), content.size());
    if (err == 0 && ::fsync(fd) != 0) err = errno;
    if (::close(fd) != 0 && err == 0) err = errno;
    return err;
}

}  // namespace

void write_file_atomic(const fs::path& path, const std::string& content, const fs::path& temp_dir) {
    fs::path dir = path.parent_path();
    if (dir.empty()) dir = ".";
    if (int err = detail::make_directories(dir); err != 0) throw_write_error(path, err);
    fs::path staging = temp_dir.empty() ? dir : temp_dir;
    if (int err = detail::make_directories(staging); err != 0) throw_write_error(path, err);

    // A dot name keeps the temp out of casual listings; the random part keeps
    // concurrent writers of the same file from colliding.
    fs::path temp = staging / ("." + path.filename().string() + "." + detail::random_hex(16) + ".tmp");
    int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) throw_write_error(path, errno);

    int err = finish_temp(fd, content);
    if (err == 0 && ::rename(temp.c_str(), path.c_str()) != 0) err = errno;
    if (err == 0) err = detail::fsync_directory(dir);
    if (err != 0) {
        ::unlink(temp.c_str());
        throw_write_error(path, err);
    }
}

std::optional<std::string> read_file(const fs::path& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        // ENOTDIR: a path component is a file, which also means "not there".
        if (errno == ENOENT || errno == ENOTDIR) return std::nullopt;
        int err = errno;
        throw Error(ErrorCode::internal,
                    "cannot read " + path.string() + ": " + detail::errno_text(err) + "; check permissions");
    }
    std::string content;
    std::array<char, 16 * 1024> buffer{};
    for (;;) {
        ssize_t n = ::read(fd, buffer.data(), buffer.size());
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            int err = errno;
            ::close(fd);
            throw Error(ErrorCode::internal,
                        "cannot read " + path.string() + ": " + detail::errno_text(err) + "; check the disk");
        }
        if (n == 0) break;
        content.append(buffer.data(), static_cast<std::size_t>(n));
    }
    ::close(fd);
    return content;
}

// ---- IncompleteBlob --------------------------------------------------------

IncompleteBlob::IncompleteBlob(fs::path temp_path, fs::path final_path)
    : m_temp(std::move(temp_path)), m_final(std::move(final_path)) {
    // O_EXCL: each process owns its own temp; never append to another's.
    m_fd = ::open(m_temp.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
    if (m_fd < 0) throw_write_error(m_temp, errno);
}

IncompleteBlob::~IncompleteBlob() {
    if (m_committed) return;
    if (m_fd >= 0) ::close(m_fd);
    if (!m_temp.empty()) ::unlink(m_temp.c_str());
}

IncompleteBlob::IncompleteBlob(IncompleteBlob&& other) noexcept
    : m_temp(std::move(other.m_temp)),
      m_final(std::move(other.m_final)),
      m_fd(other.m_fd),
      m_size(other.m_size),
      m_committed(other.m_committed) {
    // The moved-from object must neither close our descriptor nor unlink our
    // temp file when it is destroyed.
    other.m_fd = -1;
    other.m_temp.clear();
    other.m_committed = true;
}

void IncompleteBlob::write(const void* data, std::size_t size) {
    if (m_fd < 0) {
        throw Error(ErrorCode::internal, "write to " + m_temp.string() + " after commit");
    }
    if (int err = detail::write_all(m_fd, data, size); err != 0) throw_write_error(m_temp, err);
    m_size += size;
}

void IncompleteBlob::restart() {
    if (m_fd < 0) {
        throw Error(ErrorCode::internal, "restart of " + m_temp.string() + " after commit");
    }
    if (::ftruncate(m_fd, 0) != 0 || ::lseek(m_fd, 0, SEEK_SET) != 0) {
        throw_write_error(m_temp, errno);
    }
    m_size = 0;
}

void IncompleteBlob::commit() {
    if (m_fd < 0) {
        throw Error(ErrorCode::internal, "commit of " + m_temp.string() + " twice");
    }
    // Read-only before the rename, so the blob is never writable once visible.
    int err = 0;
    if (::fsync(m_fd) != 0 || ::fchmod(m_fd, 0444) != 0) err = errno;
    if (::close(m_fd) != 0 && err == 0) err = errno;
    m_fd = -1;
    if (err == 0 && ::rename(m_temp.c_str(), m_final.c_str()) != 0) err = errno;
    if (err != 0) throw_write_error(m_final, err);  // the destructor removes the temp
    m_committed = true;
    if (int dir_err = detail::fsync_directory(m_final.parent_path()); dir_err != 0) {
        throw_write_error(m_final.parent_path(), dir_err);
    }
}

}  // namespace kernhub::store
