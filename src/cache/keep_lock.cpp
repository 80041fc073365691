// --keep-lock: the commits a lock file pins stay through prune.
#include <cerrno>
#include <cstring>

#include "cache/prune.hpp"
#include "kernhub/error.hpp"
#include "lock/lock.hpp"
#include "store/cache.hpp"

namespace kernhub::cache {

KeptCommits locked_commits(const std::filesystem::path& lock_file) {
    std::string text;
    const store::ReadStatus status = store::read_file_into(lock_file, text, lock::k_max_lock_bytes);
    if (!status.opened) {
        throw Error(ErrorCode::not_found, "cannot open the lock file " + lock_file.string() +
                                              " given with --keep-lock: " + std::strerror(status.error) +
                                              "; check the path");
    }
    if (status.error == EFBIG) {
        throw Error(ErrorCode::usage, "lock file " + lock_file.string() + " is larger than " +
                                          std::to_string(lock::k_max_lock_bytes) + " bytes (k_max_lock_bytes)");
    }
    if (status.error != 0) {
        throw Error(ErrorCode::internal,
                    "cannot read " + lock_file.string() + ": " + std::strerror(status.error) + "; check the disk");
    }
    const lock::AnyLock parsed = lock::parse_lock(text, lock_file.string());
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
