// What CI image builders and operators use besides fetch and load: lock
// files, prewarming a cache from a lock, cache management, static mirrors
// and cache archives. The operations are methods of kernhub::Client
// (kernhub.hpp); these are their options and reports.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kernhub/enums.hpp"
#include "kernhub/signature.hpp"

namespace kernhub {

// ---- kernhub lock -----------------------------------------------------------

struct LockOptions {
    // Names whose pins are resolved again (cargo update -p NAME).
    std::vector<std::string> update;
    // Resolve every pin again (--update without names).
    bool update_all = false;
    // Compute the lock but write nothing (--check).
    bool check = false;
};

struct LockedKernel {
    std::string name;
    std::string repo_id;
    std::string revision;
    std::string commit;
    std::vector<std::string> variants;
    bool pin_kept = false;  // the commit came from the existing lock
    // Targets this kernel has no build for at its commit, recorded in the
    // lock as "missing_targets" (prewarm --target skips the kernel for them).
    std::vector<std::string> missing_targets;
    // The signature verified for the locked variants, when a policy applies.
    std::optional<SignatureInfo> signature;
    // Why the existing lock's pin does not describe its own commit (a bad
    // merge, a hand edit), naming the variant, file and field; empty when it
    // does. `lock` then resolved the kernel again (pin_kept false); with
    // LockOptions::check it did not, and LockReport::pins_disagree is set.
    std::string pin_problem;
};

struct LockReport {
    std::string path;      // the kernhub.lock
    std::string content;   // the document written (with check: the one that would be)
    bool changed = false;  // content differs from the file on disk, or there was none
    std::string diff;      // line diff from the old file to content, when changed
    std::vector<LockedKernel> kernels;
    std::uint64_t requests = 0;
    // With LockOptions::check: a kept pin does not describe its own commit
    // (LockedKernel::pin_problem says how); the lock is out of date.
    bool pins_disagree = false;
};

// ---- kernhub prewarm --------------------------------------------------------

struct PrewarmedKernel {
    std::string name;  // the lock's name (kernhub.lock) or repo id (kernels.lock)
    std::string repo_id;
    RepoType repo_type = RepoType::kernel;
    std::string revision;  // the branch, tag or "vN" the lock names; may be empty
    std::string commit;
    std::string variant;
    std::string path;         // the variant directory in the cache
    std::size_t files = 0;    // files of the variant
    std::size_t fetched = 0;  // of those, downloaded by this call
    std::uint64_t bytes_downloaded = 0;
    std::vector<std::string> refs;  // refs/<name> written by this call
};

struct PrewarmReport {
    std::string lock_file;
    // "<name>: <target>" for each --target the lock records the kernel has
    // no build for (`lock --target` wrote "missing_targets"): skipped, not
    // fetched. A target a kernel lacks that the lock does not mark is
    // Error(not_found) naming every such kernel.
    std::vector<std::string> missing_targets;
    LockFormat lock_format = LockFormat::kernhub_lock;
    std::vector<PrewarmedKernel> kernels;
    std::uint64_t bytes_downloaded = 0;
    std::uint64_t requests = 0;
};

// ---- kernhub cache ls|verify|prune|path -------------------------------------

// A variant held in part: the files a load fetched, linked under
// <repo folder>/.kernhub/partial/<commit>/build/<variant>/ until a fetch
// completes the variant (docs/cache-format.md, "Partial variants"). The
// files it lacks are not damage.
struct CachedPart {
    std::string folder;              // that folder, absolute
    std::vector<std::string> files;  // what is held there, relative to it, sorted
    // Files of the variant the cached listing of the commit names
    // (kernhub's, else huggingface_hub's); 0 when no listing is cached.
    std::size_t listed = 0;
    std::uint64_t size = 0;  // bytes of the blobs the files link
    // kernhub's partial record parses and every file it names is linked
    // there to a blob of the recorded size.
    bool recorded = false;
    // The snapshot holds the variant whole, with kernhub's record: no load
    // reads this part any more, and cache prune removes it.
    bool stale = false;
};

struct CachedVariant {
    std::string name;
    std::size_t files = 0;
    std::uint64_t size = 0;          // bytes of the files the snapshot links
    bool recorded = false;           // kernhub's record says complete and verified
    std::optional<CachedPart> part;  // what a load holds of it, if anything
};

struct CachedCommit {
    std::string commit;
    std::vector<std::string> refs;  // revisions pointing here
    std::vector<CachedVariant> variants;
    std::size_t files = 0;   // everything in the snapshot, build/ or not
    std::uint64_t size = 0;  // bytes of those files
    // False when the commit has no snapshot folder, only variants a load
    // holds in part (CachedVariant::part).
    bool snapshot = true;
};

struct CachedRepo {
    std::string repo_id;
    RepoType repo_type = RepoType::kernel;
    std::string folder;                       // absolute path of the repo folder
    std::map<std::string, std::string> refs;  // revision -> commit
    std::vector<CachedCommit> commits;        // one per snapshot
    std::size_t blobs = 0;
    std::size_t partials = 0;
    std::uint64_t size = 0;  // bytes under blobs/, partials included
};

struct CacheListing {
    std::string root;
    std::vector<CachedRepo> repos;
    std::uint64_t size = 0;
    // What killed commands left inside the root: `cache import` unpack
    // folders (<root>/.kernhub-extract-*) and each repo's temporary files
    // and unpack folders (<repo>/.kernhub/tmp/*). `cache prune` removes those
    // untouched for 24 hours, and with --partials at once the unpack
    // folders no live process holds. Not in `size`.
    std::size_t leftovers = 0;
    std::uint64_t leftover_bytes = 0;
};

struct CacheProblem {
    std::string path;     // the damaged file, absolute
    std::string problem;  // what is wrong with it
    bool repaired = false;
};

// A variant a load holds in part, as cache verify found it: its links and
// partial record were checked like the snapshot's, and the files it lacks
// are not damage.
struct HeldPart {
    std::string repo_id;
    RepoType repo_type = RepoType::kernel;
    std::string commit;
    std::string variant;
    CachedPart part;
};

struct CacheVerifyReport {
    std::string root;
    std::size_t blobs_checked = 0;
    std::size_t links_checked = 0;    // in snapshots and partial areas
    std::size_t records_checked = 0;  // kernhub's variant records, partial ones included
    std::vector<CacheProblem> problems;
    std::vector<HeldPart> parts;  // the variants held in part, damaged or not
    // Options::cancel stopped it: `problems` are what was found before it
    // stopped, and `repaired` says which of them were removed. A repair
    // removes the damaged variant records before anything else, so no
    // record names a damaged file at any instant of it.
    bool interrupted = false;
};

struct PruneOptions {
    bool dry_run = false;
    // Also remove at once, whatever their age, every partial download whose
    // blob lock is free and every unpack folder whose lock is free: what
    // killed or failed commands left, which a full disk may need back now.
    // Where file locks do not work, nothing is removed early.
    bool partials = false;
    // Lock files (kernhub.lock or kernels.lock) whose commits are kept even
    // when no ref points at them.
    std::vector<std::string> keep_locks;
};

struct PruneKept {
    std::string path;    // absolute
    std::string reason;  // why it stays although nothing references it
};

struct PruneReport {
    bool dry_run = false;
    std::vector<std::string> removed;  // absolute paths (removed, or to remove)
    std::uint64_t bytes = 0;           // freed, or to free
    std::vector<PruneKept> kept;       // unreferenced, but fresh or in use
    // Options::cancel stopped it between two entries: `removed` and `bytes`
    // are what went before it stopped; everything else is kept.
    bool interrupted = false;
};

// ---- kernhub cache export|import ------------------------------------------

struct ExportReport {
    std::string file;
    std::size_t entries = 0;
    std::uint64_t bytes = 0;                      // bytes of file content archived
    Compression compression = Compression::none;  // from the file name
    std::vector<std::string> repos;               // repo folders exported ("kernels--org--name")
};

struct ImportReport {
    std::string file;
    std::size_t entries = 0;         // entries in the archive
    std::size_t blobs = 0;           // blobs added (verified against their names)
    std::size_t links = 0;           // snapshot links added
    std::size_t refs = 0;            // refs written
    std::size_t side_files = 0;      // tree listings and variant records written
    std::size_t skipped = 0;         // entries already in the cache
    std::vector<std::string> repos;  // repo folders imported into
};

// ---- kernhub mirror ---------------------------------------------------------

struct MirrorOptions {
    std::string to;  // the static hub tree to write or add to
    // Also write an nginx server block for the tree to this file. With no
    // kernels named, only this is written, for the tree as it is.
    std::string nginx_conf;
    std::string listen = "127.0.0.1:8080";  // where that server block listens
};

struct MirroredKernel {
    std::string name;
    std::string repo_id;
    RepoType repo_type = RepoType::kernel;
    std::string revision;  // the branch, tag or vN the tree now maps to commit
    std::string commit;
    std::vector<std::string> variants;
    std::size_t files = 0;
    std::uint64_t bytes = 0;  // of those files
};

struct MirrorReport {
    std::string to;
    std::string nginx_conf;  // empty when none was written
    std::vector<MirroredKernel> kernels;
    // How the files got into the tree: hard links to cache blobs, copies
    // (the tree is on another filesystem), or already there.
    std::size_t files_linked = 0;
    std::size_t files_copied = 0;
    std::size_t files_unchanged = 0;
    std::uint64_t bytes_downloaded = 0;  // from the hub, into the cache
    std::uint64_t requests = 0;
};

// ---- kernhub verify ---------------------------------------------------------

struct VerifyReport {
    std::string name;
    std::string repo_id;
    std::string commit;
    std::string variant;
    std::string path;                        // the variant directory in the cache
    std::uint64_t files_checked = 0;         // files hashed against the digest and the hub's hashes
    bool digest_checked = false;             // the variant has a metadata.json digest and every file matched it
    std::optional<SignatureInfo> signature;  // nullopt: no policy applied
};

}  // namespace kernhub
