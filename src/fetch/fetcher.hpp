// The fetch pipeline for one kernel: revision -> commit -> listing ->
// variant choice -> verified download into the cache -> record. Composes the
// hub client, the store, the digests and the variant selection.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cache/cache.hpp"
#include "hub/hub_client.hpp"
#include "kernhub/events.hpp"
#include "select/variant.hpp"
#include "sigstore/sigstore.hpp"

namespace kernhub::fetch {

struct Expectation;
struct FileJob;
struct MetadataDigest;

// How long a fetch that completed a variant waits for the loads reading its
// partial area before it removes that area (Fetcher::clear_partial); past
// it the area stays for a later fetch or cache prune.
inline constexpr std::chrono::seconds k_partial_clear_wait{10};

// Something that must have passed before any file of a repo is requested,
// started earlier on a thread of its own (FetchRequest::gate). Thread-safe;
// pass() may be called any number of times.
class Gate {
public:
    virtual ~Gate() = default;
    // Waits for the check; rethrows its failure.
    virtual void pass() = 0;
};

// What a lock file pins for one variant (docs/ci-images.md, "Locks and
// prewarming").
struct FilePin {
    std::uint64_t size = 0;
    std::string sha256;
};
struct VariantPins {
    // "sha256-<hex>", the kernels library's git_lfs_concat hash over the
    // listing; empty when the lock has none.
    std::string hash;
    // relpath -> size and SHA-256; nullopt when the lock pins no files.
    std::optional<std::map<std::string, FilePin>> files;
};

// Caps on unpacking a variant's archive (docs/cache-format.md, "Archive
// variants"); each names the setting that raises it.
struct ArchiveLimits {
    // File bytes unpacked from one archive; 0: max(ratio floor, ratio x the
    // archive's size), archive::k_default_ratio_floor_bytes and
    // archive::k_default_max_ratio (KERNHUB_ARCHIVE_MAX_BYTES).
    std::uint64_t max_bytes = 0;
    std::uint64_t max_entries = 100'000;  // KERNHUB_ARCHIVE_MAX_ENTRIES
    std::size_t max_path_bytes = 1024;    // KERNHUB_ARCHIVE_MAX_PATH
};

// A signature policy applies to the kernel (docs/trust.md, "Signatures"): the
// variant's metadata.json.sigstore must verify against `policy` and `root`
// before any other file of the variant is used.
struct SignatureCheck {
    sigstore::Policy policy;
    std::shared_ptr<const sigstore::TrustedRoot> root;
    std::string root_sha256;  // of the trusted_root.json document, kept in the record
};

// What verify_signature established: the signature, and the bytes of the
// metadata.json it covers (the digest that checks the other files is read
// from these, never again from disk).
struct SignedMetadata {
    cache::RecordedSignature signature;
    std::string metadata;
};

// A stable digest of a policy, kept in the variant record: a record made
// under another policy does not vouch for this one.
std::string policy_digest(const sigstore::Policy& policy);

struct FetchRequest {
    hub::RepoRef repo;
    std::string revision;  // branch, tag, "vN" or a full commit id (40 or 64 hex)
    // The commit `revision` points at, when the caller has read it already
    // (UNSTABLE_KERNELS_ALL_LATEST, from the hub's refs): it is not asked
    // for again, and refs/<revision> is written with it.
    std::string commit;
    std::string required_file;  // the registry's "file", may be empty
    select::HostFacts host;
    bool offline = false;
    // false: behave as if flock() did not exclude (KERNHUB_NO_FLOCK=1).
    bool use_locks = true;
    const std::atomic<bool>* cancel = nullptr;  // see Options::cancel
    // From a lock file: only these variants may be chosen, and the chosen
    // one's listing and bytes must match its pins before anything is used.
    std::optional<std::map<std::string, VariantPins>> pins;
    // For `lock`: LFS files are described from the listing (their name is
    // their SHA-256) instead of downloaded; only plain files are fetched.
    // The variant is then not recorded as complete.
    bool skip_lfs_downloads = false;
    ArchiveLimits archive_limits;
    std::optional<SignatureCheck> signature;
    // `kernhub verify`: ignore the variant record, hash every cached file
    // again and verify the signature again.
    bool reverify = false;
    // How many of the variant's files are transferred at once (each on a
    // worker thread with connections of its own); 1: one after another on
    // the calling thread. See Options::max_connections.
    int max_connections = 1;
    // KERNHUB_REF_TTL: a branch or tag that this cache resolved on the hub
    // less than this many seconds ago (by any process) is taken from
    // refs/ without asking the hub; 0 asks every time, and records nothing.
    int ref_ttl_seconds = 0;
    // Called with the variant's metadata.json text (when it has one) once
    // that file is verified and before any other file of the variant is
    // committed, on a fetch that downloads; it may throw to stop the fetch
    // (files in flight beside metadata.json are then dropped). A warm fetch
    // does not call it: the caller reads the cached file.
    std::function<void(const std::string& variant, const std::string& metadata)> check_metadata;
    // A check running beside the revision and listing requests (the
    // trusted-publisher overview): choose() passes it after the listing and
    // before it returns, so no file is requested before it passed; its
    // failure is the fetch's, even when the listing failed too.
    std::shared_ptr<Gate> gate;
    // A load's choice of files (docs/cache-format.md, "Partial variants"):
    // called once the variant is chosen with its listed files (relative to
    // the variant folder), it answers the ones the load reads, or nullopt
    // for the whole variant. When that is less than the whole variant and
    // the complete record does not vouch for it, only those files are
    // fetched and linked under .kernhub/partial/, out of the snapshot's
    // sight, and FetchOutcome::variant_dir points there. Unset: the whole
    // variant (fetch, prewarm, mirror, export).
    std::function<std::optional<std::set<std::string>>(const std::string& variant,
                                                       const std::vector<std::string>& files)>
        files_to_read;
};

// Folders whose fsync a batch of blob commits and snapshot links left to
// the end of the batch (docs/cache-format.md, "Durability"): each is synced
// once, however many names were made in it. Thread-safe.
class PendingSyncs {
public:
    void add(const std::filesystem::path& dir);
    // fsyncs every folder added, then forgets them. Error(internal) naming
    // the first that fails.
    void flush();

private:
    std::mutex m_mutex;
    std::set<std::filesystem::path> m_dirs;
};

// Where a commit's listing came from; it decides what a fetch may conclude.
enum class ListingSource {
    hub,       // the hub's tree API, or kernhub's copy of it
    hf_tree,   // huggingface_hub's trees/<commit>.json: the full listing
    snapshot,  // rebuilt from snapshot links: only what is cached
};

// A fetched file is what the variant record lists: path relative to the
// variant directory, size and SHA-256.
using FetchedFile = cache::RecordedFile;

struct VariantChoice {
    std::string commit;
    std::vector<select::Candidate> candidates;
    select::Selection selection;
};

struct FetchOutcome {
    std::string commit;
    std::string variant;
    // snapshots/<commit>/build/<variant>, or for a load that took part of
    // the variant .kernhub/partial/<commit>/build/<variant> (`partial`).
    std::filesystem::path variant_dir;
    bool partial = false;
    // With `partial`: the repo's partial-area lock, held shared
    // (RepoCache::hold_partial; docs/cache-format.md, "Partial variants").
    // The load keeps it until it has opened the files under variant_dir,
    // so that a fetch completing the variant meanwhile does not remove
    // them under it. Empty where locks are not used.
    std::shared_ptr<cache::FileLock> hold;
    std::vector<FetchedFile> files;
    std::uint64_t bytes_downloaded = 0;
    std::uint64_t files_downloaded = 0;  // of `files`, how many came over the network
    // The signature verified now or recorded earlier, when a policy applies.
    std::optional<cache::RecordedSignature> signature;
    // The variant's metadata.json has a digest, and every file matched it
    // (set when the files were verified, not on a warm fetch).
    bool metadata_digest_checked = false;
    // This fetch replaced a blob or made a link that was not there before
    // (a download counts in files_downloaded): the kernels library's
    // receipts of the variant are removed once more after the last change.
    bool files_changed = false;
};

// What a Client keeps of the side data it has parsed: a commit's listing
// and its variant records never change once written (a commit names fixed
// content), so loading a kernel again skips reading and parsing them. The
// snapshot links are still checked on every fetch. Thread-safe; bounded by
// k_max_memo_entries of each kind, after which nothing more is kept.
class SideDataMemo {
public:
    using Listing = std::shared_ptr<const std::vector<hub::TreeEntry>>;
    static constexpr std::size_t k_max_memo_entries = 256;

    Listing listing(const std::string& key) const;
    void put_listing(const std::string& key, Listing listing);
    void forget_listing(const std::string& key);
    std::optional<cache::VariantRecord> record(const std::string& key) const;
    void put_record(const std::string& key, const cache::VariantRecord& record);
    // The key of a commit of one repo in one cache.
    static std::string key(const cache::RepoCache& cache, const std::string& commit);

private:
    mutable std::mutex m_mutex;
    std::map<std::string, Listing> m_listings;
    std::map<std::string, cache::VariantRecord> m_records;
};

class Fetcher {
public:
    // `client` may be null when offline.
    Fetcher(std::filesystem::path cache_root, hub::HubClient* client, EventSink* events);
    // Listings and records parsed before are taken from (and new ones kept
    // in) `memo`, which must outlive the Fetcher; null keeps nothing.
    void use_memo(SideDataMemo* memo) noexcept { m_memo = memo; }

    // Commit and variant choice without downloading variant files.
    VariantChoice choose(const FetchRequest& request);
    // choose(), then make sure every file of the chosen variant is in the
    // cache and verified. Error(not_found) listing each rejected variant when
    // nothing fits; Error(offline) when offline and something is missing.
    FetchOutcome fetch(const FetchRequest& request);
    // The variant's metadata.json.sigstore verified over its metadata.json
    // (taken from the cache when there, else downloaded into memory and
    // checked against the listing), then both placed in the cache. Runs
    // before any other file of the variant is downloaded or used; throws
    // Error(verification) naming the step, with nothing of the variant
    // placed.
    // `area`: where the two files are linked.
    SignedMetadata verify_signature(const FetchRequest& request, const std::string& commit, const std::string& variant,
                                    const std::vector<const hub::TreeEntry*>& entries,
                                    cache::LinkArea area = cache::LinkArea::snapshot);
    // The signature of the variant `choice` selected (its commit and the
    // listing choose() worked from): the record's when it vouches for the
    // variant under request.signature, else verify_signature().
    cache::RecordedSignature signature_of(const FetchRequest& request, const VariantChoice& choice);
    // The metadata.json of the variant `choice` selected, checked against
    // the listing as a signed file is: the cached blob's bytes when there is
    // one, else downloaded into memory (at most deptree::k_max_metadata_bytes)
    // and not placed in the cache. nullopt when the variant has none, or
    // when offline without a cached copy.
    std::optional<std::string> metadata_of(const FetchRequest& request, const VariantChoice& choice);
    // The listing the last choose() or fetch() worked from, and where it
    // came from.
    const std::vector<hub::TreeEntry>& last_listing() const noexcept { return *m_last_listing; }
    ListingSource last_listing_source() const noexcept { return m_listing_source; }

private:
    std::string resolve_commit(const FetchRequest& request);
    // refs/<revision> when its recorded resolution is younger than
    // request.ref_ttl_seconds; nullopt otherwise (see resolve_commit).
    std::optional<std::string> recently_resolved(const FetchRequest& request) const;
    // refs/<revision> follows the hub after a fetch; with a TTL, the time of
    // this fetch's resolution on the hub is recorded next to it.
    void update_ref(const cache::RepoCache& cache, const FetchRequest& request, const std::string& commit);
    SideDataMemo::Listing listing(const FetchRequest& request, const std::string& commit);
    std::optional<cache::VariantRecord> recorded_variant(const cache::RepoCache& cache, const std::string& commit,
                                                         const std::string& variant);
    // `trusted`: paths this cache's own variant record names (verified when
    // kernhub wrote them).
    // Fetcher::fetch's steps: the variant from the cache's record when it
    // vouches for all of it; else every file downloaded or verified, and its
    // archives unpacked (a listing that proves wrong is forgotten).
    std::optional<FetchOutcome> warm_outcome(const FetchRequest& request, const cache::RepoCache& cache,
                                             const std::string& commit, const std::string& variant,
                                             const std::vector<const hub::TreeEntry*>& entries,
                                             std::set<std::string>& trusted);
    FetchOutcome download_and_unpack(const FetchRequest& request, const cache::RepoCache& cache,
                                     const std::string& commit, const std::string& variant,
                                     const std::vector<const hub::TreeEntry*>& entries,
                                     const std::set<std::string>& trusted,
                                     cache::LinkArea area = cache::LinkArea::snapshot);
    // The files of the chosen variant a load reads (request.files_to_read,
    // with metadata.json and, under a policy, its bundle), or nullopt when
    // the whole variant is fetched: no such request, a listing rebuilt
    // from links, an archive among the files, or every file needed.
    std::optional<std::set<std::string>> part_to_fetch(const FetchRequest& request, const std::string& variant,
                                                       const std::vector<const hub::TreeEntry*>& entries) const;
    FetchOutcome download_variant(const FetchRequest& request, const std::string& commit, const std::string& variant,
                                  const std::vector<const hub::TreeEntry*>& entries,
                                  const std::set<std::string>& trusted,
                                  cache::LinkArea area = cache::LinkArea::snapshot);
    // A load's part of the variant (`needed`, relative paths) in the
    // partial area: from its record when that vouches for every needed
    // file, else those files made present and linked there, and the record
    // rewritten. `trusted` as for download_variant.
    FetchOutcome fetch_part(const FetchRequest& request, const cache::RepoCache& cache, const std::string& commit,
                            const std::string& variant, const std::vector<const hub::TreeEntry*>& entries,
                            const std::set<std::string>& needed, std::set<std::string> trusted);
    // Adds to `trusted` the files the partial record of the variant names
    // that the listing still agrees on: a full fetch takes them as it takes
    // the complete record's.
    static void trust_partial_record(const cache::RepoCache& cache, const std::string& commit,
                                     const std::string& variant, const std::vector<const hub::TreeEntry*>& entries,
                                     std::set<std::string>& trusted);
    // Makes blobs/<etag> exist and verified, links it into the snapshot and
    // returns the file's SHA-256 hex. A blob already in the cache is hashed
    // unless `trusted`; one that does not match is downloaded again (online)
    // or refused with Error(verification) (offline). Holds the blob's lock
    // from the first look until the link is made.
    // `syncs`: the folders of the blob and the link are added there instead
    // of being synced now.
    // `area`: where the link is made (docs/cache-format.md, "Partial variants").
    std::string ensure_file(const FetchRequest& request, const std::string& commit, const Expectation& expect,
                            bool trusted, std::uint64_t& bytes_downloaded, PendingSyncs& syncs,
                            cache::LinkArea area = cache::LinkArea::snapshot);
    // Downloads blobs/<etag>. `locked`: the caller holds the blob's lock on
    // a filesystem where it excludes, so the largest partial left by an
    // earlier run is continued.
    std::string download_blob(const FetchRequest& request, const std::string& commit, const Expectation& expect,
                              bool locked, std::uint64_t& bytes_downloaded);
    // download_variant's loop: every file verified (against `metadata`'s
    // digest when there is one) and linked.
    void download_files(const FetchRequest& request, const std::string& commit, const std::string& variant,
                        const std::vector<const hub::TreeEntry*>& entries, const std::set<std::string>& trusted_paths,
                        std::optional<MetadataDigest> metadata, FetchOutcome& outcome,
                        cache::LinkArea area = cache::LinkArea::snapshot);
    // Once the complete record is written: the partial area of the variant
    // goes (RepoCache::remove_partial_variant), under the partial-area lock
    // held exclusively. A fetch waits up to k_partial_clear_wait for the
    // loads holding it; a load (which may hold it itself, for another
    // kernel of its tree) tries once. Where the lock stays busy the area
    // stays, for a later fetch or cache prune.
    void clear_partial(const FetchRequest& request, const cache::RepoCache& cache, const std::string& commit,
                       const std::string& variant);
    // warm_or_part under the partial-area lock where a load may read the
    // partial area; without it where the complete record vouches.
    std::optional<FetchOutcome> held_warm_or_part(const FetchRequest& request, const cache::RepoCache& cache,
                                                  const std::string& commit, const std::string& variant,
                                                  const std::vector<const hub::TreeEntry*>& entries,
                                                  std::set<std::string>& trusted);
    // Without pins or reverify: the variant its complete record vouches
    // for (a stale part of it removed, on a fetch), or a load's part of it
    // (fetch_part); nullopt when the whole variant is to be fetched, with
    // `trusted` holding what either record vouches for.
    std::optional<FetchOutcome> warm_or_part(const FetchRequest& request, const cache::RepoCache& cache,
                                             const std::string& commit, const std::string& variant,
                                             const std::vector<const hub::TreeEntry*>& entries,
                                             std::set<std::string>& trusted);
    // A load's shared hold of the partial-area lock, taken before the
    // complete record is read; empty for any other fetch and where locks
    // are not used.
    std::shared_ptr<cache::FileLock> hold_partial(const FetchRequest& request, const cache::RepoCache& cache) const;
    // Every listed file of `variant` in the last listing, metadata.json first.
    std::vector<const hub::TreeEntry*> listed_entries(const std::string& variant) const;
    // Removes the links of `entries` in `area` that are not in linked_before.
    static void unlink_new(const cache::RepoCache& cache, const std::string& commit,
                           const std::vector<const hub::TreeEntry*>& entries,
                           const std::vector<std::string>& linked_before,
                           cache::LinkArea area = cache::LinkArea::snapshot);
    // Unpacks every archive among the variant's files (already verified
    // and linked) next to them: each unpacked file becomes blobs/<sha256>
    // with a snapshot link, and is added to outcome.files. Refuses
    // (Error(verification)) before anything of the archive is visible.
    // download_files' steps (download.cpp).
    void emit_plan(const FetchRequest& request, const cache::RepoCache& cache, const std::string& variant,
                   const std::vector<const hub::TreeEntry*>& entries);
    void make_present(const FetchRequest& request, const std::string& commit, FileJob& job, PendingSyncs& syncs);
    void fetch_beside_metadata(const FetchRequest& request, const std::string& commit, std::vector<FileJob>& rest,
                               PendingSyncs& syncs, std::atomic<bool>& stop, const std::function<void()>& read_metadata,
                               std::optional<MetadataDigest>& metadata);
    void check_metadata_listed(const FetchRequest& request, const std::string& commit, const std::string& variant,
                               const std::vector<const hub::TreeEntry*>& entries, const MetadataDigest& metadata) const;
    // verify_signature's read of one signed file (signature.cpp).
    std::string signed_file_bytes(const FetchRequest& request, const std::string& commit, const std::string& where,
                                  const hub::TreeEntry& entry, std::uint64_t cap, const std::string& cap_name,
                                  std::set<std::string>& damaged);
    void unpack_archives(const FetchRequest& request, const std::vector<const hub::TreeEntry*>& entries,
                         FetchOutcome& outcome);
    // Removes the Python kernels library's verification receipts of the
    // variant (cache::remove_receipts), before this fetch changes any of its
    // files and again after the last change: kernels skips its own hash of
    // a variant that has one, so a receipt must never cover files kernels
    // did not check (docs/cache-format.md, "Other tools' data"). Thread-safe.
    void drop_receipts(const FetchRequest& request, const std::string& commit, const std::string& variant);
    // Whether every listed file of the variant is already linked, in
    // kernhub's form, to a blob of its listed size: a fetch then changes no
    // link (it may still replace a blob that fails its hash).
    static bool variant_in_place(const FetchRequest& request, const cache::RepoCache& cache, const std::string& commit,
                                 const std::vector<const hub::TreeEntry*>& entries);
    // Side data under .kernhub/ is a cache of what the hub said: a failure
    // to write it (a read-only cache) is reported, with what it costs, not
    // fatal.
    void write_side_data(const std::string& what, const std::function<void()>& write,
                         const std::string& cost = "the next run verifies the files again");
    void emit(Event::Kind kind, const std::string& text, const std::string& path = {}, std::uint64_t done = 0,
              std::uint64_t total = 0, const std::string& repo = {});

    std::filesystem::path m_root;
    hub::HubClient* m_client;
    EventSink* m_events;
    SideDataMemo* m_memo = nullptr;
    SideDataMemo::Listing m_last_listing = std::make_shared<const std::vector<hub::TreeEntry>>();
    ListingSource m_listing_source = ListingSource::hub;
    // Worker threads of one fetch count here.
    std::atomic<std::uint64_t> m_files_downloaded{0};
    // When the last resolve_commit() asked the hub (Unix seconds, taken
    // before the request); nullopt when it did not.
    std::optional<std::int64_t> m_resolved_at;
};

// Paths a variant's metadata.json digest does not cover, as the Python
// `kernels` library computes it: the top-level metadata.json and
// metadata.json.sigstore, anything under a __pycache__ folder and *.pyc.
// `relpath` is relative to the variant directory.
bool excluded_from_digest(const std::string& relpath);

// Python bytecode is never fetched: the variant is what remains
// (cache::is_python_bytecode).
using cache::is_python_bytecode;

// Builds the build/ part of a listing from huggingface_hub's cached tree
// (<repo>/trees/<commit>.json, format_version 1). nullopt when the document
// is not one kernhub understands; huggingface_hub ignores those too.
std::optional<std::vector<hub::TreeEntry>> parse_hf_tree_cache(const std::string& json);

// The kernels library's variant hash (git_lfs_concat) of the listed files
// of `variant`.
std::string listing_variant_hash(const std::vector<hub::TreeEntry>& listing, const std::string& variant);

// "name: reason; name: reason" for error messages.
std::string describe_rejections(const select::Selection& selection);

// "org/repo@revision", for messages.
std::string repo_at(const hub::RepoRef& repo, const std::string& revision);

}  // namespace kernhub::fetch
