// `kernhub cache verify [--repair]` (docs/cache-format.md, "Cache
// management"): every blob re-hashed against its name, every snapshot link
// checked to be the relative link into the same repo's blobs/ and to lead to
// a blob that verified, every variant record checked against the links.
#pragma once

#include <atomic>
#include <filesystem>

#include "kernhub/manage.hpp"

namespace kernhub::cacheadmin {

struct VerifyOptions {
    // Remove what is damaged (blobs under their blob lock, bad links, refs
    // and records naming removed files) so the next fetch gets it again.
    bool repair = false;
    // Blob locks exclude on this cache's filesystem (cache::flock_excludes)
    // and KERNHUB_NO_FLOCK is not set.
    bool use_locks = true;
    const std::atomic<bool>* cancel = nullptr;
};

// Problems are reported, not thrown: the caller decides what damage means.
// Error(internal) when the cache cannot be read or a repair cannot remove a
// file. When *cancel is set it stops between two units of work and returns
// what it found and removed so far, with CacheVerifyReport::interrupted set.
CacheVerifyReport verify_cache(const std::filesystem::path& root, const VerifyOptions& options);

}  // namespace kernhub::cacheadmin
