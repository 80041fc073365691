// read_zip_member: one file out of a zip, in memory. A kernel in the zip
// build layout keeps its Python package (the _ops.py that names its torch
// op namespace) in <id>.zip; kernhub reads what loading needs from it and
// unpacks nothing. The zip is the verified blob of the cache: its bytes
// were hashed at fetch. Its entries are still the publisher's, so each is
// judged like a tar's and the member is read with a bound.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "archive/archive.hpp"
#include "archive/detail.hpp"
#include "common/text.hpp"
#include "kernhub/error.hpp"

namespace kernhub::archive {
namespace {

using detail::libarchive;
using detail::refuse;

class ReadFd {
public:
    explicit ReadFd(int fd) : m_fd(fd) {}
    ~ReadFd() {
        if (m_fd >= 0) ::close(m_fd);
    }
    ReadFd(const ReadFd&) = delete;
    ReadFd& operator=(const ReadFd&) = delete;
    int get() const noexcept { return m_fd; }

private:
    int m_fd;
};

void stop_if_cancelled(const std::atomic<bool>* cancel) {
    if (cancel != nullptr && cancel->load(std::memory_order_relaxed)) {
        throw Error(ErrorCode::interrupted, "interrupted while reading a zip");
    }
}

// The member's bytes, at most max_bytes of them.
std::string read_data(struct archive* reader, const fs::path& file, const std::string& member,
                      std::size_t max_bytes, const std::atomic<bool>* cancel) {
    std::string out;
    for (;;) {
        stop_if_cancelled(cancel);
        const void* block = nullptr;
        std::size_t size = 0;
        la_int64_t offset = 0;
        const int status = libarchive().archive_read_data_block(reader, &block, &size, &offset);
        if (status == ARCHIVE_EOF) return out;
        if (status != ARCHIVE_OK) refuse(file, member, "cannot be read (the zip is damaged)");
        if (offset < 0 || static_cast<std::uint64_t>(offset) != out.size()) {
            refuse(file, member, "has holes, which a zip member cannot have");
        }
        if (size > max_bytes - out.size()) {
            refuse(file, member, "is larger than the " + std::to_string(max_bytes) + "-byte limit for it");
        }
        out.append(static_cast<const char*>(block), size);
    }
}

}  // namespace

std::optional<std::string> read_zip_member(const fs::path& file, const std::string& member, std::size_t max_bytes,
                                           const std::atomic<bool>* cancel) {
    ReadFd input(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
    if (input.get() < 0) {
        const int err = errno;
        throw Error(err == ENOENT ? ErrorCode::not_found : ErrorCode::internal,
                    "cannot read the zip " + printable(file.string()) + ": " + std::strerror(err));
    }
    struct stat st {};
    if (::fstat(input.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
        refuse(file, "", "is not a regular file");
    }
    detail::Handle handle(detail::Handle::Kind::read);
    struct archive* reader = handle.get();
    libarchive().archive_read_support_format_zip_seekable(reader);
    if (libarchive().archive_read_open_fd(reader, input.get(), std::size_t{64} * 1024) != ARCHIVE_OK) {
        refuse(file, "", "is not a zip kernhub reads (" + handle.error_text() + ")");
    }
    ExtractionPolicy names;  // the path rules of every archive: relative, no "..", bounded
    std::optional<std::string> found;
    for (std::uint64_t seen = 0;; ++seen) {
        stop_if_cancelled(cancel);
        struct archive_entry* raw = nullptr;
        const int status = libarchive().archive_read_next_header(reader, &raw);
        if (status == ARCHIVE_EOF) return found;
        if (status != ARCHIVE_OK && status != ARCHIVE_WARN) {
            refuse(file, "", "is damaged at entry #" + std::to_string(seen + 1) + " (" + handle.error_text() + ")");
        }
        if (seen >= k_max_zip_entries) {
            refuse(file, "", "has more than the k_max_zip_entries limit of " + std::to_string(k_max_zip_entries) +
                                 " entries");
        }
        const char* path = libarchive().archive_entry_pathname_utf8(raw);
        if (path == nullptr) path = libarchive().archive_entry_pathname(raw);
        if (path == nullptr) continue;
        const bool directory = libarchive().archive_entry_filetype(raw) == AE_IFDIR;
        const detail::NormalizedPath normalized = detail::normalize_path(path, directory, names);
        if (!normalized.problem.empty() || normalized.path != member) continue;
        if (directory || libarchive().archive_entry_filetype(raw) != AE_IFREG) {
            refuse(file, member, "is not a regular file in the zip");
        }
        // zipimport takes the last of two entries with one name; kernhub
        // refuses to guess which one a reader would take.
        if (found) refuse(file, member, "is in the zip twice");
        found = read_data(reader, file, member, max_bytes, cancel);
    }
}

}  // namespace kernhub::archive
