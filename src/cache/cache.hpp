// The on-disk cache in the huggingface_hub layout (docs/cache-format.md, "Cache layout").
// The store module owns the filesystem layout, atomic writes and locks.
//
//   <root>/CACHEDIR.TAG
//   <root>/.locks/<repo folder>/<etag>.lock
//   <root>/<kernels|models>--<org>--<name>/
//       blobs/<etag>                       read-only, verified content
//       blobs/<etag>.<random>.incomplete   a partial download, one per process; kept
//                                          when a run stops, continued by the next
//       snapshots/<commit>/<path>          relative symlink to blobs/<etag> (one ../ per
//                                          path part, plus one for <commit>)
//       refs/<revision>                    the commit id, written atomically
//       .kernhub/trees/<commit>.json       kernhub's copy of the hub listing
//       .kernhub/variants/<commit>/<variant>.json  record of a complete variant
//       .kernhub/partial/<commit>/build/<variant>/<relpath>  link to the blob of a file a load
//                                          fetched (one "../" more than a snapshot link)
//       .kernhub/partial/<commit>/<variant>.json  record of the files held there
//       .kernhub/refs/<encoded revision>.json  when refs/<revision> was last resolved on
//                                          the hub (KERNHUB_REF_TTL)
//       .kernhub/publisher.json            when the hub last said the repo's organisation is a
//                                          trusted kernel publisher
//       .kernhub/tmp/                      temp files for refs/ and snapshots/
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/process_mark.hpp"
#include "common/repo.hpp"

namespace kernhub::cache {

namespace fs = std::filesystem;

// Returns the value of an environment variable, or nullopt when unset.
// Tests pass their own lookup; production passes one over getenv.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
EnvLookup process_env();

// Root resolution order: explicit, KERNHUB_CACHE, KERNELS_CACHE, HF_HUB_CACHE,
// $HF_HOME/hub, $XDG_CACHE_HOME/huggingface/hub, $HOME/.cache/huggingface/hub.
// Empty values count as unset; a leading "~/" is expanded with HOME, as
// huggingface_hub's expanduser() does. Throws Error(usage) when nothing resolves.
fs::path resolve_cache_root(const std::string& explicit_dir, const EnvLookup& env);

// "kernels--org--name" or "models--org--name".
std::string repo_folder_name(RepoType type, const std::string& repo_id);

// The repo a folder name stands for, when repo_folder_name spells some repo
// exactly so; nullopt for anything else (datasets--, .locks, typos). Where
// "--" occurs more than once the first one separates org and name: any
// split names the same folder, which is all a reader of the cache needs.
struct RepoFolder {
    RepoType type = RepoType::kernel;
    std::string repo_id;
};
std::optional<RepoFolder> parse_repo_folder(const std::string& name);

// Writes `content` to `path` atomically: temp file in the same directory,
// fsync, rename, fsync of the directory. Creates parent directories.
// Throws Error(internal) naming the path on failure.
// `temp_dir` (same filesystem) holds the temp file instead of the target's
// directory, for directories whose readers must never see a stray temp
// (refs/ and snapshots/, which huggingface_hub scans).
// Durability::rename_only skips both fsyncs: the rename is still atomic for
// readers, but after a crash the file may be lost, empty or short. Only for
// side data whose loss or damage costs nothing but work redone (it must be
// parsed strictly and dropped when malformed): refs, listings, variant
// records, which are rebuilt from the hub (docs/cache-format.md,
// "Durability").
enum class Durability { fsync, rename_only };
void write_file_atomic(const fs::path& path, const std::string& content, const fs::path& temp_dir = {},
                       Durability durability = Durability::fsync);
// fsync of a directory, so that the names made in it survive a power loss
// (a filesystem that cannot sync directories counts as done, and so does a
// read-only or unreadable folder: a warm fetch of a read-only cache made no
// name there). Throws Error(internal) naming the directory.
void sync_directory(const fs::path& dir);

// Whole file as a string; nullopt when it does not exist. Error(internal)
// when it exists but cannot be read.
std::optional<std::string> read_file(const fs::path& path);

// The read under read_file, for callers that phrase their own errors, want
// bytes or cap the size (a path such as /dev/zero never ends). error is 0
// when `content` holds the whole file, else the errno that stopped the read,
// EFBIG once the file holds more than max_bytes; opened tells open()
// refusing (missing, not permitted) from a read failing after it (a
// directory, a failing disk). Only regular files are read: a directory is
// EISDIR, anything else (a FIFO, a device, a socket) EINVAL with
// not_regular set, and opening never waits for a FIFO's writer.
struct ReadStatus {
    int error = 0;
    bool opened = false;
    bool not_regular = false;
};
ReadStatus read_file_into(const fs::path& path, std::string& content, std::size_t max_bytes = SIZE_MAX);
ReadStatus read_file_into(const fs::path& path, std::vector<std::uint8_t>& content, std::size_t max_bytes = SIZE_MAX);

// A file of the cache that other tools and users write too (refs, records,
// listings): only a regular file, not through a symlink, at most max_bytes
// (`what` names the limit in the message). nullopt when absent;
// Error(verification) naming the path otherwise. Never blocks on a FIFO.
std::optional<std::string> read_cache_file(const fs::path& path, std::size_t max_bytes, const char* what);

// What to tell a user whose change at `refused` was refused with `err`;
// it follows "cannot <do what> <path>: <errno text>; " in a message. A
// refusal by permissions (EACCES, EPERM) usually means another user owns
// part of the cache (root, after one `sudo kernhub fetch`): when `refused`
// (if it exists) or the nearest folder above it that exists belongs to
// another user than this process's effective one, the advice names that
// entry and its owner, "<entry> is owned by root, not <you>", and, for a
// path in a cache (below a .locks or repo folder), the command that gives
// the whole cache back: "run: sudo chown -R <you> <cache root>" (or "sudo
// install -d -o <you> <cache root>" when the root is missing). Outside a
// cache `advice` follows the owner. Root, refused only where a file system
// refuses root (NFS with root squashing), is told which user to run
// kernhub as. Anything else: `advice` alone.
std::string refusal_advice(const fs::path& refused, int err, const std::string& advice);

// An exclusive advisory lock (flock) held for the object's lifetime.
class FileLock {
public:
    // Blocks until acquired. With `cancel`, the wait polls instead and throws
    // Error(interrupted) once *cancel becomes true. The lock file (and its
    // folder) is created when missing; one this user may not write (another
    // user's) is opened read-only, which locks as well. Error(internal) when
    // it can be neither created nor opened, with refusal_advice's words when
    // another user's entry is the reason.
    explicit FileLock(const fs::path& lock_path, const std::atomic<bool>* cancel = nullptr);
    ~FileLock();
    FileLock(FileLock&& other) noexcept;
    FileLock& operator=(FileLock&&) = delete;
    FileLock(const FileLock&) = delete;
    FileLock& operator=(const FileLock&) = delete;

    // A shared lock (LOCK_SH), blocking: many holders at once, none while an
    // exclusive holder has it. nullopt when the lock file can be neither
    // opened nor created (a cache this process may only read); the caller
    // then has nothing to exclude. The file is opened read-only when it
    // exists, so another user's lock file stops no one.
    // With `cancel`, the wait polls and throws Error(interrupted) once
    // *cancel becomes true.
    static std::optional<FileLock> shared(const fs::path& lock_path, const std::atomic<bool>* cancel = nullptr);

    // Takes the lock without waiting; nullopt while another open file
    // description holds it. create=false: a lock file that does not exist
    // counts as free (a writer creates it before it writes) and nothing is
    // created; the lock returned then holds nothing (held() is false).
    static std::optional<FileLock> try_acquire(const fs::path& lock_path, bool create = true);
    bool held() const noexcept { return m_fd >= 0; }

private:
    FileLock() = default;

    int m_fd = -1;
    // The process that took the lock (process_mark()). A child made by
    // fork() shares the lock with it (a flock belongs to the open file):
    // there, only the descriptor is closed, and the lock stays the
    // parent's.
    int m_process = process_mark();
};

// Whether flock() on the filesystem holding `root` really excludes: a second
// open file description of a locked file must be refused. Some network and
// parallel filesystems accept every flock() call without excluding anyone,
// which would let two processes write one partial download. Probed once per
// root per process; false when flock() fails outright (ENOLCK, ENOSYS).
bool flock_excludes(const fs::path& root);

// A blob being written: blobs/<etag>.<random>.incomplete. Nothing becomes
// visible under blobs/<etag> until commit(). An uncommitted IncompleteBlob
// leaves its file behind when destroyed, so a later run can continue the
// download from the bytes already on disk; discard() removes it.
class IncompleteBlob {
public:
    // Creates a new, empty partial file at temp_path (O_EXCL).
    IncompleteBlob(fs::path temp_path, fs::path final_path);
    // Reopens an existing partial file for appending; size() is its length.
    static IncompleteBlob reopen(fs::path temp_path, fs::path final_path);
    ~IncompleteBlob();
    IncompleteBlob(IncompleteBlob&& other) noexcept;
    IncompleteBlob& operator=(IncompleteBlob&&) = delete;
    IncompleteBlob(const IncompleteBlob&) = delete;
    IncompleteBlob& operator=(const IncompleteBlob&) = delete;

    void write(const void* data, std::size_t size);
    std::uint64_t size() const noexcept { return m_size; }
    // Drops everything written so far (a restarted download).
    void restart();
    // fsync, chmod 0444, rename to the final path, fsync the directory.
    // sync_directory=false leaves the directory's fsync to the caller, who
    // makes one for a whole batch of blobs (sync_directory()) before anything
    // that depends on the names surviving a power loss is written.
    void commit(bool sync_directory = true);
    // Starts writing the bytes written so far back to disk without waiting
    // (Linux sync_file_range), so that commit()'s fsync has little left to
    // do. Safe to call from another thread than write(): only the
    // descriptor is used. Best effort.
    void start_writeback(std::uint64_t offset, std::uint64_t length) const noexcept;
    // Reads `size` bytes at `offset` back from the partial file (another
    // thread may be appending). Returns 0 or an errno; EIO for a short read.
    int read_at(std::uint64_t offset, void* data, std::size_t size) const noexcept;
    // Removes the partial file: its bytes are known to be wrong.
    void discard() noexcept;
    const fs::path& temp_path() const noexcept { return m_temp; }

private:
    IncompleteBlob() = default;

    // Throws Error(internal) in a process other than the one that opened
    // the file: a child made by fork() shares the parent's descriptor and
    // its file offset, and must not write, cut, remove or rename the file
    // the parent is writing.
    void check_owner(const char* what) const;

    fs::path m_temp;
    fs::path m_final;
    int m_fd = -1;
    std::uint64_t m_size = 0;
    bool m_committed = false;
    int m_process = process_mark();  // the process that opened the file
};

// The largest tree listing read from the cache (kernhub's or
// huggingface_hub's), variant record and ref.
inline constexpr std::size_t k_max_listing_bytes = 64u << 20;
inline constexpr std::size_t k_max_record_bytes = 16u << 20;
inline constexpr std::size_t k_max_ref_bytes = 4u << 10;
// One file of huggingface_hub's listing of a commit (trees/<commit>.json,
// format_version 1): its size, git blob id and, for an LFS file, SHA-256.
struct HfTreeFile {
    std::string path;
    std::uint64_t size = 0;
    std::string blob_id;
    std::string lfs_sha256;  // empty for a plain file
};

// The files of such a listing whose path starts with `prefix` ("build/"),
// or every file for an empty prefix. `other_format`: JSON that is no
// format_version 1 listing (huggingface_hub ignores those too);
// `malformed`: not JSON, a key twice (readers would differ on its value), or
// a format_version 1 listing out of shape. Read strictly and linearly
// (hf_tree.cpp).
struct HfTree {
    enum class Status { ok, other_format, malformed };
    Status status = Status::malformed;
    std::vector<HfTreeFile> files;
};
HfTree parse_hf_tree(const std::string& text, const std::string& prefix);

// A trusted-publisher answer kept with a repo (.kernhub/publisher.json).
struct PublisherRecord {
    std::string endpoint;         // the hub that answered, as configured
    std::string organization;     // the ORG of ORG/REPO
    std::int64_t checked_at = 0;  // Unix seconds
};
inline constexpr std::size_t k_max_publisher_bytes = 4u << 10;
// How long a fetch uses a kept answer without asking the hub again.
inline constexpr std::int64_t k_publisher_ttl_seconds = std::int64_t{24} * 60 * 60;

// A ref resolution file (.kernhub/refs/): a commit id and a number.
inline constexpr std::size_t k_max_ref_resolution_bytes = 1u << 10;

// Partials of one blob untouched for this long belong to no live download,
// even on a filesystem without working locks: they are removed.
inline constexpr std::chrono::hours k_stale_partial_age{24};

// One file of a complete variant, as its record lists it.
struct RecordedFile {
    std::string path;  // relative to the variant directory, never empty
    std::uint64_t size = 0;
    std::string sha256;
    // For a file unpacked from an archive of the variant (its blob is named
    // by this SHA-256): the archive's path, relative to the variant
    // directory. Empty for a file the hub lists.
    std::string archive;
};

// A signature verified when the variant was recorded (docs/trust.md, "Signatures"):
// who signed it and when the log took the entry, and which trusted root and
// policy it was checked against, so that a changed root or policy means
// "verify again".
struct RecordedSignature {
    std::string identity;
    std::string issuer;
    std::string repository;
    std::int64_t log_time = 0;
    std::int64_t log_index = 0;
    std::string root_sha256;    // of the trusted_root.json document
    std::string policy_digest;  // fetch::policy_digest() of the policy applied
};

struct VariantRecord {
    std::vector<RecordedFile> files;
    std::optional<RecordedSignature> signature;
};

// When this cache last asked the hub what a revision is
// (.kernhub/refs/<encoded revision>.json): the commit the hub answered and
// the time the question was sent, in Unix seconds (docs/configuration.md,
// "Resolving branches: KERNHUB_REF_TTL").
struct RefResolution {
    std::string commit;
    std::int64_t resolved_at = 0;
};

// The file name a revision's resolution is kept under: every byte outside
// [A-Za-z0-9._-] as %XX (so '/' and '%' too), then ".json"; one path part,
// never "." or "..". nullopt when that name would be longer than a file name
// may be (such a revision is simply resolved every time).
std::optional<std::string> ref_resolution_name(const std::string& revision);

// Where a variant's files are linked (docs/cache-format.md, "Partial
// variants"): the snapshot, which huggingface_hub and the kernels library
// read and which only ever holds whole variants once recorded, or kernhub's
// partial area under .kernhub/partial/, for the files a load reads.
enum class LinkArea { snapshot, partial };

class RepoCache {
public:
    RepoCache(fs::path root, RepoType type, const std::string& repo_id);

    const fs::path& root() const noexcept { return m_root; }
    const fs::path& folder() const noexcept { return m_folder; }
    fs::path blob_path(const std::string& etag) const;
    fs::path snapshot_dir(const std::string& commit) const;
    // Where temp files for refs/ and snapshots/ are staged before rename.
    fs::path staging_dir() const { return m_folder / ".kernhub" / "tmp"; }
    fs::path snapshot_path(const std::string& commit, const std::string& relpath) const;
    // .kernhub/partial/<commit>: the partial area's counterpart of snapshot_dir.
    fs::path partial_dir(const std::string& commit) const;
    // snapshot_dir or partial_dir, and the path of `relpath` below it.
    fs::path link_dir(LinkArea area, const std::string& commit) const;
    fs::path link_path(LinkArea area, const std::string& commit, const std::string& relpath) const;

    // refs/<revision>; nullopt when absent or not holding a commit id (so a
    // damaged ref is simply resolved again). A revision containing '/' maps to
    // nested folders as huggingface_hub does; empty, "." or ".." parts and a
    // leading '/' throw Error(usage).
    std::optional<std::string> read_ref(const std::string& revision) const;
    // Durability::rename_only: see write_file_atomic (a ref lost to a power
    // loss is resolved again).
    void write_ref(const std::string& revision, const std::string& commit,
                   Durability durability = Durability::fsync) const;
    // .kernhub/refs/<ref_resolution_name(revision)>. Reading gives nullopt
    // when the file is absent or is not exactly what kernhub writes (a link,
    // over k_max_ref_resolution_bytes, malformed JSON, a field missing or of
    // the wrong kind, not a commit id): a bad file only costs a request.
    // Error(usage) for an invalid revision, as read_ref. Writing replaces
    // the file atomically through staging_dir() but without fsync
    // (Durability::rename_only); nothing is written for a revision without
    // a resolution name.
    std::optional<RefResolution> read_ref_resolution(const std::string& revision) const;
    void write_ref_resolution(const std::string& revision, const RefResolution& resolution) const;
    // .kernhub/publisher.json: the hub (endpoint) last said, at checked_at,
    // that the repo's organisation is a trusted kernel publisher (docs/trust.md,
    // "Trusted publishers"). Read and written as a ref resolution is: a bad
    // file reads as nullopt and costs one request; no fsync.
    fs::path publisher_path() const { return m_folder / ".kernhub" / "publisher.json"; }
    std::optional<PublisherRecord> read_publisher() const;
    void write_publisher(const PublisherRecord& record) const;

    bool has_blob(const std::string& etag) const;
    // Lock for one blob: <root>/.locks/<folder>/<etag>.lock, the file
    // huggingface_hub locks for the same blob.
    FileLock lock_blob(const std::string& etag, const std::atomic<bool>* cancel = nullptr) const;
    // FileLock::try_acquire on the same file.
    std::optional<FileLock> try_lock_blob(const std::string& etag, bool create = true) const;
    // The repo's snapshot lock, <root>/.locks/<folder>/kernhub-snapshots.lock:
    // prune holds it exclusively while it decides about and removes a
    // snapshot; claim_snapshot holds it shared.
    FileLock lock_snapshots(const std::atomic<bool>* cancel = nullptr) const;
    // Marks snapshots/<commit> as in use now, before a process names it in a
    // ref or hands its path to a caller: its folder's time is set to now,
    // under the snapshot lock held shared, so a prune running meanwhile
    // either removed it before (the caller then finds it missing and fetches
    // it again) or finds it fresh and keeps it (k_prune_grace). False when
    // there is no such folder. Where this process cannot write the cache
    // (another user's, read-only), nothing is changed: no prune of this
    // user runs there.
    // A wait for the lock ends with Error(interrupted) once *cancel is set;
    // a lock that cannot be taken at all (no usable .locks, flock refused)
    // is done without, as where locks do not work.
    bool claim_snapshot(const std::string& commit, const std::atomic<bool>* cancel = nullptr) const;
    // The repo's partial-area lock, <root>/.locks/<folder>/kernhub-partial.lock
    // (docs/cache-format.md, "Partial variants"). A load holds it shared
    // (hold_partial) from before it reads the complete record until it has
    // opened what it loaded; whoever removes anything under .kernhub/partial/
    // (a fetch that completed a variant, cache prune) holds it exclusively
    // (try_lock_partial), so a load never finds its files or folders gone
    // under it, and no folder is removed while a load is making it.
    // hold_partial: nullopt where the lock cannot be used at all (a cache
    // this process may only read, a .locks it cannot use), as
    // claim_snapshot; a wait ends with Error(interrupted) once *cancel is set.
    std::optional<FileLock> hold_partial(const std::atomic<bool>* cancel = nullptr) const;
    // Exclusive without waiting: nullopt while a load holds it. As
    // FileLock::try_acquire: with create=false a missing lock file counts
    // as free (held() is false), and Error(internal) where the lock cannot
    // be had at all.
    std::optional<FileLock> try_lock_partial(bool create = true) const;
    // A new partial file for the blob. Creates blobs/ (and CACHEDIR.TAG at
    // the root) if needed.
    IncompleteBlob begin_blob(const std::string& etag) const;
    // The partial file to download the blob into. adopt (only while holding
    // the blob's lock, on a filesystem where flock_excludes()): the largest
    // existing partial of the blob is reopened and the other partials of it,
    // left by dead processes, are removed. Otherwise a new partial, and
    // partials of the blob older than k_stale_partial_age are removed.
    IncompleteBlob open_partial(const std::string& etag, bool adopt) const;
    // Moves `verified`, a file on the cache's filesystem whose content was
    // checked against `etag`, to blobs/<etag>: fsync, mode 0444, rename,
    // directory fsync (blobs/ and CACHEDIR.TAG made if needed). Returns
    // false, leaving `verified` alone, when blobs/<etag> already exists. Call
    // it while holding the blob's lock.
    bool adopt_blob(const std::string& etag, const fs::path& verified) const;
    // Removes blobs/<etag> (a blob that failed verification). Call it while
    // holding the blob's lock.
    void remove_blob(const std::string& etag) const;

    // snapshots/<commit>/<relpath> -> relative symlink to the blob, replaced
    // atomically (temp symlink + rename). The blob must exist. A link that
    // already points there is left alone, so a read-only cache needs no write.
    // A folder on the way that is a symlink is removed and made a real folder.
    // sync_directory=false leaves the fsync of the link's folder to the
    // caller (see IncompleteBlob::commit).
    // With LinkArea::partial the same is done under .kernhub/partial/.
    void link_snapshot(const std::string& commit, const std::string& relpath, const std::string& etag,
                       bool sync_directory = true, LinkArea area = LinkArea::snapshot) const;
    // True when the snapshot entry exists and resolves to an existing file.
    bool snapshot_complete(const std::string& commit, const std::string& relpath) const;
    // True when snapshots/<commit>/<relpath> is exactly the relative link
    // kernhub writes to blobs/<etag>, that blob is a regular file (not a
    // symlink) of `size` bytes, and every folder on the way is a real one
    // (snapshot_folders_real): nothing on the way leads out of the repo folder.
    bool snapshot_links_blob(const std::string& commit, const std::string& relpath, const std::string& etag,
                             std::uint64_t size, LinkArea area = LinkArea::snapshot) const;
    // True when snapshots/, snapshots/<commit>, every folder of relpath
    // above its last part and blobs/ are real folders, not symlinks (for
    // the partial area: .kernhub/, .kernhub/partial/, its <commit> and
    // the folders of relpath).
    bool snapshot_folders_real(const std::string& commit, const std::string& relpath,
                               LinkArea area = LinkArea::snapshot) const;
    // Removes a link (or anything but a folder) at blobs/, refs/, .kernhub/
    // or .kernhub/{tmp,trees,variants,refs}: the link goes, never what it points
    // to, and the folder is made again when next written. A fetch calls it
    // first, so nothing is read or written through such a link (offline,
    // blobs that were only reachable through it count as missing).
    void unlink_linked_folders() const;
    // The etag of the blob snapshots/<commit>/<relpath> links to, when the
    // link is exactly the one kernhub writes (snapshot_link_target) and the
    // folders on the way are real; nullopt otherwise.
    std::optional<std::string> linked_blob(const std::string& commit, const std::string& relpath,
                                           LinkArea area = LinkArea::snapshot) const;

    // Regular files reachable under snapshots/<commit>/<subdir>, as written by
    // kernhub or huggingface_hub: the repo-relative path, the blob name the
    // symlink points to (empty when the entry is not a link into blobs/) and
    // the size. Empty when the folder does not exist.
    struct SnapshotFile {
        std::string relpath;
        std::string etag;
        std::uint64_t size = 0;
    };
    std::vector<SnapshotFile> list_snapshot(const std::string& commit, const std::string& subdir) const;

    // kernhub side data (see the layout above); nullopt when absent. Variant
    // names are [A-Za-z0-9._+-] not starting with '.', else Error(usage).
    // The listings are read up to `max_bytes` (the listing cap in force).
    std::optional<std::string> read_tree(const std::string& commit, std::size_t max_bytes = k_max_listing_bytes) const;
    // Side data is written without fsync (Durability::rename_only):
    // it is rebuilt from the hub when a power loss drops it.
    void write_tree(const std::string& commit, const std::string& json) const;
    // Removes kernhub's copy of the listing (absent is fine).
    void remove_tree(const std::string& commit) const;
    // Whether kernhub's copy of the listing is on disk (one lstat).
    bool has_tree(const std::string& commit) const;
    // huggingface_hub's listing of a commit, <folder>/trees/<commit>.json;
    // nullopt when absent. kernhub only reads it: a listing that lacks files
    // would break huggingface_hub's later online use of the cache.
    std::optional<std::string> read_hf_tree(const std::string& commit,
                                            std::size_t max_bytes = k_max_listing_bytes) const;
    std::optional<std::string> read_variant_record(const std::string& commit, const std::string& variant,
                                                   LinkArea area = LinkArea::snapshot) const;
    void write_variant_record(const std::string& commit, const std::string& variant, const std::string& json,
                              LinkArea area = LinkArea::snapshot) const;
    // The same record as the files it lists (variant_record.cpp holds the
    // format). Reading gives nullopt when the record is absent or is not one
    // kernhub wrote (a link, over k_max_record_bytes, malformed, an invalid
    // variant name); Error(internal) only when it cannot be read at all.
    std::optional<std::vector<RecordedFile>> read_variant_files(const std::string& commit,
                                                                const std::string& variant) const;
    // The files and the signature; a malformed signature part is left out
    // (the signature is then verified again), not the whole record.
    // LinkArea::partial: the record of the files held in the partial area
    // (.kernhub/partial/<commit>/<variant>.json), in the same format.
    std::optional<VariantRecord> read_variant(const std::string& commit, const std::string& variant,
                                              LinkArea area = LinkArea::snapshot) const;
    void write_variant_files(const std::string& commit, const std::string& variant,
                             const std::vector<RecordedFile>& files,
                             const std::optional<RecordedSignature>& signature = std::nullopt,
                             LinkArea area = LinkArea::snapshot) const;
    // Removes the partial area's record of the variant, then its links and
    // the folders they leave empty, .kernhub/partial/<commit>/ and
    // .kernhub/partial/ included (absent is fine): once the complete record
    // vouches for the variant, the partial area has nothing left to say.
    // Never follows a link (remove_beneath). Call it while holding
    // try_lock_partial().
    void remove_partial_variant(const std::string& commit, const std::string& variant) const;
    // rmdir of .kernhub/partial/<commit>/build, .kernhub/partial/<commit>
    // and .kernhub/partial, each only when empty, stopping at the first
    // that is not. Under try_lock_partial(), as remove_partial_variant.
    void remove_empty_partial_folders(const std::string& commit) const;

private:
    fs::path m_root;
    fs::path m_folder;
    std::string m_folder_name;
};

// The target of the snapshot link for `relpath` (relative to the commit
// folder): one "../" per part of relpath plus one for the commit folder,
// then "blobs/<etag>". The only link target kernhub writes or accepts.
std::string snapshot_link_target(const std::string& relpath, const std::string& etag);
// The target of a link in `area`: snapshot_link_target, with one more "../"
// in the partial area, which lies one folder deeper (.kernhub/partial/).
std::string link_target(LinkArea area, const std::string& relpath, const std::string& etag);

// Rejects relative paths that are absolute, empty, contain "." / ".." parts
// or NUL: Error(verification) naming the path. Hub-provided paths pass
// through this before touching the filesystem.
void check_relative_path(const std::string& relpath);

// Hub-provided ids that become path parts. An etag is 40 (git blob sha1) or
// 64 (LFS sha256) lowercase hex characters, a commit 40 (SHA-1) or 64
// (SHA-256). Otherwise
// Error(verification, "hub sent an invalid etag|commit '<value>'...").
// RepoCache methods call these on every etag and commit they receive.
void check_etag(const std::string& etag);
// The deepest path kernhub keeps in a snapshot (parts, build/<variant>/
// included): the cache commands walk at most k_max_cache_depth folders.
inline constexpr std::size_t k_max_path_parts = 24;
// Why kernhub would not keep a file at `relpath` (a safe relative path as
// check_relative_path wants), or "" when it would: not UTF-8, a control
// character (C0 or DEL), a part over 255 bytes, or more than
// k_max_path_parts parts. Such a name could not be recorded, shown or
// walked again later, so a listing or an archive naming one is refused.
std::string path_name_problem(const std::string& relpath);

// Removes base/relative (a file, a link or a whole folder) without following
// a link anywhere: base is opened with O_NOFOLLOW, each folder below it
// relative to its parent, so a folder swapped for a link meanwhile is not
// entered. A missing entry is fine. Error(internal) when it cannot.
void remove_beneath(const fs::path& base, const fs::path& relative);
void check_commit(const std::string& commit);
// A revision as refs/ holds it: no empty, "." or ".." part, no NUL;
// Error(usage) otherwise.
void check_revision(const std::string& revision);
// The same rules as tests, for names read back from a cache: an etag, and a
// variant name (the rule RepoCache applies before a variant becomes a file
// name).
bool is_etag(const std::string& name);
bool is_variant_name(const std::string& name);
// Python bytecode (*.pyc, anything under a __pycache__ folder): what a
// publisher may leave in a variant and what Python writes beside a package
// it imports, in the snapshot too. The kernels library leaves it out of
// its variant hash, no digest covers it, and kernhub neither fetches,
// exports nor counts it as part of a variant. `relpath` is relative to the
// variant directory (or to any folder above the bytecode).
bool is_python_bytecode(const std::string& relpath);

}  // namespace kernhub::cache
