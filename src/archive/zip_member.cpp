// read_zip_member: one file out of a zip, in memory. A kernel in the zip
// build layout keeps its Python package (the _ops.py that names its torch
// op namespace) in <id>.zip; kernhub reads what loading needs from it and
// unpacks nothing. The zip is the verified blob of the cache: its bytes
// were hashed at fetch. Its entries are still the publisher's, so each is
// judged like a tar's and the member is read with a bound.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

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
std::string read_data(struct archive* reader, const fs::path& file, const std::string& member, std::size_t max_bytes,
                      const std::atomic<bool>* cancel) {
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

// The bytes at [offset, offset + size) of the file; the zip is refused when
// it ends before them.
std::string read_at(int fd, const fs::path& file, std::uint64_t offset, std::size_t size) {
    std::string out(size, '\0');
    std::size_t have = 0;
    while (have < size) {
        const ssize_t n = ::pread(fd, out.data() + have, size - have, static_cast<off_t>(offset + have));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) refuse(file, "", "ends inside its own central directory");
        have += static_cast<std::size_t>(n);
    }
    return out;
}

std::uint64_t le(const std::string& bytes, std::size_t at, int width) {
    std::uint64_t value = 0;
    for (int i = width - 1; i >= 0; --i) value = (value << 8) | static_cast<unsigned char>(bytes[at + i]);
    return value;
}

// The names of the zip's central directory, in its order: what Python's
// zipimport (which kernels uses for the zip layout) imports by. libarchive
// names an entry by its local header, which a publisher may make disagree.
// Located from the end as zipimport locates it (the directory ends where
// the end record, or the zip64 one, begins, whatever offsets the records
// claim), within k_max_zip_entries entries and k_max_zip_directory_bytes.
std::vector<std::string> central_directory_names(int fd, const fs::path& file, std::uint64_t file_size) {
    constexpr std::size_t k_end_record = 22;
    const std::size_t tail_size = static_cast<std::size_t>(std::min<std::uint64_t>(file_size, 65535 + k_end_record));
    const std::string tail = read_at(fd, file, file_size - tail_size, tail_size);
    std::size_t at = std::string::npos;
    for (std::size_t i = tail_size >= k_end_record ? tail_size - k_end_record + 1 : 0; i-- > 0;) {
        if (tail.compare(i, 4, "PK\x05\x06") == 0) {
            at = i;
            break;
        }
    }
    if (at == std::string::npos) refuse(file, "", "has no end of central directory record");
    const std::uint64_t end_record = file_size - tail_size + at;
    std::uint64_t count = le(tail, at + 10, 2);
    std::uint64_t size = le(tail, at + 12, 4);
    std::uint64_t directory_end = end_record;
    if (count == 0xffff || size == 0xffffffffu) {
        // zip64: the locator just before the end record names the zip64 end record.
        if (end_record < 20) refuse(file, "", "has a damaged zip64 end record");
        const std::string locator = read_at(fd, file, end_record - 20, 20);
        if (locator.compare(0, 4, "PK\x06\x07") != 0) refuse(file, "", "has a damaged zip64 end record");
        const std::uint64_t record = le(locator, 8, 8);
        if (record > end_record - 20 || end_record - 20 - record < 56) {
            refuse(file, "", "has a damaged zip64 end record");
        }
        const std::string zip64 = read_at(fd, file, record, 56);
        if (zip64.compare(0, 4, "PK\x06\x06") != 0) refuse(file, "", "has a damaged zip64 end record");
        count = le(zip64, 32, 8);
        size = le(zip64, 40, 8);
        directory_end = record;
    }
    if (count > k_max_zip_entries) {
        refuse(file, "",
               "has more than the k_max_zip_entries limit of " + std::to_string(k_max_zip_entries) + " entries");
    }
    if (size > k_max_zip_directory_bytes) {
        refuse(file, "",
               "has a central directory larger than the k_max_zip_directory_bytes limit of " +
                   std::to_string(k_max_zip_directory_bytes) + " bytes");
    }
    if (size > directory_end) refuse(file, "", "has a central directory larger than the zip");
    const std::string directory = read_at(fd, file, directory_end - size, static_cast<std::size_t>(size));
    std::vector<std::string> names;
    std::size_t pos = 0;
    for (std::uint64_t i = 0; i < count; ++i) {
        if (directory.size() - pos < 46 || directory.compare(pos, 4, "PK\x01\x02") != 0) {
            refuse(file, "", "has a damaged central directory at entry #" + std::to_string(i + 1));
        }
        const std::size_t name = le(directory, pos + 28, 2);
        const std::size_t extra = le(directory, pos + 30, 2);
        const std::size_t comment = le(directory, pos + 32, 2);
        if (directory.size() - pos - 46 < name + extra + comment) {
            refuse(file, "", "has a damaged central directory at entry #" + std::to_string(i + 1));
        }
        names.push_back(directory.substr(pos + 46, name));
        pos += 46 + name + extra + comment;
    }
    return names;
}

// One set of names for every reader: a zip whose local headers name its
// entries otherwise than its directory does shows zipimport other files
// than kernhub would check.
void check_same_names(const fs::path& file, std::vector<std::string> directory, std::vector<std::string> local) {
    std::sort(directory.begin(), directory.end());
    std::sort(local.begin(), local.end());
    if (local != directory) {
        refuse(file, "",
               "names its entries differently in its central directory and its local headers, "
               "so readers disagree on what it holds");
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
    const std::vector<std::string> directory =
        central_directory_names(input.get(), file, static_cast<std::uint64_t>(st.st_size));
    // zipimport finds a module by its exact name in the directory (the
    // last entry of two with one name): kernhub takes exactly that name,
    // and refuses the zip that holds it twice.
    if (std::count(directory.begin(), directory.end(), member) > 1) refuse(file, member, "is in the zip twice");
    ExtractionPolicy names;  // the path rules of every archive: relative, no "..", bounded
    std::optional<std::string> found;
    std::vector<std::string> local;  // the names libarchive read
    for (std::uint64_t seen = 0;; ++seen) {
        stop_if_cancelled(cancel);
        struct archive_entry* raw = nullptr;
        const int status = libarchive().archive_read_next_header(reader, &raw);
        if (status == ARCHIVE_EOF) {
            check_same_names(file, directory, local);
            return found;
        }
        if (status != ARCHIVE_OK && status != ARCHIVE_WARN) {
            refuse(file, "", "is damaged at entry #" + std::to_string(seen + 1) + " (" + handle.error_text() + ")");
        }
        if (seen >= k_max_zip_entries) {
            refuse(file, "",
                   "has more than the k_max_zip_entries limit of " + std::to_string(k_max_zip_entries) + " entries");
        }
        const char* path = libarchive().archive_entry_pathname(raw);
        if (path == nullptr) refuse(file, "", "has an entry without a name at #" + std::to_string(seen + 1));
        local.emplace_back(path);
        if (local.back() != member) continue;  // by exact name, as zipimport looks it up
        const bool is_directory = libarchive().archive_entry_filetype(raw) == AE_IFDIR;
        if (!detail::normalize_path(path, is_directory, names).problem.empty()) continue;
        if (is_directory || libarchive().archive_entry_filetype(raw) != AE_IFREG) {
            refuse(file, member, "is not a regular file in the zip");
        }
        // zipimport takes the last of two entries with one name; kernhub
        // refuses to guess which one a reader would take.
        if (found) refuse(file, member, "is in the zip twice");
        found = read_data(reader, file, member, max_bytes, cancel);
    }
}

}  // namespace kernhub::archive
