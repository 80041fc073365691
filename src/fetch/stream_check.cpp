#include "fetch/stream_check.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>
#include <system_error>
#include <thread>
#include <vector>

#include "common/crash_point.hpp"
#include "common/hint.hpp"
#include "common/text.hpp"
#include "deptree/metadata.hpp"
#include "kernhub/error.hpp"

namespace kernhub::fetch {

using nlohmann::json;

// Hashing a large file from disk takes seconds: a request to stop must not
// wait for it.
static void check_cancel(const Expectation& expect) {
    if (expect.cancel != nullptr && expect.cancel->load()) {
        throw Error(ErrorCode::interrupted, "interrupted while checking " + expect.label);
    }
}

std::optional<MetadataDigest> parse_metadata_digest(const std::string& text, const std::string& variant) {
    auto malformed = [&](const std::string& why) {
        return Error(ErrorCode::verification, "metadata.json of variant " + variant + " is malformed: " + why +
                                                  "; the publisher must fix the repo");
    };
    const json doc = deptree::metadata_document(text, "variant " + variant);
    if (!doc.contains("digest") || doc["digest"].is_null()) return std::nullopt;
    const json& digest_doc = doc["digest"];
    if (!digest_doc.is_object() || !digest_doc.contains("files") || !digest_doc["files"].is_object()) {
        throw malformed("\"digest\" needs an object \"files\"");
    }
    MetadataDigest out;
    // Required, as kernels 0.19.1 requires it: a digest without one is no
    // metadata.json that kernels reads.
    if (!digest_doc.contains("algorithm") || !digest_doc["algorithm"].is_string()) {
        throw malformed("\"digest\" needs a string \"algorithm\", \"sha256\" or \"sha512\"");
    }
    const std::string algorithm = digest_doc["algorithm"].get<std::string>();
    if (algorithm == "sha256") {
        out.algorithm = digest::Algorithm::sha256;
    } else if (algorithm == "sha512") {
        out.algorithm = digest::Algorithm::sha512;
    } else {
        throw malformed("unknown digest algorithm \"" + algorithm + "\"");
    }
    for (const auto& [path, value] : digest_doc["files"].items()) {
        auto bytes = value.is_string() ? digest::from_base64(value.get<std::string>()) : std::nullopt;
        if (!bytes) throw malformed("digest of \"" + path + "\" is not base64");
        out.files[path] = *bytes;
    }
    return out;
}

void StreamChecker::reset() {
    m_sha256.reset();
    m_git.reset();
    if (!m_expect.entry->is_lfs()) m_git.emplace(m_expect.entry->size);
    m_extra.reset();
    if (m_expect.metadata_algorithm && *m_expect.metadata_algorithm != digest::Algorithm::sha256) {
        m_extra.emplace(*m_expect.metadata_algorithm);
    }
}

void StreamChecker::update(const char* data, std::size_t size) {
    m_sha256.update(data, size);
    if (m_git) m_git->update(data, size);
    if (m_extra) m_extra->update(data, size);
}

static void check_metadata(const Expectation& expect, const digest::Bytes& actual) {
    if (!expect.metadata_digest) return;
    if (actual != *expect.metadata_digest) {
        throw DeclaredDigestMismatch(ErrorCode::verification,
                                     expect.label +
                                         " does not match the digest in its variant's metadata.json (expected " +
                                         digest::to_base64(*expect.metadata_digest) + ", got " +
                                         digest::to_base64(actual) + "); the file was not used");
    }
}

void check_pin(const Expectation& expect, const std::string& sha256_hex) {
    if (expect.pinned_sha256 && *expect.pinned_sha256 != sha256_hex) {
        throw DeclaredDigestMismatch(ErrorCode::verification,
                                     expect.label + " has sha256 " + sha256_hex + ", but the lock file pins " +
                                         *expect.pinned_sha256 +
                                         "; the file was not used: the hub serves other bytes than were locked, "
                                         "or the lock was edited; checking the lock tells which",
                                     hint::action("lock.check"));
    }
}

void PendingDigest::settle(std::optional<MetadataDigest> digest) {
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_digest = std::move(digest);
        m_done = true;
    }
    m_changed.notify_all();
}

bool PendingDigest::refused() const {
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_refused;
}

void PendingDigest::fail(std::exception_ptr error, bool refusal) {
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_error = std::move(error);
        m_refused = refusal;
        m_done = true;
    }
    m_changed.notify_all();
}

std::exception_ptr PendingDigest::error() const {
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_error;
}

void PendingDigest::release_holders() const {
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_release_holders = true;
    }
    m_changed.notify_all();
}

const std::optional<MetadataDigest>& PendingDigest::wait(const Expectation& expect, bool holds_lock) const {
    // How often a wait looks at the cancel and stop flags, which are set
    // without notifying this object.
    constexpr std::chrono::milliseconds k_poll{50};
    std::unique_lock<std::mutex> lock(m_mutex);
    while (!m_done) {
        if (holds_lock && m_release_holders) throw SettleDeferred();
        const bool stopped =
            (expect.cancel != nullptr && expect.cancel->load()) || (expect.stop != nullptr && expect.stop->load());
        if (stopped) break;
        m_changed.wait_for(lock, k_poll);
    }
    if (!m_done || m_error) {
        throw Error(ErrorCode::interrupted,
                    expect.label +
                        " was not committed: its variant's metadata.json, fetched beside it, did not "
                        "pass, or the fetch stopped");
    }
    return m_digest;
}

namespace {

Expectation settled_as(const Expectation& expect, bool holds_lock) {
    if (expect.pending == nullptr) return expect;
    Expectation out = expect;
    out.pending = nullptr;
    const std::optional<MetadataDigest>& digest = expect.pending->wait(expect, holds_lock);
    if (!digest || expect.outside_digest) return out;
    // download_files checked that the digest covers every file of the
    // variant before it settled it; a file it does not name is refused all
    // the same, in case a caller settles otherwise.
    const auto it = digest->files.find(expect.relpath);
    if (it == digest->files.end()) {
        throw Error(ErrorCode::verification,
                    expect.label + " is not covered by the variant's metadata.json digest; refusing an unlisted file");
    }
    out.metadata_algorithm = digest->algorithm;
    out.metadata_digest = it->second;
    return out;
}

}  // namespace

Expectation settled(const Expectation& expect) {
    return settled_as(expect, true);
}

Expectation settled_without_lock(const Expectation& expect) {
    return settled_as(expect, false);
}

void check_late_digest(const Expectation& settled, const std::string& sha256_hex,
                       const std::filesystem::path& partial) {
    if (!settled.metadata_digest) return;
    if (!settled.metadata_algorithm || *settled.metadata_algorithm == digest::Algorithm::sha256) {
        const std::optional<digest::Bytes> sha256 = digest::from_hex(sha256_hex);
        if (sha256) check_metadata(settled, *sha256);
        return;
    }
    // Another algorithm was not computed while the bytes streamed: they are
    // read once more (from the page cache, as a rule).
    (void)verify_cached_blob(partial, settled, false);
}

std::string StreamChecker::finish(std::uint64_t size) {
    const hub::TreeEntry& entry = *m_expect.entry;
    if (size != entry.size) {
        throw Error(ErrorCode::verification, m_expect.label + ": got " + std::to_string(size) +
                                                 " bytes, the hub listed " + std::to_string(entry.size));
    }
    digest::Bytes sha256 = m_sha256.finish();
    std::string sha256_hex = digest::to_hex(sha256);
    if (entry.is_lfs() && sha256_hex != entry.lfs_sha256) {
        throw Error(ErrorCode::verification, m_expect.label + ": sha256 " + sha256_hex + " does not match the hub's " +
                                                 entry.lfs_sha256 + "; the file was not used, fetch again");
    }
    if (m_git) {
        std::string sha1 = m_git->finish_hex();
        if (sha1 != entry.oid) {
            throw Error(ErrorCode::verification, m_expect.label + ": git blob sha1 " + sha1 +
                                                     " does not match the hub's " + entry.oid +
                                                     "; the file was not used, fetch again");
        }
    }
    check_metadata(m_expect, m_extra ? m_extra->finish() : sha256);
    check_pin(m_expect, sha256_hex);
    return sha256_hex;
}

// The hashing thread of a large download: it follows the writer through the
// partial file. `written` is what the writer has put there, `hashed` how far
// the thread has read; both only grow until a restart.
struct VerifyingTarget::Trailer {
    std::mutex mutex;
    std::condition_variable wake;
    std::uint64_t written = 0;  // guarded by mutex
    bool closing = false;       // guarded by mutex: stop once everything written is hashed
    bool abandon = false;       // guarded by mutex: stop now
    std::atomic<int> error{0};  // the errno that stopped the thread's reads
    std::thread thread;
};

// Bytes read back per step (one buffer per large file in flight: with
// KERNHUB_MAX_CONNECTIONS of them the buffers stay a few MiB), and how much
// is hashed before its writeback is started.
static constexpr std::size_t k_trail_chunk = 256u << 10;
static constexpr std::uint64_t k_writeback_step = 16u << 20;

VerifyingTarget::VerifyingTarget(cache::IncompleteBlob& blob, const Expectation& expect, EventSink* events)
    : m_blob(blob),
      m_expect(expect),
      m_events(events),
      m_checker(expect),
      m_display_path(printable(expect.entry->path)) {
    if (m_blob.size() > m_expect.entry->size) m_blob.restart();  // not a prefix of this file
    if (m_blob.size() > 0) read_back();
    start_trailer();
}

VerifyingTarget::~VerifyingTarget() {
    (void)stop_trailer(true);
}

void VerifyingTarget::start_trailer() {
    if (m_expect.entry->size < k_overlap_bytes || m_blob.size() >= m_expect.entry->size) return;
    m_trailer = std::make_unique<Trailer>();
    Trailer& trailer = *m_trailer;
    trailer.written = m_blob.size();
    const std::uint64_t start = m_blob.size();
    try {
        trailer.thread = std::thread([this, &trailer, start] {
            std::vector<char> buffer;
            try {
                buffer.resize(k_trail_chunk);
            } catch (const std::bad_alloc&) {
                trailer.error = ENOMEM;
                return;
            }
            std::uint64_t hashed = start;
            std::uint64_t flushed = start;
            for (;;) {
                std::uint64_t available = 0;
                {
                    std::unique_lock<std::mutex> lock(trailer.mutex);
                    trailer.wake.wait(lock,
                                      [&] { return trailer.abandon || trailer.written > hashed || trailer.closing; });
                    if (trailer.abandon || trailer.written == hashed) return;
                    available = trailer.written - hashed;
                }
                const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(available, buffer.size()));
                if (int err = m_blob.read_at(hashed, buffer.data(), n); err != 0) {
                    trailer.error = err;
                    return;
                }
                m_checker.update(buffer.data(), n);
                hashed += n;
                if (hashed - flushed >= k_writeback_step) {
                    m_blob.start_writeback(flushed, hashed - flushed);
                    flushed = hashed;
                }
            }
        });
    } catch (const std::system_error&) {
        m_trailer.reset();  // no thread to be had: hash as the bytes arrive
    }
}

int VerifyingTarget::stop_trailer(bool abandon) noexcept {
    if (!m_trailer) return 0;
    {
        std::lock_guard<std::mutex> lock(m_trailer->mutex);
        m_trailer->closing = true;
        if (abandon) m_trailer->abandon = true;
    }
    m_trailer->wake.notify_one();
    if (m_trailer->thread.joinable()) m_trailer->thread.join();
    const int err = m_trailer->error.load();
    m_trailer.reset();
    return err;
}

std::string VerifyingTarget::finish() {
    if (int err = stop_trailer(false); err != 0) {
        throw Error(ErrorCode::internal, "cannot read back " + m_blob.temp_path().string() + " to check it: " +
                                             std::error_code(err, std::generic_category()).message() +
                                             "; check the disk");
    }
    return m_checker.finish(m_blob.size());
}

void VerifyingTarget::read_back() {
    const std::uint64_t kept = m_blob.size();
    try {
        digest::read_chunks(
            m_blob.temp_path(),
            [&](std::uint64_t on_disk) {
                if (on_disk != kept) throw Error(ErrorCode::internal, "the partial file changed size");
            },
            [&](const void* data, std::size_t size) {
                check_cancel(m_expect);
                m_checker.update(static_cast<const char*>(data), size);
            });
    } catch (const Error& e) {
        if (e.code() == ErrorCode::interrupted) throw;
        // Unreadable or changed after all: start the file over.
        m_blob.restart();
        m_checker.reset();
        return;
    }
    m_resumed = kept;
}

void VerifyingTarget::write(const char* data, std::size_t size) {
    if (m_expect.stop != nullptr && m_expect.stop->load()) {
        throw Error(ErrorCode::interrupted,
                    m_expect.label + ": stopped because another file of the fetch failed; run again to continue");
    }
    if (m_trailer && m_trailer->error.load() != 0) {
        throw Error(ErrorCode::internal,
                    "cannot read back " + m_blob.temp_path().string() +
                        " to check it: " + std::error_code(m_trailer->error.load(), std::generic_category()).message() +
                        "; check the disk");
    }
    if (m_blob.size() + size > m_expect.entry->size) {
        throw Error(ErrorCode::verification, m_expect.label + ": the hub sent more than the " +
                                                 std::to_string(m_expect.entry->size) + " bytes it listed");
    }
    const std::uint64_t half = m_expect.entry->size / 2;
    const bool crossing_half = m_blob.size() < half && m_blob.size() + size >= half;
    m_blob.write(data, size);
    if (crossing_half) crash_point("half-written");
    if (m_trailer) {
        {
            std::lock_guard<std::mutex> lock(m_trailer->mutex);
            m_trailer->written = m_blob.size();
        }
        m_trailer->wake.notify_one();
    } else {
        m_checker.update(data, size);
        // The last byte of a file hashed here: start its writeback now, so
        // that the fsync at commit has little left to wait for.
        if (m_blob.size() == m_expect.entry->size) m_blob.start_writeback(0, m_blob.size());
    }
    if (m_events != nullptr) {
        Event event;
        event.kind = Event::Kind::download_bytes;
        event.path = m_display_path;
        event.repo = m_expect.repo;
        event.done = m_blob.size();
        event.total = m_expect.entry->size;
        m_events->on_event(event);
    }
}

void VerifyingTarget::restart() {
    (void)stop_trailer(true);
    m_blob.restart();
    m_checker.reset();
    m_resumed = 0;
    start_trailer();
}

std::string verify_cached_blob(const std::filesystem::path& blob, const Expectation& expect, bool trusted) {
    const hub::TreeEntry& entry = *expect.entry;
    // A blob of the wrong size is refused before reading a byte of it, so a
    // huge file planted in the cache costs nothing.
    auto check_size = [&](std::uint64_t on_disk) {
        if (on_disk != entry.size) {
            throw Error(ErrorCode::verification, expect.label + ": the cached blob has " + std::to_string(on_disk) +
                                                     " bytes, the hub listed " + std::to_string(entry.size));
        }
    };
    bool need_extra =
        expect.metadata_digest && expect.metadata_algorithm && *expect.metadata_algorithm != digest::Algorithm::sha256;
    // An LFS blob's name is its verified SHA-256: no need to read it again.
    if (trusted && entry.is_lfs() && !need_extra) {
        std::error_code ec;
        std::uintmax_t on_disk = std::filesystem::file_size(blob, ec);
        if (!ec) check_size(on_disk);
        if (auto sha = digest::from_hex(entry.lfs_sha256)) check_metadata(expect, *sha);
        check_pin(expect, entry.lfs_sha256);
        return entry.lfs_sha256;
    }
    StreamChecker checker(expect);
    std::uint64_t size = 0;
    digest::read_chunks(blob, check_size, [&](const void* data, std::size_t got) {
        check_cancel(expect);
        checker.update(static_cast<const char*>(data), got);
        size += got;
    });
    return checker.finish(size);
}

}  // namespace kernhub::fetch
