// verify_on_load (docs/cache.md "Loading exactly the verified bytes"): the artifact is read once
// from its blob, hashed as it is copied, and only that copy is loaded.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

#include "cache/cache.hpp"

namespace kernhub::loader {

// The blob behind one cached artifact and what its bytes must hash to.
struct VerifiedSource {
    std::filesystem::path blob;  // <repo folder>/blobs/<etag>, opened without following links
    std::string etag;            // LFS: the SHA-256; plain files: the git blob SHA-1
    std::string sha256;          // what the fetch verified (the variant record's hash)
    std::uint64_t size = 0;
    std::filesystem::path label;  // the snapshot path, for messages
};

// The link of `relpath` in `area` must be exactly the one kernhub writes,
// through real folders, to a blob named by a hash. Error(verification)
// naming the link otherwise.
VerifiedSource verified_source(const cache::RepoCache& cache, const std::string& commit, const std::string& relpath,
                               const std::string& sha256, std::uint64_t size, const std::filesystem::path& label,
                               cache::LinkArea area = cache::LinkArea::snapshot);

// Opens the blob once, hands its bytes in order to `sink` while hashing
// them, and returns their SHA-256 once they match both the blob's name and
// the recorded hash. Error(verification) naming the file otherwise; the
// caller must then drop what the sink received.
std::string read_verified(const VerifiedSource& source, const std::function<void(const void*, std::size_t)>& sink);

}  // namespace kernhub::loader
