// --keep-lock: the commits a lock file pins stay through prune.
#include "cache/cache.hpp"
#include "cacheadmin/prune.hpp"
#include "common/hint.hpp"
#include "kernhub/error.hpp"
#include "lockfile/lockfile.hpp"

namespace kernhub::cacheadmin {

KeptCommits locked_commits(const std::filesystem::path& lock_file, const std::atomic<bool>* cancel) {
    const std::optional<std::string> text = lockfile::read_lock_file(lock_file);
    if (!text) {
        throw Error(ErrorCode::not_found,
                    "cannot open the lock file " + lock_file.string() +
                        " whose pins prune is to keep: it does not exist; check the path",
                    hint::setting("prune.keep_locks"));
    }
    const lockfile::AnyLock parsed = lockfile::parse_lock(*text, lock_file.string(), cancel);
    KeptCommits kept;
    for (const auto& [name, kernel] : parsed.kernhub.kernels) {
        kept[cache::repo_folder_name(kernel.repo_type, kernel.repo_id)].insert(kernel.commit);
    }
    // kernels.lock names kernel repos only.
    for (const auto& entry : parsed.kernels) {
        kept[cache::repo_folder_name(RepoType::kernel, entry.repo_id)].insert(entry.commit);
    }
    return kept;
}

}  // namespace kernhub::cacheadmin
