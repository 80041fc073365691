// The download half of Fetcher: verified blobs, resumed partials, snapshot
// links.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <unordered_set>
#include <vector>

#include "cache/cache.hpp"
#include "common/crash_point.hpp"
#include "deptree/metadata.hpp"
#include "fetch/fetcher.hpp"
#include "fetch/parallel.hpp"
#include "fetch/stream_check.hpp"
#include "kernhub/error.hpp"

namespace kernhub::fetch {

namespace fs = std::filesystem;

static void check_cancel(const FetchRequest& request, const std::string& what) {
    if (request.cancel != nullptr && request.cancel->load()) {
        throw Error(ErrorCode::interrupted, "interrupted before " + what + "; run the command again to continue");
    }
}

// "build/<variant>/<file>" -> "<variant>".
static std::string variant_of(const std::string& path) {
    const std::string prefix = "build/";
    const std::size_t end = path.find('/', prefix.size());
    return path.substr(prefix.size(), end == std::string::npos ? std::string::npos : end - prefix.size());
}

// Whether the file was streaming beside its variant's metadata.json and
// that file refused the variant.
static bool refused_beside(const Expectation& expect) {
    return expect.pending != nullptr && expect.pending->refused();
}

// A file streamed while metadata.json was on its way is committed only once
// its digest is known and matches; a mismatch or a refusal of the variant
// by metadata.json removes its partial.
// Deferred (SettleDeferred), the partial stays whole for the retry, which
// resumes at its end: the `streamed` bytes count as downloaded now.
static void settle_streamed(const Expectation& expect, cache::IncompleteBlob& blob, const std::string& sha256,
                            std::uint64_t streamed, std::uint64_t& bytes_downloaded) {
    try {
        check_late_digest(settled(expect), sha256, blob.temp_path());
    } catch (const SettleDeferred&) {
        bytes_downloaded += streamed;
        throw;
    } catch (const DeclaredDigestMismatch&) {
        blob.discard();
        throw;
    } catch (const Error&) {
        if (refused_beside(expect)) blob.discard();
        throw;
    }
}

static std::string not_cached(const FetchRequest& request, const std::string& what, const std::string& root) {
    return what + " is not in the cache under " + root + "; fetch " + request.repo.repo_id +
           " once while online (offline mode is on)";
}

void PendingSyncs::add(const fs::path& dir) {
    std::lock_guard<std::mutex> lock(m_mutex);
    m_dirs.insert(dir);
}

void PendingSyncs::flush() {
    std::set<fs::path> dirs;
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        dirs.swap(m_dirs);
    }
    for (const fs::path& dir : dirs) cache::sync_directory(dir);
}

// The blob lock of a file about to be made present. metadata.json fetched
// beside the other files waits for a held lock only after the files that
// wait for it under their own locks have let those go (SettleDeferred):
// two fetches whose variants share blobs crosswise (one's library has the
// other's metadata.json bytes) would otherwise each hold what the other's
// metadata.json needs.
static cache::FileLock lock_for(const cache::RepoCache& cache, const std::string& etag, const Expectation& expect,
                                const std::atomic<bool>* cancel) {
    if (expect.settles != nullptr) {
        if (std::optional<cache::FileLock> free = cache.try_lock_blob(etag)) return std::move(*free);
        expect.settles->release_holders();
    }
    return cache.lock_blob(etag, cancel);
}

std::string Fetcher::ensure_file(const FetchRequest& request, const std::string& commit, const Expectation& expect,
                                 bool trusted, std::uint64_t& bytes_downloaded, PendingSyncs& syncs,
                                 cache::LinkArea area) {
    const hub::TreeEntry& entry = *expect.entry;
    cache::RepoCache cache(m_root, request.repo.type, request.repo.repo_id);
    const std::string& etag = entry.etag();
    check_cancel(request, expect.label);
    // Whoever committed the blob may have left its name unflushed (it flushes
    // at the end of its own variant): this variant's record must not count
    // on it, so blobs/ is flushed here too, once.
    syncs.add(cache.blob_path(etag).parent_path());
    // The blob's lock is held from the has_blob check until the link is
    // made, so that cache prune, which removes a blob only while holding its
    // lock and after finding no link to it, cannot remove a blob this fetch
    // is about to link (docs/cache-format.md, "Cache management"). The same
    // lock serialises downloads of the blob; it is taken once per process,
    // since two open file descriptions of one file exclude each other even
    // in one process. Where flock() does not exclude, every process
    // downloads into a partial of its own and the renames race harmlessly:
    // the content is the same.
    const bool locking = request.use_locks && cache::flock_excludes(m_root);
    std::optional<cache::FileLock> lock;
    if (locking) lock.emplace(lock_for(cache, etag, expect, request.cancel));
    std::string sha256;
    if (cache.has_blob(etag)) {
        try {
            // A cached copy is checked against the whole expectation: no
            // transfer is saved by checking it before metadata.json is in.
            sha256 = verify_cached_blob(cache.blob_path(etag), settled(expect), trusted);
        } catch (const DeclaredDigestMismatch&) {
            throw;
        } catch (const Error& e) {
            if (e.code() != ErrorCode::verification) throw;
            if (request.offline) {
                throw Error(ErrorCode::verification,
                            "the cached copy of " + e.plain_message() + "; fetch it again while online");
            }
            emit(Event::Kind::info, "the cached copy of " + entry.path + " does not verify; downloading it again");
            // Under the lock nobody else is placing a good copy: the damaged
            // one goes. Without it another process may be renaming a good
            // copy into place right now, so the name is left to the renames.
            // A receipt of the kernels library would let kernels skip its
            // hash over the variant while it lacks this file: it goes first.
            drop_receipts(request, commit, variant_of(entry.path));
            if (locking) cache.remove_blob(etag);
        }
    }
    if (sha256.empty()) {
        if (request.offline) throw Error(ErrorCode::offline, not_cached(request, expect.label, m_root.string()));
        sha256 = download_blob(request, commit, expect, locking, bytes_downloaded);
    }
    cache.link_snapshot(commit, entry.path, etag, false, area);
    syncs.add(cache.link_path(area, commit, entry.path).parent_path());
    crash_point("linked");
    return sha256;
}

namespace {

// A blob another process renamed into place since ensure_file looked, or
// the damaged copy found there: either way it is hashed before use; nullopt
// when there is none or it does not verify (it is then downloaded again).
std::optional<std::string> verified_cached_copy(const cache::RepoCache& cache, const std::string& etag,
                                                const Expectation& expect) {
    if (!cache.has_blob(etag)) return std::nullopt;
    try {
        return verify_cached_blob(cache.blob_path(etag), settled_without_lock(expect), false);
    } catch (const DeclaredDigestMismatch&) {
        throw;
    } catch (const Error& e) {
        if (e.code() != ErrorCode::verification) throw;
    }
    return std::nullopt;
}

// Offline, every file the cache lacks is named at once, not the first only.
void require_complete_offline(const FetchRequest& request, const cache::RepoCache& cache, const std::string& commit,
                              const std::string& variant, const std::vector<const hub::TreeEntry*>& entries,
                              const fs::path& root) {
    const std::string prefix = "build/" + variant + "/";
    std::string missing;
    std::size_t count = 0;
    for (const hub::TreeEntry* entry : entries) {
        if (cache.has_blob(entry->etag()) || (request.skip_lfs_downloads && entry->is_lfs())) continue;
        if (++count <= 5) missing += (missing.empty() ? "" : ", ") + entry->path.substr(prefix.size());
    }
    if (count == 0) return;
    if (count > 5) missing += " and " + std::to_string(count - 5) + " more";
    throw Error(ErrorCode::offline, "variant " + variant + " of " + request.repo.repo_id + "@" + commit.substr(0, 12) +
                                        " is not complete in the cache under " + root.string() + " (missing " +
                                        missing +
                                        "); fetch it once while online "
                                        "(offline mode is on)");
}

}  // namespace

std::string Fetcher::download_blob(const FetchRequest& request, const std::string& commit, const Expectation& expect,
                                   bool locked, std::uint64_t& bytes_downloaded) {
    const hub::TreeEntry& entry = *expect.entry;
    cache::RepoCache cache(m_root, request.repo.type, request.repo.repo_id);
    const std::string& etag = entry.etag();
    if (!locked) {
        if (std::optional<std::string> sha256 = verified_cached_copy(cache, etag, expect)) return *sha256;
    }
    for (bool adopt = locked;; adopt = false) {
        cache::IncompleteBlob blob = cache.open_partial(etag, adopt);
        VerifyingTarget target(blob, expect, m_events);
        const std::uint64_t resumed = target.resumed_bytes();
        if (resumed > 0) {
            emit(Event::Kind::info, "resuming " + entry.path + " at byte " + std::to_string(resumed) + " of " +
                                        std::to_string(entry.size));
        }
        emit(Event::Kind::download_start, {}, entry.path, resumed, entry.size, request.repo.repo_id);
        if (resumed < entry.size) {
            try {
                m_client->download(request.repo, commit, entry.path, target);
            } catch (const Error& e) {
                target.abandon();  // its thread reads the partial
                // Too many bytes means the partial is wrong; any other
                // failure (network, interrupted) keeps it for the next run,
                // unless the variant was refused by its metadata.json, fetched
                // beside it: nothing of it is kept then.
                if (e.code() == ErrorCode::verification || refused_beside(expect)) blob.discard();
                throw;
            }
        }
        std::string sha256;
        try {
            sha256 = target.finish();
        } catch (const DeclaredDigestMismatch&) {
            blob.discard();
            throw;
        } catch (const Error& e) {
            blob.discard();
            if (target.resumed_bytes() > 0) {
                emit(Event::Kind::info,
                     "the resumed download of " + entry.path + " does not verify; downloading it from the start");
                continue;
            }
            throw;
        }
        const std::uint64_t streamed = target.size() - target.resumed_bytes();
        if (expect.pending != nullptr) settle_streamed(expect, blob, sha256, streamed, bytes_downloaded);
        crash_point("verified");
        // The data is synced here, on this file's worker; the blobs/ entry
        // is synced once for the variant (PendingSyncs).
        blob.commit(false);
        crash_point("committed");
        bytes_downloaded += streamed;
        ++m_files_downloaded;
        emit(Event::Kind::download_done, {}, entry.path, entry.size, entry.size, request.repo.repo_id);
        return sha256;
    }
}

FetchOutcome Fetcher::download_variant(const FetchRequest& request, const std::string& commit,
                                       const std::string& variant, const std::vector<const hub::TreeEntry*>& entries,
                                       const std::set<std::string>& trusted, cache::LinkArea area) {
    cache::RepoCache cache(m_root, request.repo.type, request.repo.repo_id);
    FetchOutcome outcome;
    outcome.commit = commit;
    outcome.variant = variant;
    outcome.variant_dir = cache.link_dir(area, commit) / "build" / variant;
    outcome.partial = area == cache::LinkArea::partial;
    const std::uint64_t downloads_before = m_files_downloaded;
    const std::string prefix = "build/" + variant + "/";
    cache.unlink_linked_folders();
    if (request.offline) require_complete_offline(request, cache, commit, variant, entries, m_root);
    // The signature comes before every other file (docs/trust.md, "Signatures").
    // The digest that checks the other files is the one in the verified
    // bytes, and it must exist: without it the signature covers nothing else.
    std::set<std::string> trusted_paths = trusted;
    std::optional<MetadataDigest> metadata;
    std::vector<std::string> linked_before;
    if (request.signature) {
        for (const hub::TreeEntry* entry : entries) {
            std::error_code ec;
            if (fs::is_symlink(fs::symlink_status(cache.link_path(area, commit, entry->path), ec))) {
                linked_before.push_back(entry->path);
            }
        }
        SignedMetadata verified = verify_signature(request, commit, variant, entries, area);
        outcome.signature = std::move(verified.signature);
        metadata = parse_metadata_digest(verified.metadata, variant);
        if (!metadata) {
            unlink_new(cache, commit, entries, linked_before, area);
            throw Error(ErrorCode::verification,
                        "the signed metadata.json of " + request.repo.repo_id + " variant " + variant +
                            " has no \"digest\", so its signature covers no other file of the variant; refusing it "
                            "(the registry entry's \"signature\" policy requires a signed digest)");
        }
        trusted_paths.insert(prefix + "metadata.json");
        trusted_paths.insert(prefix + "metadata.json.sigstore");
    }
    try {
        download_files(request, commit, variant, entries, trusted_paths, metadata, outcome, area);
    } catch (const Error&) {
        // With a policy, a refused variant leaves nothing of itself visible:
        // the links this fetch made go again (their blobs verified, and are
        // left for cache prune).
        if (request.signature) unlink_new(cache, commit, entries, linked_before, area);
        throw;
    }
    outcome.files_downloaded = m_files_downloaded - downloads_before;
    return outcome;
}

// One file of a variant to make present, and what came of it (download_files).
struct FileJob {
    const hub::TreeEntry* entry = nullptr;
    std::string relpath;
    Expectation expect;
    bool trusted = false;
    cache::LinkArea area = cache::LinkArea::snapshot;  // where the file is linked
    std::string sha256;
    std::uint64_t bytes_downloaded = 0;
};

namespace {

// What each file must match. The metadata digest is filled in once
// metadata.json, which comes first, has been read.
std::vector<FileJob> file_jobs(const FetchRequest& request, const std::string& commit, const std::string& variant,
                               const std::vector<const hub::TreeEntry*>& entries,
                               const std::set<std::string>& trusted_paths, std::atomic<bool>* stop,
                               cache::LinkArea area) {
    const std::string prefix = "build/" + variant + "/";
    const std::string label_base = request.repo.repo_id + "@" + commit.substr(0, 12) + ":";
    const VariantPins* pins = request.pins ? &request.pins->at(variant) : nullptr;
    std::vector<FileJob> jobs(entries.size());
    for (std::size_t i = 0; i < entries.size(); ++i) {
        FileJob& job = jobs[i];
        job.entry = entries[i];
        job.relpath = entries[i]->path.substr(prefix.size());
        job.expect.entry = entries[i];
        job.expect.label = label_base + entries[i]->path;
        job.expect.cancel = request.cancel;
        job.expect.stop = stop;
        job.expect.repo = request.repo.repo_id;
        job.trusted = trusted_paths.count(entries[i]->path) != 0;
        job.area = area;
        if (pins != nullptr && pins->files) {
            auto pin = pins->files->find(job.relpath);
            if (pin != pins->files->end()) job.expect.pinned_sha256 = pin->second.sha256;
        }
    }
    return jobs;
}

// The metadata digest a file must match; an unlisted file is refused.
void expect_digest(FileJob& job, const std::optional<MetadataDigest>& metadata) {
    if (!metadata || excluded_from_digest(job.relpath)) return;
    auto it = metadata->files.find(job.relpath);
    if (it == metadata->files.end()) {
        throw Error(ErrorCode::verification, job.expect.label +
                                                 " is not covered by the variant's metadata.json digest; "
                                                 "refusing an unlisted file");
    }
    job.expect.metadata_algorithm = metadata->algorithm;
    job.expect.metadata_digest = it->second;
}

// Error(verification) when metadata.json is listed over k_max_metadata_bytes.
void check_metadata_size(const FetchRequest& request, const std::string& variant, const hub::TreeEntry& entry) {
    if (entry.size <= deptree::k_max_metadata_bytes) return;
    throw Error(ErrorCode::verification,
                "metadata.json of " + request.repo.repo_id + " variant " + variant + " is listed with " +
                    std::to_string(entry.size) + " bytes, more than k_max_metadata_bytes (" +
                    std::to_string(deptree::k_max_metadata_bytes) + " bytes); the publisher must fix the repo");
}

// Error(verification) when `metadata` has a digest that does not name the
// file (expect_digest without filling the expectation in).
void check_covered(const FileJob& job, const std::optional<MetadataDigest>& metadata) {
    if (!metadata || excluded_from_digest(job.relpath) || metadata->files.count(job.relpath) != 0) return;
    throw Error(ErrorCode::verification, job.expect.label +
                                             " is not covered by the variant's metadata.json digest; refusing an "
                                             "unlisted file");
}

// FetchRequest::check_metadata over the placed metadata.json, when the
// variant has one.
void run_metadata_check(const FetchRequest& request, const cache::RepoCache& cache, const std::string& commit,
                        const std::string& variant, cache::LinkArea area) {
    if (!request.check_metadata) return;
    const fs::path placed = cache.link_path(area, commit, "build/" + variant + "/metadata.json");
    std::string text;
    std::error_code ec;
    // Over the cap, the first bytes past it are enough for the check to
    // refuse the file as too large.
    const int error = fs::exists(fs::symlink_status(placed, ec))
                          ? cache::read_file_into(placed, text, deptree::k_max_metadata_bytes + 1).error
                          : ENOENT;
    if (error == 0 || error == EFBIG) request.check_metadata(variant, text);
}

}  // namespace

// The plan lets a renderer show the variant's total before any file.
// Two files with the same content are one download.
void Fetcher::emit_plan(const FetchRequest& request, const cache::RepoCache& cache, const std::string& variant,
                        const std::vector<const hub::TreeEntry*>& entries) {
    std::set<std::string> planned;
    std::uint64_t plan_bytes = 0;
    for (const hub::TreeEntry* entry : entries) {
        if (cache.has_blob(entry->etag()) || (request.skip_lfs_downloads && entry->is_lfs())) continue;
        if (planned.insert(entry->etag()).second) plan_bytes += entry->size;
    }
    if (!planned.empty() && !request.offline) {
        emit(Event::Kind::download_plan, variant, {}, planned.size(), plan_bytes, request.repo.repo_id);
    }
}

void Fetcher::make_present(const FetchRequest& request, const std::string& commit, FileJob& job, PendingSyncs& syncs) {
    if (request.skip_lfs_downloads && job.entry->is_lfs()) {
        // Described, not fetched: the listed SHA-256 is the file's name,
        // and it must agree with the metadata digest and the pin.
        job.sha256 = job.entry->lfs_sha256;
        if (job.expect.metadata_digest && job.expect.metadata_algorithm == digest::Algorithm::sha256 &&
            digest::from_hex(job.sha256) != job.expect.metadata_digest) {
            throw DeclaredDigestMismatch(ErrorCode::verification,
                                         job.expect.label + " is listed with sha256 " + job.sha256 +
                                             ", which its variant's metadata.json digest does not match");
        }
        check_pin(job.expect, job.sha256);
        return;
    }
    job.sha256 = ensure_file(request, commit, job.expect, job.trusted, job.bytes_downloaded, syncs, job.area);
}

void Fetcher::download_files(const FetchRequest& request, const std::string& commit, const std::string& variant,
                             const std::vector<const hub::TreeEntry*>& entries,
                             const std::set<std::string>& trusted_paths, std::optional<MetadataDigest> metadata,
                             FetchOutcome& outcome, cache::LinkArea area) {
    cache::RepoCache cache(m_root, request.repo.type, request.repo.repo_id);
    PendingSyncs syncs;
    emit_plan(request, cache, variant, entries);
    std::atomic<bool> stop{false};  // set by run_parallel when a file fails
    std::vector<FileJob> jobs = file_jobs(request, commit, variant, entries, trusted_paths, &stop, area);
    const bool metadata_first = !jobs.empty() && jobs[0].relpath == "metadata.json" && !metadata;
    if (metadata_first) check_metadata_size(request, variant, *jobs[0].entry);
    // Without a signature policy the other files stream beside metadata.json
    // and wait for its digest only to commit (docs/performance.md, "Round
    // trips"); described LFS files, a lock's pins and offline keep it first.
    const bool alongside =
        metadata_first && jobs.size() > 1 && !request.skip_lfs_downloads && !request.offline && !request.pins;
    const hub::TreeEntry* metadata_entry = metadata_first ? jobs[0].entry : nullptr;
    // metadata.json placed and verified: its digest, then the caller's check.
    auto read_metadata = [&] {
        std::string text;  // verified just now, at its listed size
        const cache::ReadStatus status =
            cache::read_file_into(cache.blob_path(metadata_entry->etag()), text, deptree::k_max_metadata_bytes);
        if (status.error != 0) {
            throw Error(ErrorCode::internal, "cannot read the metadata.json of " + request.repo.repo_id + " variant " +
                                                 variant + " just placed in the cache: " + std::strerror(status.error));
        }
        metadata = parse_metadata_digest(text, variant);
        if (request.check_metadata) request.check_metadata(variant, text);  // the bytes just read, not read again
    };
    std::size_t first_parallel = 0;
    if (metadata_first && !alongside) {
        make_present(request, commit, jobs[0], syncs);
        read_metadata();
        first_parallel = 1;
    } else if (!metadata_first) {
        run_metadata_check(request, cache, commit, variant, area);  // placed with its signature, or none
    }
    std::vector<FileJob> rest(std::make_move_iterator(jobs.begin() + static_cast<std::ptrdiff_t>(first_parallel)),
                              std::make_move_iterator(jobs.end()));
    jobs.resize(first_parallel);
    if (!alongside) {
        // Every file is checked for coverage before any transfer starts.
        for (FileJob& job : rest) expect_digest(job, metadata);
        run_parallel(
            rest.size(), request.max_connections, [&](std::size_t i) { make_present(request, commit, rest[i], syncs); },
            &stop);
    } else {
        fetch_beside_metadata(request, commit, rest, syncs, stop, read_metadata, metadata);
    }
    jobs.insert(jobs.end(), std::make_move_iterator(rest.begin()), std::make_move_iterator(rest.end()));
    // One durability point for the variant: every blob's data was synced by
    // its commit; the names made in blobs/ and in the snapshot's folders
    // are synced here, once per folder, before anything that counts on them
    // (the variant record) is written.
    syncs.flush();
    crash_point("synced");
    for (const FileJob& job : jobs) {
        outcome.bytes_downloaded += job.bytes_downloaded;
        outcome.files.push_back(FetchedFile{job.relpath, job.entry->size, job.sha256, {}});
    }
    outcome.metadata_digest_checked = metadata.has_value();
    // Against the whole variant the digest describes, also for a load's part.
    if (metadata) check_metadata_listed(request, commit, variant, listed_entries(variant), *metadata);
}

// Whether metadata.json's failure refuses its variant (what it says, or
// its bytes, are wrong) rather than its transfer failing.
static bool refuses_variant(const std::exception_ptr& error) {
    try {
        std::rethrow_exception(error);
    } catch (const Error& e) {
        return e.code() == ErrorCode::verification || e.code() == ErrorCode::load || e.code() == ErrorCode::usage;
    } catch (...) {
        return false;
    }
}

// download_files without a signature policy: rest[0] is metadata.json,
// taken first by the first worker; the others settle their digest through
// a PendingDigest before they commit. A file with metadata.json's own bytes
// shares its blob lock, so it settles before it takes the lock.
void Fetcher::fetch_beside_metadata(const FetchRequest& request, const std::string& commit, std::vector<FileJob>& rest,
                                    PendingSyncs& syncs, std::atomic<bool>& stop,
                                    const std::function<void()>& read_metadata,
                                    std::optional<MetadataDigest>& metadata) {
    PendingDigest pending;
    const std::string metadata_etag = rest[0].entry->etag();
    // metadata.json is small and already on its way when another file
    // fails: it finishes and is kept, verified, as it is when it comes
    // first alone, so that a retry does not fetch it again. A cancel still
    // stops it.
    rest[0].expect.stop = nullptr;
    for (std::size_t i = 1; i < rest.size(); ++i) {
        rest[i].expect.pending = &pending;
        rest[i].expect.relpath = rest[i].relpath;
        // The signature bundle's digest is the hub's hash alone; it too is
        // committed only once metadata.json has passed.
        rest[i].expect.outside_digest = excluded_from_digest(rest[i].relpath);
    }
    std::atomic<bool> news{false};  // metadata.json failed on its own
    rest[0].expect.settles = &pending;
    auto job = [&](std::size_t i) {
        if (i > 0) {
            if (rest[i].entry->etag() == metadata_etag) rest[i].expect = settled_without_lock(rest[i].expect);
            try {
                make_present(request, commit, rest[i], syncs);
            } catch (const SettleDeferred&) {
                // Its blob lock is let go: metadata.json first, then again.
                rest[i].expect = settled_without_lock(rest[i].expect);
                make_present(request, commit, rest[i], syncs);
            }
            return;
        }
        try {
            make_present(request, commit, rest[0], syncs);
            read_metadata();
            // Every file is checked for coverage before any is committed.
            for (std::size_t k = 1; k < rest.size(); ++k) check_covered(rest[k], metadata);
            pending.settle(metadata);
        } catch (...) {
            // After another file's failure, metadata.json is not the news;
            // failing on its own, it is. What it says refusing the variant
            // (a digest, kernels-minver) keeps nothing of the other files,
            // not even a partial; a failed transfer keeps their partials
            // for the next run.
            news = !stop.load();
            pending.fail(std::current_exception(), news && refuses_variant(std::current_exception()));
            throw;
        }
    };
    try {
        run_parallel(rest.size(), request.max_connections, job, &stop);
    } catch (...) {
        // A file that gave up because metadata.json failed reports
        // metadata.json's error, whichever failed first in time.
        if (news.load()) std::rethrow_exception(pending.error());
        throw;
    }
}

// Every file the metadata digest names must be in the listing.
void Fetcher::check_metadata_listed(const FetchRequest& request, const std::string& commit, const std::string& variant,
                                    const std::vector<const hub::TreeEntry*>& entries,
                                    const MetadataDigest& metadata) const {
    const std::string prefix = "build/" + variant + "/";
    const std::string label_base = request.repo.repo_id + "@" + commit.substr(0, 12) + ":";
    std::unordered_set<std::string> listed;
    for (const hub::TreeEntry* e : entries) listed.insert(e->path);
    for (const auto& [path, digest_bytes] : metadata.files) {
        if (listed.count(prefix + path) != 0) continue;
        if (m_listing_source == ListingSource::snapshot) {
            throw Error(ErrorCode::offline, not_cached(request, label_base + prefix + path, m_root.string()));
        }
        throw Error(ErrorCode::verification, "metadata.json of " + request.repo.repo_id + " variant " + variant +
                                                 " lists " + path + ", which the repo does not have");
    }
}

void Fetcher::unlink_new(const cache::RepoCache& cache, const std::string& commit,
                         const std::vector<const hub::TreeEntry*>& entries,
                         const std::vector<std::string>& linked_before, cache::LinkArea area) {
    const std::unordered_set<std::string> before(linked_before.begin(), linked_before.end());
    for (const hub::TreeEntry* entry : entries) {
        if (before.count(entry->path) != 0) continue;
        std::error_code ec;
        const fs::path link = cache.link_path(area, commit, entry->path);
        if (fs::is_symlink(fs::symlink_status(link, ec))) fs::remove(link, ec);  // the link, never its target
    }
}

}  // namespace kernhub::fetch
