// Verification while downloading: the bytes are hashed as they stream into
// the temp blob, so no second pass over the file is needed.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "cache/cache.hpp"
#include "digest/digest.hpp"
#include "http/http.hpp"
#include "hub/hub_client.hpp"
#include "kernhub/error.hpp"
#include "kernhub/events.hpp"

namespace kernhub::fetch {

// The per-file digests a variant's metadata.json declares (kernels format:
// digest{algorithm, files{relpath: base64}}).
struct MetadataDigest {
    digest::Algorithm algorithm = digest::Algorithm::sha256;
    std::map<std::string, digest::Bytes> files;
};

// nullopt when metadata.json has no "digest". Error(verification) naming the
// variant when it is malformed.
std::optional<MetadataDigest> parse_metadata_digest(const std::string& json, const std::string& variant);

// A file that matches the hub's hash but not a digest declared above the
// hub: its variant's metadata.json (the publisher's mistake) or a lock file
// (the hub changed what was locked). Fetching the file again cannot help,
// and the blob itself is what the hub names (other snapshots may link it),
// so callers must not treat this like a damaged blob.
class DeclaredDigestMismatch final : public Error {
public:
    using Error::Error;
};

class PendingDigest;

// Thrown by settled() to a file's job that may hold its blob lock, once
// metadata.json's job has found its own blob lock held by someone else
// (PendingDigest::release_holders): the job lets its lock go, keeping its
// partial, waits for metadata.json with settled_without_lock(), and makes
// the file present again, resuming from that partial. Not an Error, so
// that no handler of failures takes it for one.
class SettleDeferred final : public std::exception {
public:
    const char* what() const noexcept override {
        return "a file waiting for its variant's metadata.json let its blob lock go";
    }
};

// What a downloaded or cached file must match.
struct Expectation {
    const hub::TreeEntry* entry = nullptr;
    std::string label;  // "repo@commit:path" for messages
    std::optional<digest::Algorithm> metadata_algorithm;
    std::optional<digest::Bytes> metadata_digest;
    // The file's SHA-256 hex from a lock file, when one pins it.
    std::optional<std::string> pinned_sha256;
    // Polled while a file on disk is hashed (see Options::cancel).
    const std::atomic<bool>* cancel = nullptr;
    // Set when another file of the same fetch failed: a download in flight
    // then stops (Error(interrupted), its partial kept for the next run).
    const std::atomic<bool>* stop = nullptr;
    // The repo the file belongs to, for events.
    std::string repo;
    // Set while the variant's metadata.json is still on its way: the file
    // may stream meanwhile, but its metadata digest is settled (settled())
    // before it is committed or a cached copy of it is used. `relpath` is
    // the file's path relative to the variant directory.
    const PendingDigest* pending = nullptr;
    std::string relpath;
    // A file the metadata digest does not cover (the signature bundle): it
    // waits for the PendingDigest all the same, and needs no entry there.
    bool outside_digest = false;
    // For metadata.json fetched beside the other files: the PendingDigest
    // its job settles. Finding its blob lock held, the job releases the
    // files that wait holding theirs before it waits for the lock: the
    // holder may be another fetch whose own files wait under locks this
    // fetch's files hold.
    const PendingDigest* settles = nullptr;
};

// The metadata digest of a variant whose metadata.json is being fetched
// beside its other files (Fetcher::download_files, no signature policy): the
// job that fetches metadata.json publishes what it found, or that it
// failed; the other files wait for it before anything of theirs is
// committed. Thread-safe.
class PendingDigest {
public:
    // metadata.json is placed, its checks passed, and every other file of
    // the variant is covered by `digest` (nullopt: it has none).
    void settle(std::optional<MetadataDigest> digest);
    // metadata.json failed: the files waiting give up (Error(interrupted)).
    // `refusal`: it failed on its own (not stopped by another file's
    // failure), so the variant is refused: the fetch reports metadata.json's
    // error (error()) and the files beside it keep nothing, not even a
    // partial to resume.
    void fail(std::exception_ptr error, bool refusal);
    // The failure passed to fail(), else null.
    std::exception_ptr error() const;
    bool refused() const;
    // From now on, a wait() that may hold a blob lock (every wait() before
    // settle() or fail(), and those waiting now) throws SettleDeferred.
    void release_holders() const;
    // Waits until settle() or fail(); gives up with Error(interrupted) when
    // metadata.json failed, or when expect.cancel or expect.stop is set.
    // `holds_lock`: the caller may hold its file's blob lock, so it is
    // deferred after release_holders().
    const std::optional<MetadataDigest>& wait(const Expectation& expect, bool holds_lock) const;

private:
    mutable std::mutex m_mutex;
    mutable std::condition_variable m_changed;
    bool m_done = false;
    std::optional<MetadataDigest> m_digest;
    std::exception_ptr m_error;
    bool m_refused = false;
    mutable bool m_release_holders = false;
};

// `expect` with its metadata digest filled in from its PendingDigest (after
// waiting for it) and no longer pending; `expect` itself when nothing is
// pending. DeclaredDigestMismatch-free: a file the digest does not cover is
// Error(verification), as when the digest was known from the start.
// May throw SettleDeferred: for a caller that may hold the file's blob lock.
Expectation settled(const Expectation& expect);
// The same for a caller that holds no blob lock: never deferred.
Expectation settled_without_lock(const Expectation& expect);

// For a file streamed while its metadata digest was pending: checks the
// settled expectation's digest against the SHA-256 computed while it
// streamed, or, for another algorithm, against the bytes in `partial`
// (hashed again; they verified against the hub's hash already). Throws
// DeclaredDigestMismatch on a mismatch.
void check_late_digest(const Expectation& settled, const std::string& sha256_hex, const std::filesystem::path& partial);

// DeclaredDigestMismatch unless the lock's pin (when there is one) is
// `sha256_hex`.
void check_pin(const Expectation& expect, const std::string& sha256_hex);

// The digests one file must match, computed in a single streaming pass:
// SHA-256 (always), the git blob SHA-1 (plain files) and the metadata
// digest's algorithm when it is not SHA-256.
class StreamChecker {
public:
    explicit StreamChecker(const Expectation& expect) : m_expect(expect) { reset(); }
    void update(const char* data, std::size_t size);
    void reset();
    // Checks the size, the hub's hash and the metadata digest; returns the
    // SHA-256 hex. Throws Error(verification) naming the file and both
    // values on a mismatch (DeclaredDigestMismatch for the metadata digest).
    std::string finish(std::uint64_t size);

private:
    const Expectation& m_expect;
    digest::Hasher m_sha256{digest::Algorithm::sha256};
    std::optional<digest::GitBlobHasher> m_git;
    std::optional<digest::Hasher> m_extra;
};

// Streams a download into an IncompleteBlob through a StreamChecker. A blob
// that already holds bytes (a partial adopted from an earlier run) is read
// back first to rebuild the hash state, so the download continues where it
// stopped and every byte is still hashed exactly once.
//
// A file of k_overlap_bytes or more is hashed on a second thread that reads
// back what the transfer has written (from the page cache) while the next
// bytes arrive, so a large file costs about the longer of its transfer and
// its hashing rather than their sum. That thread also starts the disk's
// writeback of the ranges it has hashed, so the fsync at commit has little
// left to wait for. Smaller files are hashed as they arrive.
class VerifyingTarget final : public http::BodyTarget {
public:
    static constexpr std::uint64_t k_overlap_bytes = 4u << 20;

    VerifyingTarget(cache::IncompleteBlob& blob, const Expectation& expect, EventSink* events);
    ~VerifyingTarget() override;
    VerifyingTarget(const VerifyingTarget&) = delete;
    VerifyingTarget& operator=(const VerifyingTarget&) = delete;

    std::uint64_t size() const override { return m_blob.size(); }
    void write(const char* data, std::size_t size) override;
    void restart() override;
    std::optional<std::uint64_t> expected_size() const override { return m_expect.entry->size; }
    // The hub's ETag of the file is its blob id; it validates a resumed range.
    std::string validator() const override { return "\"" + m_expect.entry->etag() + "\""; }
    const std::atomic<bool>* stop_flag() const override { return m_expect.stop; }
    // Bytes that came from the adopted partial rather than this transfer.
    std::uint64_t resumed_bytes() const noexcept { return m_resumed; }
    // Waits for the hashing thread to catch up, then checks everything
    // (StreamChecker::finish). Error(internal) when the bytes written could
    // not be read back.
    std::string finish();
    // Stops the hashing thread at once, before the partial is discarded or
    // closed under it.
    void abandon() noexcept { (void)stop_trailer(true); }

private:
    struct Trailer;
    void read_back();
    void start_trailer();
    // Stops the hashing thread: after hashing everything written, or at once
    // (`abandon`). Returns the errno that stopped its reads, or 0.
    int stop_trailer(bool abandon) noexcept;

    cache::IncompleteBlob& m_blob;
    const Expectation& m_expect;
    EventSink* m_events;
    StreamChecker m_checker;
    std::string m_display_path;  // for progress events
    std::uint64_t m_resumed = 0;
    // While it runs, only the trailer's thread touches m_checker.
    std::unique_ptr<Trailer> m_trailer;
};

// Verifies a blob already in the cache and returns its SHA-256 hex.
// `trusted`: this cache's own variant record names the file, so kernhub
// hashed the blob when it wrote it; only the metadata digest is checked (an
// LFS blob is then not even read). Any other blob, whoever left it, is
// hashed against everything the hub listed.
std::string verify_cached_blob(const std::filesystem::path& blob, const Expectation& expect, bool trusted);

}  // namespace kernhub::fetch
