// The reproducible writer: the same entries give the same bytes, whoever
// writes them and whenever (docs/cache-format.md, "Cache archives").
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <clocale>  // newlocale, uselocale (POSIX)
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <utility>

#include "archive/archive.hpp"
#include "archive/detail.hpp"
#include "common/text.hpp"
#include "kernhub/error.hpp"

namespace kernhub::archive {

Compression compression_for(const fs::path& file) {
    const std::string name = file.filename().string();
    auto ends_with = [&](const char* suffix) {
        std::size_t n = std::strlen(suffix);
        return name.size() > n && name.compare(name.size() - n, n, suffix) == 0;
    };
    if (ends_with(".tar.zst") || ends_with(".tzst")) return Compression::zstd;
    if (ends_with(".tar.gz") || ends_with(".tgz")) return Compression::gzip;
    if (ends_with(".tar.xz") || ends_with(".txz")) return Compression::xz;
    if (ends_with(".tar")) return Compression::none;
    throw Error(ErrorCode::usage, "cannot tell the compression of " + quoted_name(name) +
                                      " from its name; end it in .tar.zst, .tar.gz, .tar.xz or .tar");
}

namespace {

using detail::libarchive;

[[noreturn]] void write_error(const fs::path& path, int err) {
    throw Error(ErrorCode::internal, "cannot write " + printable(path.string()) + ": " + std::strerror(err) +
                                         "; check permissions and free space");
}

// The process's umask, from the "Umask:" line of /proc/self/status (Linux
// 4.7 and later). umask() cannot be read without being set, and a file
// another thread creates between setting and restoring it gets the wrong
// mode. nullopt where the line cannot be read.
std::optional<mode_t> process_umask() {
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line)) {
        if (line.rfind("Umask:", 0) != 0) continue;
        const char* digits = line.c_str() + 6;
        char* end = nullptr;
        const unsigned long mask = std::strtoul(digits, &end, 8);
        if (end == digits || mask > 0777) return std::nullopt;
        return static_cast<mode_t>(mask);
    }
    return std::nullopt;
}

// The mode of a new archive: what open(2) gives a file created with 0666,
// as any tool's output gets, so that an export of a cache holding private
// repos is only as readable as the user's umask lets files be. Where the
// umask cannot be read, 0600 (mkstemp's mode): a file too private is one
// chmod away from right, a file too open may have been read already.
mode_t archive_mode() {
    const std::optional<mode_t> mask = process_umask();
    return mask ? static_cast<mode_t>(0666 & ~*mask) : static_cast<mode_t>(0600);
}

// The archive being written, beside its target. Its descriptor holds
// flock(LOCK_EX) for the whole write, so the next export to the same target
// can tell a temporary a killed export left (lock free) from one a running
// export writes (remove_abandoned_temps). Unlinked before the lock goes.
struct TempFile {
    fs::path path;
    int fd = -1;
    TempFile() = default;
    TempFile(TempFile&& other) noexcept : path(std::move(other.path)), fd(std::exchange(other.fd, -1)) {
        other.path.clear();
    }
    TempFile(const TempFile&) = delete;
    TempFile& operator=(const TempFile&) = delete;
    TempFile& operator=(TempFile&&) = delete;
    ~TempFile() {
        if (!path.empty()) ::unlink(path.c_str());
        if (fd >= 0) ::close(fd);
    }
};

// Entries of the target's folder looked at for abandoned temporaries: a
// folder holding more is not searched further.
constexpr std::size_t k_max_temp_scan = 100000;

// Removes what killed exports to `file` left beside it: regular files named
// .NAME.XXXXXX (the temp names below) whose lock no process holds.
void remove_abandoned_temps(const fs::path& dir, const fs::path& file) {
    const std::string prefix = "." + file.filename().string() + ".";
    std::error_code ec;
    std::size_t seen = 0;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end && ++seen <= k_max_temp_scan; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (name.size() != prefix.size() + 6 || name.compare(0, prefix.size(), prefix) != 0) continue;
        const int fd = ::open(it->path().c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0) continue;
        struct stat st {};
        if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && ::flock(fd, LOCK_EX | LOCK_NB) == 0) {
            ::unlink(it->path().c_str());
        }
        ::close(fd);
    }
}

// A new temporary for `file`, locked before anything is written. A cleaner
// may take the lock between mkostemp and flock and unlink the empty file
// (the flock then finds it held, or the file has no link left); then
// another is made.
TempFile locked_temp(const fs::path& dir, const fs::path& file) {
    for (int attempt = 1;; ++attempt) {
        std::string pattern = (dir / ("." + file.filename().string() + ".XXXXXX")).string();
        TempFile temp;
        temp.fd = ::mkostemp(pattern.data(), O_CLOEXEC);
        if (temp.fd < 0) write_error(file, errno);
        temp.path = pattern;
        const int err = detail::lock_fresh_temp(temp.fd);
        if (err == 0) return temp;
        if (!detail::cleaner_raced(err) || attempt == detail::k_locked_temp_attempts) write_error(temp.path, err);
    }
}

class Writer {
public:
    Writer(const fs::path& file, int fd, Compression compression, const std::atomic<bool>* cancel)
        : m_file(file), m_cancel(cancel), m_handle(detail::Handle::Kind::write) {
        struct archive* out = m_handle.get();
        // pax only where ustar cannot hold a name, so short paths give plain
        // ustar headers; libarchive names its pax headers without a pid.
        check(libarchive().archive_write_set_format_pax_restricted(out));
        switch (compression) {
            case Compression::gzip:
                check(libarchive().archive_write_add_filter_gzip(out));
                // gzip headers carry the time of writing unless told not to.
                check(libarchive().archive_write_set_filter_option(out, "gzip", "timestamp", nullptr));
                break;
            case Compression::xz:
                check(libarchive().archive_write_add_filter_xz(out));
                break;
            case Compression::zstd:
                check(libarchive().archive_write_add_filter_zstd(out));
                break;
            case Compression::none:
                check(libarchive().archive_write_add_filter_none(out));
                break;
        }
        check(libarchive().archive_write_open_fd(out, fd));
    }

    std::uint64_t add(const WriteEntry& entry);
    void close() { check(libarchive().archive_write_close(m_handle.get())); }

private:
    void check(int status) const {
        if (status != ARCHIVE_OK) {
            throw Error(ErrorCode::internal, "cannot write archive " + printable(m_file.string()) + ": " +
                                                 m_handle.error_text() + "; check free space");
        }
    }
    void check_cancel() const {
        if (m_cancel != nullptr && m_cancel->load()) {
            throw Error(ErrorCode::interrupted, "writing " + printable(m_file.string()) + " was cancelled");
        }
    }
    std::uint64_t copy_file(struct archive_entry* header, const WriteEntry& entry);

    const fs::path& m_file;
    const std::atomic<bool>* m_cancel;
    detail::Handle m_handle;
};

using EntryPtr = std::unique_ptr<struct archive_entry, decltype(&archive_entry_free)>;

namespace {

// libarchive reads and writes names in the calling thread's locale, and
// its PAX writer fails (3.6: crashes) on a UTF-8 name under "C". This
// thread uses C.UTF-8 for ctype while a header is made, and nothing else
// changes: uselocale is per thread.
class Utf8Names {
public:
    Utf8Names() : m_locale(::newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(nullptr))) {
        if (m_locale != static_cast<locale_t>(nullptr)) m_previous = ::uselocale(m_locale);
    }
    ~Utf8Names() {
        if (m_locale == static_cast<locale_t>(nullptr)) return;
        ::uselocale(m_previous);
        ::freelocale(m_locale);
    }
    Utf8Names(const Utf8Names&) = delete;
    Utf8Names& operator=(const Utf8Names&) = delete;

private:
    locale_t m_locale;
    locale_t m_previous = static_cast<locale_t>(nullptr);
};

}  // namespace

std::uint64_t Writer::add(const WriteEntry& entry) {
    check_cancel();
    const Utf8Names utf8_names;
    const detail::LibArchive& lib = libarchive();
    EntryPtr header(lib.archive_entry_new(), lib.archive_entry_free);
    if (!header) throw Error(ErrorCode::internal, "libarchive could not allocate an entry; out of memory");
    // Names are UTF-8 (fetch keeps no other), whatever the locale: set as
    // such, the writer stores them in a PAX header.
    if (!is_utf8(entry.path)) {
        throw Error(ErrorCode::verification,
                    "cannot store the name " + quoted_name(entry.path) + " in an archive: it is not UTF-8");
    }
    libarchive().archive_entry_copy_pathname(header.get(), entry.path.c_str());
    libarchive().archive_entry_set_mtime(header.get(), 0, 0);
    libarchive().archive_entry_set_uid(header.get(), 0);
    libarchive().archive_entry_set_gid(header.get(), 0);
    switch (entry.type) {
        case EntryType::directory:
            libarchive().archive_entry_set_filetype(header.get(), AE_IFDIR);
            libarchive().archive_entry_set_perm(header.get(), 0755);
            check(libarchive().archive_write_header(m_handle.get(), header.get()));
            return 0;
        case EntryType::symlink:
            libarchive().archive_entry_set_filetype(header.get(), AE_IFLNK);
            libarchive().archive_entry_set_perm(header.get(), 0777);
            libarchive().archive_entry_copy_symlink(header.get(), entry.link_target.c_str());
            check(libarchive().archive_write_header(m_handle.get(), header.get()));
            return 0;
        case EntryType::file:
            return copy_file(header.get(), entry);
        default:
            break;
    }
    throw Error(ErrorCode::internal, "cannot archive " + quoted_name(entry.path) + " as a " + to_string(entry.type) +
                                         "; only files, directories and symbolic links are written");
}

std::uint64_t Writer::copy_file(struct archive_entry* header, const WriteEntry& entry) {
    const std::string source = printable(entry.source.string());
    int fd = ::open(entry.source.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) {
        int err = errno;
        throw Error(ErrorCode::internal, "cannot read " + source + ": " + std::strerror(err) + "; check permissions");
    }
    TempFile closer;  // closes fd; unlinks nothing
    closer.fd = fd;
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        throw Error(ErrorCode::internal, source + " is not a regular file; it cannot go into an archive");
    }
    const auto size = static_cast<std::uint64_t>(st.st_size);
    libarchive().archive_entry_set_filetype(header, AE_IFREG);
    libarchive().archive_entry_set_perm(header, entry.read_only ? 0444 : 0644);
    libarchive().archive_entry_set_size(header, static_cast<la_int64_t>(size));
    check(libarchive().archive_write_header(m_handle.get(), header));
    std::array<char, std::size_t{256} * 1024> buffer{};
    std::uint64_t copied = 0;
    for (;;) {
        check_cancel();
        ssize_t n = ::read(fd, buffer.data(), buffer.size());
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            int err = errno;
            throw Error(ErrorCode::internal, "cannot read " + source + ": " + std::strerror(err) + "; check the disk");
        }
        if (n == 0) break;
        copied += static_cast<std::uint64_t>(n);
        if (copied > size) break;
        if (libarchive().archive_write_data(m_handle.get(), buffer.data(), static_cast<std::size_t>(n)) != n)
            check(ARCHIVE_FATAL);
    }
    if (copied != size) {
        throw Error(ErrorCode::internal, source +
                                             " changed size while it was archived; stop whatever writes it and "
                                             "export again");
    }
    return size;
}

void check_entries(const fs::path& file, std::vector<WriteEntry>& entries) {
    std::sort(entries.begin(), entries.end(), [](const WriteEntry& a, const WriteEntry& b) { return a.path < b.path; });
    const ExtractionPolicy plain;
    for (std::size_t i = 0; i < entries.size(); ++i) {
        detail::NormalizedPath normalized = detail::normalize_path(entries[i].path, false, plain);
        bool clean = normalized.problem.empty() && !normalized.archive_root && normalized.path == entries[i].path;
        if (!clean || (i > 0 && entries[i - 1].path == entries[i].path)) {
            throw Error(ErrorCode::internal, "cannot write archive " + printable(file.string()) + ": entry " +
                                                 quoted_name(entries[i].path) +
                                                 " is not a plain relative path or appears twice; please report it");
        }
    }
}

}  // namespace

WriteStats write_archive(const fs::path& file, std::vector<WriteEntry> entries, const std::atomic<bool>* cancel) {
    WriteStats stats;
    stats.compression = compression_for(file);
    check_entries(file, entries);
    fs::path dir = file.parent_path().empty() ? fs::path(".") : file.parent_path();
    remove_abandoned_temps(dir, file);
    TempFile temp = locked_temp(dir, file);
    if (::fchmod(temp.fd, archive_mode()) != 0) write_error(temp.path, errno);
    {
        Writer writer(file, temp.fd, stats.compression, cancel);
        for (const auto& entry : entries) stats.bytes += writer.add(entry);
        writer.close();
    }
    stats.entries = entries.size();
    if (::fsync(temp.fd) != 0) write_error(temp.path, errno);
    if (::rename(temp.path.c_str(), file.c_str()) != 0) write_error(file, errno);
    temp.path.clear();
    int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd >= 0) {
        ::fsync(dir_fd);  // a filesystem that cannot sync a directory still renamed
        ::close(dir_fd);
    }
    return stats;
}

}  // namespace kernhub::archive
