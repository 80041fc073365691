// Cache archives (docs/cache-format.md, "Cache archives"): a reproducible
// tar of the cache, or of some commits in it, and its import into another
// cache after every blob was checked against its name. The tar itself is the
// archive module's; this file knows the cache layout.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "archive/archive.hpp"
#include "common/repo.hpp"

namespace kernhub::cacheadmin {

namespace fs = std::filesystem;

// What an import accepts at most. The per-file limits of refs and side data
// are store's (k_max_ref_bytes, k_max_listing_bytes, k_max_record_bytes).
inline constexpr std::uint64_t k_import_max_entries = 200'000;
inline constexpr std::uint64_t k_import_max_blob_bytes = 16ull << 30;
inline constexpr std::uint64_t k_import_max_total_bytes = 256ull << 30;
inline constexpr std::size_t k_import_max_path_bytes = 1024;
inline constexpr std::uint64_t k_import_max_cachedir_tag_bytes = 4u << 10;

// One repo folder to export: every snapshot in it, or one commit.
struct ExportSelection {
    RepoType type = RepoType::kernel;
    std::string repo_id;
    std::optional<std::string> commit;
};

struct ExportStats {
    std::size_t entries = 0;
    std::uint64_t bytes = 0;
    archive::Compression compression = archive::Compression::none;
    std::vector<std::string> repos;  // "kernels--org--name" folders exported
};

// Writes `file` holding, for each selection (every repo folder of `root`
// when there are none): the snapshot links of the commit(s), the blobs they
// link to, the refs pointing at those commits, huggingface_hub's
// trees/<commit>.json and kernhub's .kernhub/trees and .kernhub/variants
// records of them. Never partial downloads, .locks or .kernhub/tmp. A
// snapshot entry that is not a link to a present blob is Error(verification)
// naming it: the archive would carry a broken cache.
ExportStats export_cache(const fs::path& root, const std::vector<ExportSelection>& selections, const fs::path& file,
                         const std::atomic<bool>* cancel = nullptr);

struct ImportStats {
    std::size_t entries = 0;
    std::size_t blobs = 0;       // placed under blobs/
    std::size_t links = 0;       // snapshot links made
    std::size_t refs = 0;        // refs written
    std::size_t side_files = 0;  // trees and variant records written
    std::size_t skipped = 0;     // already in the cache as the archive has them
    std::vector<std::string> repos;
};

// The extraction policy of an import: the cache layout only (see the .cpp).
archive::ExtractionPolicy import_policy();

// Extracts `file` into a private folder inside `root` under import_policy(),
// checks every blob against its name, every ref, link and side file, and only
// then moves the content into the cache: blobs under their lock, links, side
// data, refs last. Any refusal is Error(verification) and leaves the cache
// (and the temp folder) as they were.
ImportStats import_cache(const fs::path& root, const fs::path& file, const std::atomic<bool>* cancel = nullptr);

}  // namespace kernhub::cacheadmin
