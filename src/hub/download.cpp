// The download half of Fetcher: verified blobs, snapshot links.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "hub/fetcher.hpp"
#include "hub/verify.hpp"
#include "kernhub/error.hpp"
#include "store/cache.hpp"

namespace kernhub::hub {

std::string Fetcher::ensure_file(const FetchRequest& request, const std::string& commit, const Expectation& expect,
                                 std::uint64_t& bytes_downloaded) {
    const TreeEntry& entry = *expect.entry;
    store::RepoCache cache(m_root, request.repo.type, request.repo.repo_id);
    const std::string& etag = entry.etag();
    std::string sha256;
    if (!cache.has_blob(etag) && request.offline) {
        throw Error(ErrorCode::offline, expect.label + " is not in the cache under " + m_root.string() +
                                            "; fetch it once while online (offline mode is on)");
    }
    if (!cache.has_blob(etag)) {
        // One process downloads; the others wait on the lock, then find the blob.
        store::FileLock lock = cache.lock_blob(etag);
        if (!cache.has_blob(etag)) {
            store::IncompleteBlob blob = cache.begin_blob(etag);
            VerifyingTarget target(blob, expect, m_events);
            emit(Event::Kind::download_start, {}, entry.path, 0, entry.size);
            m_client->download(request.repo, commit, entry.path, target);
            sha256 = target.finish();
            blob.commit();
            bytes_downloaded += entry.size;
            emit(Event::Kind::download_done, {}, entry.path, entry.size, entry.size);
        }
    }
    // Offline without a record of the variant, nothing vouches for the blob:
    // check it against its hash, not just against metadata.json.
    if (sha256.empty()) sha256 = verify_cached_blob(cache.blob_path(etag), expect, request.offline);
    cache.link_snapshot(commit, entry.path, etag);
    return sha256;
}

FetchOutcome Fetcher::download_variant(const FetchRequest& request, const std::string& commit,
                                       const std::string& variant, const std::vector<const TreeEntry*>& entries) {
    store::RepoCache cache(m_root, request.repo.type, request.repo.repo_id);
    FetchOutcome outcome;
    outcome.commit = commit;
    outcome.variant = variant;
    outcome.variant_dir = cache.snapshot_dir(commit) / "build" / variant;
    const std::string prefix = "build/" + variant + "/";
    std::optional<MetadataDigest> metadata;
    for (const TreeEntry* entry : entries) {
        std::string relpath = entry->path.substr(prefix.size());
        Expectation expect;
        expect.entry = entry;
        expect.label = request.repo.repo_id + "@" + commit.substr(0, 12) + ":" + entry->path;
        if (metadata && relpath != "metadata.json") {
            auto it = metadata->files.find(relpath);
            if (it == metadata->files.end()) {
                throw Error(ErrorCode::verification, expect.label +
                                                         " is not covered by the variant's metadata.json digest; "
                                                         "refusing an unlisted file");
            }
            expect.metadata_algorithm = metadata->algorithm;
            expect.metadata_digest = it->second;
        }
        std::string sha256 = ensure_file(request, commit, expect, outcome.bytes_downloaded);
        outcome.files.push_back(FetchedFile{relpath, entry->size, sha256});
        if (relpath == "metadata.json") {
            auto text = store::read_file(cache.blob_path(entry->etag()));
            metadata = parse_metadata_digest(text.value_or(""), variant);
        }
    }
    if (metadata) {
        for (const auto& [path, digest_bytes] : metadata->files) {
            bool listed = std::any_of(entries.begin(), entries.end(),
                                      [&](const TreeEntry* e) { return e->path == prefix + path; });
            if (!listed) {
                throw Error(ErrorCode::verification, "metadata.json of " + request.repo.repo_id + " variant " +
                                                         variant + " lists " + path + ", which the repo does not have");
            }
        }
    }
    return outcome;
}

}  // namespace kernhub::hub
