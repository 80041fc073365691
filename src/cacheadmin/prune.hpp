// `kernhub cache prune [--dry-run] [--keep-lock FILE]...` (docs/cache-format.md,
// "Cache management"): removes blobs no snapshot links, partial downloads no
// live writer holds, and snapshots no ref or kept lock names, while other
// processes fetch from and read the same cache.
#pragma once

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "cacheadmin/inventory.hpp"
#include "kernhub/manage.hpp"

namespace kernhub::cacheadmin {

// Nothing modified this recently is removed, as git gc spares young loose
// objects: a fetch writes a blob before it links it and links before it
// writes the ref, so its files are fresh until the ref names them.
inline constexpr std::chrono::hours k_prune_grace{1};

// Commits to keep although no ref names them, by repo folder name
// (kernels--org--name).
using KeptCommits = std::map<std::string, std::set<std::string>>;

struct PruneRequest {
    bool dry_run = false;
    // Blob locks exclude on this cache's filesystem (cache::flock_excludes)
    // and KERNHUB_NO_FLOCK is not set. Without them a partial download is
    // only taken for abandoned after cache::k_stale_partial_age.
    bool use_locks = true;
    // --partials (PruneOptions::partials): partial downloads and unpack
    // folders whose lock is free go at once, not after the grace periods.
    bool partials = false;
    KeptCommits keep;
    Clock::time_point now = Clock::now();
    // Checked between units of work (a repo, a snapshot, a batch of blobs,
    // a partial download): once set, prune_cache stops and returns what it
    // removed so far with PruneReport::interrupted set (prune_scanned throws
    // Error(interrupted)). Everything else is kept.
    const std::atomic<bool>* cancel = nullptr;
};

// The commits that cached variants' metadata.json name by commit id under
// "kernel-depends", by repo folder (docs/registry.md, "Kernel dependencies"): such a
// dependency has no ref, so prune_cache keeps them as it keeps a ref's.
// Every snapshot counts, not only the ones kept; unreadable or malformed
// metadata pins nothing.
KeptCommits dependency_pins(const std::filesystem::path& root);

// Error(internal) naming the path when something cannot be removed. Each
// repo is scanned right before it is pruned (visit_repos). Also keeps
// dependency_pins(root).
PruneReport prune_cache(const std::filesystem::path& root, const PruneRequest& request);
// prune_cache's work on a scan_cache taken earlier: the cache may have
// changed since, as it does under a prune that runs while others fetch
// (the tests place a fetch between the scan and the removal with it).
PruneReport prune_scanned(const std::vector<RepoScan>& repos, const PruneRequest& request);

// The commits a lock file pins: kernhub.lock, or the Python kernels
// library's kernels.lock in either format (lockfile::parse_lock). Error(not_found)
// when the file does not exist, Error(usage) when it is not a lock or is
// over lockfile::k_max_lock_bytes (lockfile::read_lock_file), and
// Error(interrupted) once *cancel is set while it is parsed.
KeptCommits locked_commits(const std::filesystem::path& lock_file, const std::atomic<bool>* cancel = nullptr);

}  // namespace kernhub::cacheadmin
