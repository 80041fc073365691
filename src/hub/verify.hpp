// Verification while downloading: the bytes are hashed as they stream into
// the temp blob, so no second pass over the file is needed.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "digest/digest.hpp"
#include "http/http.hpp"
#include "hub/hub_client.hpp"
#include "kernhub/events.hpp"
#include "store/cache.hpp"

namespace kernhub::hub {

// The per-file digests a variant's metadata.json declares (kernels format:
// digest{algorithm, files{relpath: base64}}).
struct MetadataDigest {
    digest::Algorithm algorithm = digest::Algorithm::sha256;
    std::map<std::string, digest::Bytes> files;
};

// nullopt when metadata.json has no "digest". Error(verification) naming the
// variant when it is malformed.
std::optional<MetadataDigest> parse_metadata_digest(const std::string& json, const std::string& variant);

// What a downloaded or cached file must match.
struct Expectation {
    const TreeEntry* entry = nullptr;
    std::string label;  // "repo@commit:path" for messages
    std::optional<digest::Algorithm> metadata_algorithm;
    std::optional<digest::Bytes> metadata_digest;
};

// Streams into an IncompleteBlob, computing SHA-256 (always), the git blob
// SHA-1 (plain files) and the metadata digest algorithm when it differs.
class VerifyingTarget final : public http::BodyTarget {
public:
    VerifyingTarget(store::IncompleteBlob& blob, const Expectation& expect, EventSink* events);

    std::uint64_t size() const override { return m_blob.size(); }
    void write(const char* data, std::size_t size) override;
    void restart() override;

    // Checks size and every digest; returns the SHA-256 hex. Throws
    // Error(verification) naming the file and both values on a mismatch.
    std::string finish();

private:
    void reset_hashers();

    store::IncompleteBlob& m_blob;
    const Expectation& m_expect;
    EventSink* m_events;
    digest::Hasher m_sha256{digest::Algorithm::sha256};
    std::optional<digest::GitBlobHasher> m_git;
    std::optional<digest::Hasher> m_extra;
};

// Verifies a blob already in the cache against the metadata digest (the hub
// hash was checked when it was written). Returns its SHA-256 hex.
std::string verify_cached_blob(const std::filesystem::path& blob, const Expectation& expect);

}  // namespace kernhub::hub
