// Putting a verified file somewhere else without ever showing it half
// written: a hard link when the target is on the blob's filesystem, else a
// copy. Used to lay out static hub trees from cache blobs
// (docs/ci-images.md, "How a mirror tree is written").
#pragma once

#include <filesystem>

namespace kernhub::cache {

enum class Placed { linked, copied };

// Makes `target` hold the bytes of `source`: a hard link to it when both are
// on one filesystem (and the kernel allows the link), else a copy that is
// fsynced. Either way the new name is made under a temp name in `temp_dir`
// (same filesystem as the target) and renamed over `target`, so a reader
// sees the old file or the complete new one. Creates the target's parent
// folders. The result is read-only (0444), like a cache blob. Throws
// Error(internal) naming the path on failure.
Placed place_file(const std::filesystem::path& source, const std::filesystem::path& target,
                  const std::filesystem::path& temp_dir);

}  // namespace kernhub::cache
