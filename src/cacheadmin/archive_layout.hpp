// The cache layout as a cache archive may hold it: shared by export and
// import (cache_export.cpp, cache_import.cpp). Internal to cacheadmin.
#pragma once

#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "archive/archive.hpp"

namespace kernhub::cacheadmin {

enum class Kind { cachedir_tag, directory, blob, link, ref, hf_tree, kernhub_tree, variant_record };

// Where an archive entry sits in the cache layout. `problem` is empty when
// the entry belongs there; the other fields then say what it is.
struct Placement {
    Kind kind = Kind::directory;
    std::string folder;
    std::string commit;
    std::string name;  // blob: etag; link: path in the snapshot; ref: revision; record: variant
    std::string problem;
};

// Where `entry` sits in the cache layout; `problem` says why it does not.
Placement place(const archive::Entry& entry);

// Empty for a link from snapshots/<commit>/<path> into blobs/ of the same
// repo folder, the one kind of link a cache holds; else why not.
std::string snapshot_link_problem(const archive::Entry& entry);

// lstat of `path` says it is of `type` (S_IFDIR, S_IFREG...), without
// following a link; its stat goes to `out` when given.
bool lstat_is(const std::filesystem::path& path, mode_t type, struct stat* out = nullptr);

}  // namespace kernhub::cacheadmin
