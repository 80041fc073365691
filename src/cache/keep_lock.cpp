// --keep-lock: the commits a lock file pins stay through prune.
#include "cache/prune.hpp"
#include "kernhub/error.hpp"
#include "lock/lock.hpp"
#include "store/cache.hpp"

namespace kernhub::cache {

KeptCommits locked_commits(const std::filesystem::path& lock_file) {
    const std::optional<std::string> text = lock::read_lock_file(lock_file);
    if (!text) {
        throw Error(ErrorCode::not_found, "cannot open the lock file " + lock_file.string() +
                                              " given with --keep-lock: it does not exist; check the path");
    }
    const lock::AnyLock parsed = lock::parse_lock(*text, lock_file.string());
    KeptCommits kept;
    for (const auto& [name, kernel] : parsed.kernhub.kernels) {
        kept[store::repo_folder_name(kernel.repo_type, kernel.repo_id)].insert(kernel.commit);
    }
    // kernels.lock names kernel repos only.
    for (const auto& entry : parsed.kernels) {
        kept[store::repo_folder_name(RepoType::kernel, entry.repo_id)].insert(entry.commit);
    }
    return kept;
}

}  // namespace kernhub::cache
