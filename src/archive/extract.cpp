// The reader: every entry passes the ExtractionPolicy before any byte of it
// is written, and is written below a fresh private directory through file
// descriptors that never follow a symlink (docs/cache-format.md, "Cache
// archives").
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "archive/archive.hpp"
#include "archive/detail.hpp"
#include "common/text.hpp"
#include "kernhub/error.hpp"

namespace kernhub::archive {

namespace {

using detail::libarchive;
using detail::refuse;
using detail::size_text;

class Fd {
public:
    explicit Fd(int fd = -1) : m_fd(fd) {}
    ~Fd() {
        if (m_fd >= 0) ::close(m_fd);
    }
    Fd(Fd&& other) noexcept : m_fd(other.m_fd) { other.m_fd = -1; }
    Fd& operator=(Fd&& other) noexcept {
        std::swap(m_fd, other.m_fd);
        return *this;
    }
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    int get() const noexcept { return m_fd; }
    int release() noexcept { return std::exchange(m_fd, -1); }

private:
    int m_fd;
};

[[noreturn]] void disk_error(const fs::path& path, int err) {
    throw Error(ErrorCode::internal, "cannot extract into " + printable(path.string()) + ": " + std::strerror(err) +
                                         "; check permissions and free space");
}

EntryType type_of(struct archive_entry* entry) {
    if (libarchive().archive_entry_hardlink(entry) != nullptr) return EntryType::hardlink;
    switch (libarchive().archive_entry_filetype(entry)) {
        case AE_IFREG:
            return EntryType::file;
        case AE_IFDIR:
            return EntryType::directory;
        case AE_IFLNK:
            return EntryType::symlink;
        case AE_IFCHR:
            return EntryType::character_device;
        case AE_IFBLK:
            return EntryType::block_device;
        case AE_IFIFO:
            return EntryType::fifo;
        case AE_IFSOCK:
            return EntryType::socket;
        default:
            return EntryType::unknown;
    }
}

// Removes a half-made extraction unless dismissed.
struct RemoveOnThrow {
    fs::path dir;
    ~RemoveOnThrow() {
        if (dir.empty()) return;
        std::error_code ec;
        fs::remove_all(dir, ec);
    }
};

// One extraction: the archive handle, the destination and the running
// counts the limits are checked against.
class Extraction {
public:
    Extraction(const fs::path& file, const ExtractionPolicy& policy, const std::atomic<bool>* cancel)
        : m_file(file), m_policy(policy), m_cancel(cancel), m_reader(detail::Handle::Kind::read) {}

    void run(int archive_fd, std::uint64_t archive_bytes, const fs::path& dest);
    std::vector<Entry> take_entries() { return std::move(m_entries); }
    std::uint64_t bytes() const { return m_total; }

private:
    void check_cancel() const {
        if (m_cancel != nullptr && m_cancel->load()) {
            throw Error(ErrorCode::interrupted, "extraction of " + printable(m_file.string()) + " was cancelled");
        }
    }
    bool next_entry(Entry& entry);
    void check_policy(const Entry& entry, struct archive_entry* raw) const;
    Fd open_parent(const Entry& entry, std::string& leaf) const;
    void write_file(const Entry& entry);
    void write_directory(const Entry& entry) const;
    void write_symlink(const Entry& entry) const;

    const fs::path& m_file;
    const ExtractionPolicy& m_policy;
    const std::atomic<bool>* m_cancel;
    detail::Handle m_reader;
    fs::path m_dest;
    Fd m_dest_fd;
    std::uint64_t m_output_limit = 0;
    std::uint64_t m_total = 0;
    std::vector<Entry> m_entries;
};

void Extraction::run(int archive_fd, std::uint64_t archive_bytes, const fs::path& dest) {
    struct archive* reader = m_reader.get();
    // Tar in any of its dialects, behind any compression libarchive decodes
    // in-process; the bidding looks at content, never at the file name.
    const detail::LibArchive& lib = libarchive();
    lib.archive_read_support_format_tar(reader);
    lib.archive_read_support_format_gnutar(reader);
    for (auto support : {lib.archive_read_support_filter_gzip, lib.archive_read_support_filter_bzip2,
                         lib.archive_read_support_filter_xz, lib.archive_read_support_filter_lzma,
                         lib.archive_read_support_filter_zstd}) {
        support(reader);
    }
    if (lib.archive_read_open_fd(reader, archive_fd, std::size_t{64} * 1024) != ARCHIVE_OK) {
        refuse(m_file, "", "is not a tar archive kernhub reads (" + m_reader.error_text() + ")");
    }
    m_dest = dest;
    m_dest_fd = Fd(::open(dest.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (m_dest_fd.get() < 0) disk_error(dest, errno);
    m_output_limit = m_policy.output_limit(archive_bytes);

    Entry entry;
    while (next_entry(entry)) {
        switch (entry.type) {
            case EntryType::file:
                write_file(entry);
                break;
            case EntryType::directory:
                write_directory(entry);
                break;
            case EntryType::symlink:
                write_symlink(entry);
                break;
            default:
                refuse(m_file, entry.path, std::string("is a ") + to_string(entry.type));
        }
        m_entries.push_back(std::move(entry));
    }
}

// The next entry that passed the policy, or false at the end of the archive.
bool Extraction::next_entry(Entry& entry) {
    for (;;) {
        check_cancel();
        struct archive_entry* raw = nullptr;
        int status = libarchive().archive_read_next_header(m_reader.get(), &raw);
        if (status == ARCHIVE_EOF) return false;
        const std::string position = "#" + std::to_string(m_entries.size() + 1);
        // ARCHIVE_WARN is a header read whole with a note, most often a name
        // that has no form in the current locale (a PAX UTF-8 name under C):
        // the UTF-8 form is taken below and the policy judges it.
        if (status != ARCHIVE_OK && status != ARCHIVE_WARN) {
            refuse(m_file, "",
                   "is damaged or not a tar archive at entry " + position + " (" + m_reader.error_text() + ")");
        }
        if (m_entries.size() >= m_policy.max_entries) {
            refuse(m_file, position,
                   "is one more than the max_entries limit of " + std::to_string(m_policy.max_entries));
        }
        // The UTF-8 name whatever the locale; the raw bytes when there is
        // none (a GNU tar name that is not UTF-8, which the caller's rule
        // may refuse by name).
        const char* path = libarchive().archive_entry_pathname_utf8(raw);
        if (path == nullptr) path = libarchive().archive_entry_pathname(raw);
        if (path == nullptr) refuse(m_file, position, "has a path that cannot be read");
        entry = Entry{};
        entry.type = type_of(raw);
        detail::NormalizedPath normalized = detail::normalize_path(path, entry.type == EntryType::directory, m_policy);
        if (!normalized.problem.empty()) refuse(m_file, path, normalized.problem);
        // tar -C dir -cf x . stores the top folder itself as "./": nothing to make.
        if (normalized.archive_root && entry.type == EntryType::directory) continue;
        if (normalized.archive_root) refuse(m_file, path, "is not a directory but names the archive's top");
        entry.path = normalized.path;
        entry.size = libarchive().archive_entry_size_is_set(raw)
                         ? static_cast<std::uint64_t>(libarchive().archive_entry_size(raw))
                         : 0;
        const char* link = entry.type == EntryType::hardlink  ? libarchive().archive_entry_hardlink(raw)
                           : entry.type == EntryType::symlink ? libarchive().archive_entry_symlink(raw)
                                                              : nullptr;
        if (link != nullptr) entry.link_target = link;
        check_policy(entry, raw);
        return true;
    }
}

void Extraction::check_policy(const Entry& entry, struct archive_entry* raw) const {
    switch (entry.type) {
        case EntryType::file:
            if (!m_policy.allow_files) refuse(m_file, entry.path, "is a regular file, which this archive may not hold");
            break;
        case EntryType::directory:
            if (!m_policy.allow_directories)
                refuse(m_file, entry.path, "is a directory, which this archive may not hold");
            break;
        case EntryType::symlink:
            if (!m_policy.allow_symlinks) {
                refuse(
                    m_file, entry.path,
                    "is a symbolic link (to " + quoted_name(entry.link_target) + "), which this archive may not hold");
            }
            break;
        case EntryType::hardlink:
            refuse(m_file, entry.path,
                   "is a hard link (to " + quoted_name(entry.link_target) + "); hard links are never extracted");
        default:
            refuse(m_file, entry.path,
                   std::string("is a ") + to_string(entry.type) +
                       (m_policy.allow_symlinks ? "; only regular files, directories and symbolic links are extracted"
                                                : "; only regular files and directories are extracted"));
    }
    if (entry.type == EntryType::file && libarchive().archive_entry_sparse_count(raw) > 0) {
        refuse(m_file, entry.path, "is a sparse file; sparse files are never extracted");
    }
    if (entry.type == EntryType::file && entry.size > m_policy.max_entry_bytes) {
        refuse(m_file, entry.path,
               "declares " + std::to_string(entry.size) + " bytes, over the max_entry_bytes limit of " +
                   size_text(m_policy.max_entry_bytes));
    }
    if (entry.type == EntryType::symlink) {
        if (!resolve_link(entry.path, entry.link_target)) {
            refuse(m_file, entry.path,
                   "is a symbolic link to " + quoted_name(entry.link_target) +
                       ", which is absolute or leads out of the archive");
        }
        if (m_policy.symlink_rule) {
            if (std::string why = m_policy.symlink_rule(entry); !why.empty()) refuse(m_file, entry.path, why);
        }
    }
    if (m_policy.entry_rule) {
        if (std::string why = m_policy.entry_rule(entry); !why.empty()) refuse(m_file, entry.path, why);
    }
}

// The folder that will hold the entry, opened by walking its parts from the
// destination with O_NOFOLLOW and creating missing ones: an earlier entry
// that made a part a symlink or a file stops the walk instead of redirecting
// the write.
Fd Extraction::open_parent(const Entry& entry, std::string& leaf) const {
    Fd current(::dup(m_dest_fd.get()));
    if (current.get() < 0) disk_error(m_dest, errno);
    std::size_t start = 0;
    for (;;) {
        std::size_t slash = entry.path.find('/', start);
        if (slash == std::string::npos) break;
        const std::string part = entry.path.substr(start, slash - start);
        const int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
        int fd = ::openat(current.get(), part.c_str(), flags);
        if (fd < 0 && errno == ENOENT) {
            if (::mkdirat(current.get(), part.c_str(), 0700) != 0 && errno != EEXIST) disk_error(m_dest, errno);
            fd = ::openat(current.get(), part.c_str(), flags);
        }
        if (fd < 0 && (errno == ELOOP || errno == ENOTDIR)) {
            refuse(m_file, entry.path,
                   "would be written through " + quoted_name(entry.path.substr(0, slash)) +
                       ", an earlier entry that is not a directory");
        }
        if (fd < 0) disk_error(m_dest / entry.path, errno);
        current = Fd(fd);
        start = slash + 1;
    }
    leaf = entry.path.substr(start);
    return current;
}

void Extraction::write_file(const Entry& entry) {
    std::string leaf;
    Fd parent = open_parent(entry, leaf);
    Fd out(::openat(parent.get(), leaf.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (out.get() < 0 && errno == EEXIST) refuse(m_file, entry.path, "appears more than once in the archive");
    if (out.get() < 0) disk_error(m_dest / entry.path, errno);
    std::uint64_t written = 0;
    for (;;) {
        check_cancel();
        const void* block = nullptr;
        std::size_t size = 0;
        la_int64_t offset = 0;
        int status = libarchive().archive_read_data_block(m_reader.get(), &block, &size, &offset);
        if (status == ARCHIVE_EOF) break;
        if (status != ARCHIVE_OK) refuse(m_file, entry.path, "is damaged (" + m_reader.error_text() + ")");
        if (offset < 0 || static_cast<std::uint64_t>(offset) != written) {
            refuse(m_file, entry.path, "has holes (a sparse file); sparse files are never extracted");
        }
        if (size > m_policy.max_entry_bytes - written) {
            refuse(m_file, entry.path,
                   "holds more than the max_entry_bytes limit of " + size_text(m_policy.max_entry_bytes));
        }
        if (size > m_policy.max_total_bytes - m_total) {
            refuse(m_file, entry.path,
                   "takes the archive past the max_total_bytes limit of " + size_text(m_policy.max_total_bytes));
        }
        if (size > m_output_limit - m_total) {
            refuse(m_file, entry.path,
                   "takes the archive past " + size_text(m_output_limit) + " extracted, the max_ratio limit (" +
                       std::to_string(m_policy.max_ratio) + " times the archive's size, at least ratio_floor_bytes = " +
                       size_text(m_policy.ratio_floor_bytes) + ")");
        }
        const char* cursor = static_cast<const char*>(block);
        for (std::size_t left = size; left > 0;) {
            ssize_t n = ::write(out.get(), cursor, left);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) disk_error(m_dest / entry.path, n < 0 ? errno : EIO);
            cursor += n;
            left -= static_cast<std::size_t>(n);
        }
        written += size;
        m_total += size;
    }
}

void Extraction::write_directory(const Entry& entry) const {
    std::string leaf;
    Fd parent = open_parent(entry, leaf);
    if (::mkdirat(parent.get(), leaf.c_str(), 0700) == 0) return;
    if (errno != EEXIST) disk_error(m_dest / entry.path, errno);
    struct stat st {};
    // Listed again, or made earlier as the parent of an entry: fine. Anything
    // else already under that name is a clash.
    if (::fstatat(parent.get(), leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode)) {
        refuse(m_file, entry.path, "is a directory, but an earlier entry has the same name");
    }
}

void Extraction::write_symlink(const Entry& entry) const {
    std::string leaf;
    Fd parent = open_parent(entry, leaf);
    if (::symlinkat(entry.link_target.c_str(), parent.get(), leaf.c_str()) == 0) return;
    if (errno == EEXIST) refuse(m_file, entry.path, "appears more than once in the archive");
    disk_error(m_dest / entry.path, errno);
}

}  // namespace

ExtractedTree::ExtractedTree(fs::path root, std::vector<Entry> entries, std::uint64_t bytes, int lock_fd)
    : m_root(std::move(root)), m_entries(std::move(entries)), m_bytes(bytes), m_lock_fd(lock_fd) {}

ExtractedTree::~ExtractedTree() {
    if (!m_root.empty()) {
        std::error_code ec;
        fs::remove_all(m_root, ec);  // never follows the symlinks inside
    }
    if (m_lock_fd >= 0) ::close(m_lock_fd);
}

ExtractedTree::ExtractedTree(ExtractedTree&& other) noexcept
    : m_root(std::move(other.m_root)),
      m_entries(std::move(other.m_entries)),
      m_bytes(other.m_bytes),
      m_lock_fd(other.m_lock_fd) {
    other.m_root.clear();
    other.m_lock_fd = -1;
}

int lock_abandoned_unpack_folder(const fs::path& folder) {
    Fd dir(::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (dir.get() < 0) return -1;
    while (::flock(dir.get(), LOCK_EX | LOCK_NB) != 0) {
        if (errno != EINTR) return -1;
    }
    return dir.release();
}

namespace {

// A new unpack folder in `parent`, locked (see ExtractedTree) before
// anything is written into it. A cleaner (prune --partials) can find the
// folder in the instant between mkdtemp and flock, take its lock and remove
// it: the open then fails (ENOENT), the flock finds it held (EWOULDBLOCK),
// or the folder, locked, has no link left; each time another is made.
std::pair<std::string, Fd> locked_unpack_folder(const fs::path& parent) {
    for (int attempt = 1;; ++attempt) {
        std::string path = (parent / ".kernhub-extract-XXXXXX").string();
        if (::mkdtemp(path.data()) == nullptr) disk_error(parent, errno);
        Fd dir(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        const int err = dir.get() < 0 ? errno : detail::lock_fresh_temp(dir.get());
        if (err == 0) return {path, std::move(dir)};
        const bool raced = detail::cleaner_raced(err);
        if (!raced) ::rmdir(path.c_str());
        if (!raced || attempt == detail::k_locked_temp_attempts) disk_error(path, err);
    }
}

}  // namespace

int detail::lock_fresh_temp(int fd) {
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) return errno;
    struct stat st {};
    if (::fstat(fd, &st) != 0) return errno;
    return st.st_nlink > 0 ? 0 : ENOENT;
}

namespace {}  // namespace

ExtractedTree extract(const fs::path& file, const fs::path& temp_parent, const ExtractionPolicy& policy,
                      const std::atomic<bool>* cancel) {
    // O_NONBLOCK: a FIFO given as the archive must not hang the open.
    Fd input(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
    if (input.get() < 0 && errno == ENOENT) {
        throw Error(ErrorCode::not_found, "archive " + printable(file.string()) + " does not exist; check the path");
    }
    if (input.get() < 0) {
        int err = errno;
        throw Error(ErrorCode::internal, "cannot read archive " + printable(file.string()) + ": " + std::strerror(err) +
                                             "; check permissions");
    }
    struct stat st {};
    if (::fstat(input.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
        throw Error(ErrorCode::usage,
                    "archive " + printable(file.string()) + " is not a regular file; pass a tar file");
    }
    auto [pattern, lock] = locked_unpack_folder(temp_parent);
    RemoveOnThrow guard{pattern};

    Extraction extraction(file, policy, cancel);
    extraction.run(input.get(), static_cast<std::uint64_t>(st.st_size), pattern);
    ExtractedTree tree(pattern, extraction.take_entries(), extraction.bytes(), lock.release());
    guard.dir.clear();
    return tree;
}

}  // namespace kernhub::archive
