#include "loader/verified_load.hpp"

#include <optional>

#include "digest/digest.hpp"
#include "kernhub/error.hpp"

namespace kernhub::loader {

namespace {

Error changed(const VerifiedSource& source, const std::string& what) {
    return Error(ErrorCode::verification, source.label.string() + " (blob " + source.blob.string() + ") " + what +
                                              "; it was not loaded: remove the repo's folder " +
                                              source.blob.parent_path().parent_path().string() +
                                              " from the cache and fetch again");
}

}  // namespace

VerifiedSource verified_source(const cache::RepoCache& cache, const std::string& commit, const std::string& relpath,
                               const std::string& sha256, std::uint64_t size, const std::filesystem::path& label,
                               cache::LinkArea area) {
    VerifiedSource source;
    source.label = label;
    source.sha256 = sha256;
    source.size = size;
    std::optional<std::string> etag = cache.linked_blob(commit, relpath, area);
    if (!etag) {
        throw Error(ErrorCode::verification,
                    label.string() +
                        " is not the link kernhub writes into the repo's blobs/ (it, or a folder on the way, was "
                        "replaced); it was not loaded: fetch again to rebuild the snapshot");
    }
    source.etag = *etag;
    source.blob = cache.blob_path(source.etag);
    // The blob's name is the hub's hash: an LFS blob is named by the SHA-256
    // the record must hold too, so the two sources have to agree.
    if (source.etag.size() == 64 && source.etag != sha256) {
        throw changed(source, "is named by sha256 " + source.etag + " but the variant record has " + sha256);
    }
    return source;
}

std::string read_verified(const VerifiedSource& source, const std::function<void(const void*, std::size_t)>& sink) {
    digest::Hasher sha256(digest::Algorithm::sha256);
    std::optional<digest::GitBlobHasher> git;
    try {
        digest::read_chunks(
            source.blob,
            [&](std::uint64_t on_disk) {
                // Bounded by what the fetch verified: a blob grown since is not copied.
                if (on_disk != source.size) {
                    throw changed(source, "has " + std::to_string(on_disk) + " bytes, " + std::to_string(source.size) +
                                              " were verified");
                }
                if (source.etag.size() == 40) git.emplace(on_disk);
            },
            [&](const void* data, std::size_t size) {
                sha256.update(data, size);
                if (git) git->update(data, size);
                sink(data, size);
            },
            /*follow_links=*/false);
    } catch (const Error& e) {
        // A blob that became a link, a FIFO or unreadable is refused like a changed one.
        if (e.code() != ErrorCode::internal) throw;
        throw changed(source, "cannot be read as a regular file (" + e.plain_message() + ")");
    }
    std::string actual = digest::to_hex(sha256.finish());
    if (actual != source.sha256) {
        throw changed(source, "changed since it was verified (sha256 " + actual + ", expected " + source.sha256 + ")");
    }
    if (git) {
        const std::string sha1 = git->finish_hex();
        if (sha1 != source.etag) {
            throw changed(source, "has git blob sha1 " + sha1 + " but is named " + source.etag);
        }
    }
    return actual;
}

}  // namespace kernhub::loader
