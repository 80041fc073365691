// Tar archives (docs/cache-format.md, "Cache archives"): one reader that
// extracts whatever tar libarchive reads under one ExtractionPolicy, and one
// reproducible writer. The archive module is the only owner of libarchive.
//
// The reader is meant for hostile input: cache archives carried into an
// image today, kernels shipped as tarballs later. Every refusal is
// Error(verification) naming the archive, the entry and the limit, and a
// refused archive leaves nothing behind.
#pragma once

#include "kernhub/enums.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kernhub/error.hpp"

namespace kernhub::archive {

namespace fs = std::filesystem;

enum class EntryType { file, directory, symlink, hardlink, character_device, block_device, fifo, socket, unknown };

const char* to_string(EntryType type);

// An entry as the archive declares it. The path is normalized: a leading
// "./" and a directory's trailing '/' are dropped; it is relative, has no
// empty, "." or ".." part and fits the policy's length limits.
struct Entry {
    std::string path;
    EntryType type = EntryType::unknown;
    std::uint64_t size = 0;   // a file's declared size
    std::string link_target;  // a symlink's target or a hardlink's source, as stored
};

// Defaults of ExtractionPolicy. A caller with a layout of its own (cache
// import) narrows them; every limit has a name the errors quote.
inline constexpr std::uint64_t k_default_max_entries = 100'000;
inline constexpr std::uint64_t k_default_max_entry_bytes = 8ull << 30;
inline constexpr std::uint64_t k_default_max_total_bytes = 64ull << 30;
inline constexpr std::size_t k_default_max_path_bytes = 1024;
inline constexpr std::size_t k_default_max_name_bytes = 255;
inline constexpr std::uint64_t k_default_max_ratio = 20;
inline constexpr std::uint64_t k_default_ratio_floor_bytes = 512ull << 20;

// What an extraction may produce. One object holds every rule, so that each
// caller states its whole policy in one place.
struct ExtractionPolicy {
    // Entry types that may be extracted. Hardlinks, devices, FIFOs, sockets
    // and sparse files are never extracted, whatever the policy says.
    bool allow_files = true;
    bool allow_directories = true;
    bool allow_symlinks = false;

    // Decides about each symlink after the fixed checks (a relative target
    // that, resolved from the link's folder, stays inside the archive; see
    // resolve_link). Returns "" to accept or the reason to refuse. Unset:
    // the fixed checks alone decide.
    std::function<std::string(const Entry&)> symlink_rule;
    // Decides about each entry (its path, type and declared size) before
    // anything of it is written: a layout. "" accepts. Unset accepts all.
    std::function<std::string(const Entry&)> entry_rule;

    std::uint64_t max_entries = k_default_max_entries;
    std::uint64_t max_entry_bytes = k_default_max_entry_bytes;
    std::uint64_t max_total_bytes = k_default_max_total_bytes;
    std::size_t max_path_bytes = k_default_max_path_bytes;
    std::size_t max_name_bytes = k_default_max_name_bytes;
    // Bytes extracted may not exceed max(ratio_floor_bytes, max_ratio x the
    // archive's size on disk): a small archive that expands without end (a
    // compression bomb) stops there, a large honest one is not hindered.
    std::uint64_t max_ratio = k_default_max_ratio;
    std::uint64_t ratio_floor_bytes = k_default_ratio_floor_bytes;

    // The ratio limit for an archive of `archive_bytes` bytes.
    std::uint64_t output_limit(std::uint64_t archive_bytes) const;
};

// `target` of a symlink at `link_path`, resolved lexically from the link's
// folder: the archive-relative path it names, or nullopt when the target is
// absolute, empty or climbs above the archive's top.
std::optional<std::string> resolve_link(const std::string& link_path, const std::string& target);

// The Error every refusal is: Error(verification) naming the archive, the
// entry (may be empty) and why, saying that nothing was kept. For callers
// whose own rules (a layout, content checks) refuse an extracted archive.
Error refusal(const fs::path& file, const std::string& entry, const std::string& why);

// The extracted entries in a fresh private directory, removed with
// everything in it when the object is destroyed (unless released).
// An unpack folder's lock: extract() holds flock(LOCK_EX) on the folder
// itself from the moment it exists until ExtractedTree has removed it, so a
// cleaner (cache prune) that can take the same lock knows that the process
// which made the folder is gone (unpack_folder_abandoned).
class ExtractedTree {
public:
    ExtractedTree(fs::path root, std::vector<Entry> entries, std::uint64_t bytes, int lock_fd);
    ~ExtractedTree();
    ExtractedTree(ExtractedTree&& other) noexcept;
    ExtractedTree& operator=(ExtractedTree&&) = delete;
    ExtractedTree(const ExtractedTree&) = delete;
    ExtractedTree& operator=(const ExtractedTree&) = delete;

    const fs::path& root() const noexcept { return m_root; }
    // Every entry in archive order.
    const std::vector<Entry>& entries() const noexcept { return m_entries; }
    // File bytes extracted.
    std::uint64_t bytes() const noexcept { return m_bytes; }

private:
    fs::path m_root;
    std::vector<Entry> m_entries;
    std::uint64_t m_bytes = 0;
    int m_lock_fd = -1;  // the folder, flocked; closed after the folder is removed
};

// Whether an unpack folder that extract() made was left by a process that
// is gone: no one holds its lock. Returns a descriptor holding that lock
// (keep it while removing the folder), or -1 when a live process holds it
// or the folder cannot be opened. Only meaningful where flock excludes.
int lock_abandoned_unpack_folder(const fs::path& folder);

// Extracts the tar archive `file` (plain, gzip, bzip2, xz, lzma or zstd,
// recognised by content, not by name) into a new directory created inside
// `temp_parent` (which must exist). Files are written 0600, directories
// 0700, whatever modes the archive names; nothing is ever written through a
// symlink or an existing entry. Throws Error(verification) naming the
// archive, the entry and the limit for anything the policy refuses and for
// a damaged archive; Error(not_found) when `file` is missing; Error(usage)
// when it is not a regular file; Error(internal) when the disk refuses;
// Error(interrupted) when *cancel becomes true. On any throw nothing of the
// extraction is left behind.
ExtractedTree extract(const fs::path& file, const fs::path& temp_parent, const ExtractionPolicy& policy,
                      const std::atomic<bool>* cancel = nullptr);

// ---- one member of a zip ----------------------------------------------------

// Bounds on reading one member of a zip (the "zip" build layout of kernels
// 0.19, docs/kernels.md, "The zip build layout").
inline constexpr std::uint64_t k_max_zip_entries = 65'536;
// The central directory is read into memory to learn the names zipimport
// sees; 65,536 entries of ordinary names take a few MiB.
inline constexpr std::uint64_t k_max_zip_directory_bytes = 64u << 20;

// The bytes of the file `member` (a normalized relative path such as
// "_ops.py") inside the zip `file`, read in memory, never written to disk;
// nullopt when the zip has no such file. The zip is read through its
// central directory, as Python's zipimport reads it, and `member` is that
// exact name there (no "./" spelling). Error(verification) naming the zip,
// the member and the limit for a damaged zip, more than k_max_zip_entries
// entries, a central directory over k_max_zip_directory_bytes, names that
// differ between the central directory and the local headers, the member
// named twice, or a member larger
// than `max_bytes`; Error(interrupted) once *cancel is set.
std::optional<std::string> read_zip_member(const fs::path& file, const std::string& member, std::size_t max_bytes,
                                           const std::atomic<bool>* cancel = nullptr);

// ---- writer -----------------------------------------------------------------

using Compression = kernhub::Compression;  // kernhub/enums.hpp, with its to_string

// By the file name: .tar.zst/.tzst zstd, .tar.gz/.tgz gzip, .tar.xz/.txz
// xz, .tar none. Anything else is Error(usage) listing these.
Compression compression_for(const fs::path& file);

struct WriteEntry {
    std::string path;                  // in the archive: relative, '/'-separated
    EntryType type = EntryType::file;  // file, directory or symlink
    fs::path source;                   // file: where its bytes are read
    std::string link_target;           // symlink: the target, stored as given
    bool read_only = false;            // file: mode 0444 instead of 0644
};

struct WriteStats {
    std::size_t entries = 0;
    std::uint64_t bytes = 0;  // file content archived
    Compression compression = Compression::none;
};

// Writes a reproducible tar (pax, restricted to ustar where it suffices) to
// `file`: entries sorted by path, mtime 0, uid and gid 0, no user or group
// names, modes 0755 (directories), 0644 or 0444 (files), 0777 (symlinks), and
// no timestamp in a gzip header, so the same entries give the same bytes.
// Compression follows compression_for(file). The archive is written to a
// temp file beside `file`, fsynced and renamed over it; its mode is 0666
// less the process's umask, as for any file a program creates (0600 where
// the umask cannot be read). A source that is
// not a regular file, or changes size while read, is Error(internal)
// naming it; Error(interrupted) when *cancel becomes true.
WriteStats write_archive(const fs::path& file, std::vector<WriteEntry> entries,
                         const std::atomic<bool>* cancel = nullptr);

}  // namespace kernhub::archive
