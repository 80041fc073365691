// What a cache root holds (docs/cache-format.md, "Cache management"): each
// repo folder's blobs, partial downloads, snapshot entries, refs and
// kernhub's variant records, read within fixed bounds and without following
// any symlink below the root. `cache ls`, `verify` and `prune` all start
// from this scan; a cache huggingface_hub wrote is read the same way.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cache/cache.hpp"
#include "common/repo.hpp"
#include "kernhub/manage.hpp"

namespace kernhub::cacheadmin {

namespace fs = std::filesystem;
using Clock = std::chrono::system_clock;

// Bounds on what one scan reads: directory entries in the whole root, folder
// nesting below a snapshot, refs/ or .kernhub/, and the length of a symlink
// target (longer targets are read as unreadable, never as a path; the
// links kernhub and huggingface_hub write are about a hundred bytes).
inline constexpr std::size_t k_max_cache_entries = 1000000;
inline constexpr std::size_t k_max_cache_depth = 32;
inline constexpr std::size_t k_max_link_bytes = 1024;

enum class EntryType { file, directory, symlink, other };

struct Entry {
    std::string name;  // relative to the folder scanned, '/'-separated
    EntryType type = EntryType::other;
    std::uint64_t size = 0;  // of the entry itself (lstat)
    Clock::time_point modified;
    std::string link;  // a symlink's target; empty when unreadable or over k_max_link_bytes
};

struct Snapshot {
    std::string commit;          // the folder name, 40 lowercase hex
    bool is_directory = false;   // false: a symlink or file sits at snapshots/<commit>
    std::vector<Entry> entries;  // everything below it, names relative to it
    Clock::time_point newest;    // latest modification of the folder or anything in it
};

struct Ref {
    std::string revision;
    std::string commit;   // empty when the file does not hold a commit id
    std::string problem;  // why it does not; empty when it does
};

// .kernhub/variants/<commit>/<variant>.json
struct Record {
    std::string commit;
    std::string variant;
    fs::path path;
};

struct RepoScan {
    fs::path folder;
    std::string folder_name;
    RepoType type = RepoType::kernel;
    std::string repo_id;
    std::vector<Entry> blobs;     // names that are etags: 40 or 64 lowercase hex
    std::vector<Entry> partials;  // <etag>.<anything>.incomplete
    // .kernhub/tmp/<entry>: an atomic write's temp file or an archive being
    // unpacked; one that outlived its process is left to prune.
    std::vector<Entry> temps;
    std::vector<Snapshot> snapshots;
    std::vector<Ref> refs;
    std::vector<Record> records;
    // .kernhub/partial/<commit>/, the variants loads hold in part
    // (docs/cache-format.md, "Partial variants"), read as a snapshot is:
    // `entries` are build/<variant>/... and the records <variant>.json.
    // Only through real .kernhub/ and .kernhub/partial/ folders.
    std::vector<Snapshot> partial_areas;
};

// Every kernels--org--name and models--org--name folder of the root, sorted
// by folder name; other folders (datasets, .locks) are left out. A missing
// root is an empty cache. Error(verification) naming the k_max_* limit when
// the cache holds more entries or deeper folders; Error(internal) when a
// folder cannot be read.
std::vector<RepoScan> scan_cache(const fs::path& root);
// scan_cache's walk, one repo at a time: each repo is scanned right before
// `visit` sees it, so a long run (prune over thousands of repos) reads each
// repo as it is when its turn comes, not as it was when the run started.
// Bounded as scan_cache; an exception from `visit` ends the walk.
void visit_repos(const fs::path& root, const std::function<void(RepoScan)>& visit);

// <root>/.kernhub-extract-*: unpack folders of `cache import`, named by
// archive::extract; one that outlived its process is a leftover. A missing
// root has none. Bounded as scan_cache.
std::vector<Entry> root_leftovers(const fs::path& root);
// The file bytes below a leftover (its own size for a file), counted over
// at most k_max_leftover_walk entries, never through a link.
inline constexpr std::size_t k_max_leftover_walk = 200000;
std::uint64_t leftover_bytes(const fs::path& path, const Entry& entry);

// Whether `path` is a folder and not a link to one (lstat).
bool is_real_directory(const fs::path& path);

// One snapshot, walked again (prune re-checks it right before removing it).
Snapshot scan_snapshot(const fs::path& snapshots_dir, const std::string& commit);
// The blob names every link below snapshots_dir points to, by the target's
// file name whatever its form, in every snapshot folder there now (prune
// reads this again right before it removes blobs), except the folders named
// in `skip` and the links named in `skip_links` ("<commit>/<relpath>").
// Bounded as scan_cache. The partial area's folders read the same way.
std::set<std::string> linked_blob_names(const fs::path& snapshots_dir, const std::set<std::string>& skip = {},
                                        const std::set<std::string>& skip_links = {});

// The etag that the link at `relpath` (relative to its commit folder) names
// when its target is exactly the relative link into the same repo's blobs/
// (cache::link_target of `area`); empty for any other target.
std::string linked_etag(const std::string& relpath, const std::string& target,
                        cache::LinkArea area = cache::LinkArea::snapshot);

// The variants of a partial area: those with a folder build/<variant>/ or
// a record <variant>.json there, each once, sorted.
std::vector<std::string> part_variants(const Snapshot& area);
// What cache ls and cache verify say of the variant's part in `area`
// (CachedPart), from the scan and the records.
CachedPart describe_part(const RepoScan& repo, const Snapshot& area, const std::string& variant);
// kernhub's complete record of the variant parses and every file it names
// is linked in the snapshot, as kernhub links, to a blob of the recorded
// size: the snapshot holds the variant whole.
bool variant_whole(const cache::RepoCache& cache, const std::string& commit, const std::string& variant);
// The files below `prefix` ("build/<variant>/") of the cache's listing of
// the commit: kernhub's copy of the hub's listing, else huggingface_hub's
// trees/<commit>.json; nullopt when neither is there and readable.
std::optional<std::vector<std::string>> listed_files(const cache::RepoCache& cache, const std::string& commit,
                                                     const std::string& prefix);

// A variant record's files, or nullopt when the record is missing or not
// one kernhub wrote (cache::RepoCache::read_variant_files).
using cache::RecordedFile;
std::optional<std::vector<RecordedFile>> read_record(const RepoScan& repo, const std::string& commit,
                                                     const std::string& variant);

// `kernhub cache ls`: repos, refs, commits, variants and sizes.
CacheListing list_cache(const fs::path& root);

}  // namespace kernhub::cacheadmin
