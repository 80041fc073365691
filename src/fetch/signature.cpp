// The signature step of a fetch (docs/trust.md, "How signatures are verified"): when
// a policy applies, the variant's metadata.json.sigstore is verified over
// its metadata.json before any other file of the variant is downloaded or
// used, and both are placed in the cache only once the signature holds.
#include <algorithm>
#include <functional>
#include <optional>
#include <set>

#include "cache/cache.hpp"
#include "digest/digest.hpp"
#include "fetch/fetcher.hpp"
#include "fetch/stream_check.hpp"
#include "kernhub/error.hpp"

namespace kernhub::fetch {

namespace {

constexpr const char* k_signed_file = "metadata.json";
constexpr const char* k_bundle_file = "metadata.json.sigstore";
// metadata.json lists a digest per file; a real one is a few KiB.
constexpr std::uint64_t k_max_signed_metadata_bytes = 16u << 20;

// A download kept in memory, at most the listed size (itself capped).
class MemoryTarget final : public http::BodyTarget {
public:
    MemoryTarget(std::string& bytes, const Expectation& expect, std::uint64_t listed)
        : m_bytes(bytes), m_checker(expect), m_listed(listed) {}

    std::uint64_t size() const override { return m_bytes.size(); }
    void write(const char* data, std::size_t size) override {
        if (m_bytes.size() + size > m_listed) {
            throw Error(ErrorCode::verification, "the hub sent more than the " + std::to_string(m_listed) +
                                                     " bytes it listed for a signed file");
        }
        m_bytes.append(data, size);
        m_checker.update(data, size);
    }
    void restart() override {
        m_bytes.clear();
        m_checker.reset();
    }
    std::optional<std::uint64_t> expected_size() const override { return m_listed; }
    std::string finish() { return m_checker.finish(m_bytes.size()); }

private:
    std::string& m_bytes;
    StreamChecker m_checker;
    std::uint64_t m_listed;
};

const hub::TreeEntry* find_entry(const std::vector<const hub::TreeEntry*>& entries, const std::string& path) {
    auto it = std::find_if(entries.begin(), entries.end(), [&](const hub::TreeEntry* e) { return e->path == path; });
    return it == entries.end() ? nullptr : *it;
}

}  // namespace

std::string policy_digest(const sigstore::Policy& policy) {
    // Each field length-prefixed, so no two policies share a text.
    std::string text = "kernhub-policy-1\n";
    const auto add = [&text](const std::string& field) { text += std::to_string(field.size()) + ':' + field + '\n'; };
    add(policy.issuer);
    add(policy.repository);
    std::vector<std::string> identities = policy.identities;
    std::sort(identities.begin(), identities.end());
    for (const auto& identity : identities) add(identity);
    return digest::sha256_hex(text);
}

// One of the two signed files' bytes, checked against the listing: from a
// cached blob when there is one (offline too), else downloaded into memory.
// A cached blob that does not match goes into `damaged`.
std::string Fetcher::signed_file_bytes(const FetchRequest& request, const std::string& commit, const std::string& where,
                                       const hub::TreeEntry& entry, std::uint64_t cap, const std::string& cap_name,
                                       std::set<std::string>& damaged) {
    if (entry.size > cap) {
        throw Error(ErrorCode::verification, where + ": " + entry.path + " is listed with " +
                                                 std::to_string(entry.size) + " bytes, more than " + cap_name);
    }
    cache::RepoCache cache(m_root, request.repo.type, request.repo.repo_id);
    Expectation expect;
    expect.entry = &entry;
    expect.label = request.repo.repo_id + "@" + commit.substr(0, 12) + ":" + entry.path;
    expect.cancel = request.cancel;
    std::string bytes;
    if (cache.has_blob(entry.etag()) && damaged.count(entry.etag()) == 0) {
        const cache::ReadStatus status = cache::read_file_into(cache.blob_path(entry.etag()), bytes, cap);
        if (status.error == 0) {
            StreamChecker checker(expect);
            checker.update(bytes.data(), bytes.size());
            try {
                checker.finish(bytes.size());
                return bytes;
            } catch (const Error&) {
                if (request.offline) throw;  // the cached copy is damaged
                damaged.insert(entry.etag());
            }
        } else if (request.offline) {
            throw Error(ErrorCode::verification, "the cached copy of " + expect.label + " cannot be read (" +
                                                     std::to_string(status.error) + "); fetch it again online");
        }
        bytes.clear();
    }
    if (request.offline || m_client == nullptr) {
        throw Error(ErrorCode::offline, expect.label + " is not in the cache under " + m_root.string() + "; fetch " +
                                            request.repo.repo_id + " once while online (offline mode is on)");
    }
    MemoryTarget target(bytes, expect, entry.size);
    m_client->download(request.repo, commit, entry.path, target);
    target.finish();
    return bytes;
}

namespace {

// Only once verified may a signed file become visible, like any verified
// blob: committed (replacing a damaged copy) and linked.
void place_signed_file(const FetchRequest& request, const cache::RepoCache& cache, const std::string& commit,
                       bool locking, const hub::TreeEntry& entry, const std::string& bytes,
                       const std::set<std::string>& damaged, const std::function<void()>& before_change,
                       cache::LinkArea area) {
    std::optional<cache::FileLock> lock;
    if (locking) lock.emplace(cache.lock_blob(entry.etag(), request.cancel));
    // Under the lock nobody else is placing a good copy; without it the
    // damaged one is left to the renames, as ensure_file does.
    // A damaged blob or a link not yet made changes the variant: the kernels
    // library's receipts of it go first.
    // A link made in the partial area changes nothing the kernels library
    // reads; a damaged blob replaced does, wherever it is linked.
    if (damaged.count(entry.etag()) != 0 ||
        (area == cache::LinkArea::snapshot &&
         !cache.snapshot_links_blob(commit, entry.path, entry.etag(), entry.size))) {
        before_change();
    }
    if (locking && damaged.count(entry.etag()) != 0) cache.remove_blob(entry.etag());
    if (!cache.has_blob(entry.etag()) || (!locking && damaged.count(entry.etag()) != 0)) {
        cache::IncompleteBlob blob = cache.begin_blob(entry.etag());
        blob.write(bytes.data(), bytes.size());
        blob.commit();
    }
    cache.link_snapshot(commit, entry.path, entry.etag(), true, area);
}

}  // namespace

SignedMetadata Fetcher::verify_signature(const FetchRequest& request, const std::string& commit,
                                         const std::string& variant, const std::vector<const hub::TreeEntry*>& entries,
                                         cache::LinkArea area) {
    const SignatureCheck& check = *request.signature;
    const std::string prefix = "build/" + variant + "/";
    const std::string where = "variant " + variant + " of " + request.repo.repo_id + "@" + commit.substr(0, 12);
    const hub::TreeEntry* signed_entry = find_entry(entries, prefix + k_signed_file);
    const hub::TreeEntry* bundle_entry = find_entry(entries, prefix + k_bundle_file);
    if (signed_entry == nullptr || bundle_entry == nullptr) {
        throw Error(ErrorCode::verification,
                    where + " has no " + (signed_entry == nullptr ? k_signed_file : k_bundle_file) +
                        ", but the registry entry's \"signature\" policy requires a signed variant; nothing was "
                        "downloaded (remove the policy only if you do not need to know who built it)");
    }
    std::set<std::string> damaged;  // cached blobs that did not match the listing
    const std::string metadata = signed_file_bytes(request, commit, where, *signed_entry, k_max_signed_metadata_bytes,
                                                   "k_max_signed_metadata_bytes", damaged);
    const std::string bundle = signed_file_bytes(request, commit, where, *bundle_entry, sigstore::k_max_bundle_bytes,
                                                 "sigstore::k_max_bundle_bytes", damaged);
    sigstore::ArtifactDigest artifact;
    digest::Hasher hasher(digest::Algorithm::sha256);
    hasher.update(metadata.data(), metadata.size());
    artifact.sha256 = hasher.finish();
    sigstore::Verified verified;
    try {
        verified = sigstore::verify_bundle(bundle, artifact, *check.root, check.policy);
    } catch (const Error& e) {
        throw Error(e.code(), where + ": " + e.plain_message(), e.hint(), e.context());
    }
    emit(Event::Kind::info, "signature of " + where + " verified: signed by " + verified.identity + " (" +
                                verified.issuer + "), logged at " + std::to_string(verified.log_time));
    cache::RepoCache cache(m_root, request.repo.type, request.repo.repo_id);
    const bool locking = request.use_locks && cache::flock_excludes(m_root);
    const auto before_change = [&] { drop_receipts(request, commit, variant); };
    place_signed_file(request, cache, commit, locking, *signed_entry, metadata, damaged, before_change, area);
    place_signed_file(request, cache, commit, locking, *bundle_entry, bundle, damaged, before_change, area);
    return SignedMetadata{
        cache::RecordedSignature{verified.identity, verified.issuer, verified.repository, verified.log_time,
                                 verified.log_index, check.root_sha256, policy_digest(check.policy)},
        metadata};
}

}  // namespace kernhub::fetch
