// Local overrides (docs/configuration.md, "Local kernels"): LOCAL_KERNELS points a repo at
// a build folder on this machine, as in the Python `kernels` library. The
// variant is chosen from the folder's subfolders by the same selection as a
// hub's listing; nothing is requested and nothing is written to the cache.
#pragma once

#include <cstddef>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "fetch/fetcher.hpp"
#include "select/variant.hpp"

namespace kernhub::fetch {

// Bounds: entries of one LOCAL_KERNELS value, variant folders looked at in
// one folder, files listed in one local variant.
inline constexpr std::size_t k_max_local_kernels = 1000;
inline constexpr std::size_t k_max_local_variants = 1000;
inline constexpr std::size_t k_max_local_files = 100000;

// "ORG/REPO=PATH[:ORG/REPO=PATH...]", the kernels library's syntax: entries
// split at ':', each at its first '='; a later entry for a repo replaces an
// earlier one. An entry without '=' (what a path holding ':' becomes) is
// Error(usage) naming `named_by` (LOCAL_KERNELS) and saying that a path
// cannot hold ':'. An empty value overrides nothing.
std::map<std::string, std::filesystem::path> parse_local_kernels(const std::string& text, const std::string& named_by);

struct LocalVariant {
    std::string variant;             // the chosen folder's name
    std::filesystem::path dir;       // the variant folder
    std::vector<FetchedFile> files;  // relative paths and sizes; no SHA-256 (nothing to check against)
    std::vector<select::Candidate> candidates;
    select::Selection selection;  // empty when `folder` is the variant itself
};

// Where the kernels library looks, in its order: the variant `host` selects
// among the subfolders of `folder`, then among those of `folder`/build, and
// else `folder` itself when it holds a metadata.json (a variant folder).
// Error(not_found) naming the folder and each rejected variant otherwise.
// Python bytecode is left out of the file list, as a fetch leaves it out.
LocalVariant resolve_local_kernel(const std::filesystem::path& folder, const select::HostFacts& host,
                                  const std::string& required_file);

}  // namespace kernhub::fetch
