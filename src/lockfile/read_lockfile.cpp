// The bounded read of a lock file, shared by `kernhub lock`, prewarm and
// `cache prune --keep-lock`.
#include <cerrno>
#include <cstring>

#include "cache/cache.hpp"
#include "kernhub/error.hpp"
#include "lockfile/lockfile.hpp"

namespace kernhub::lockfile {

std::optional<std::string> read_lock_file(const std::filesystem::path& path) {
    std::string text;
    const cache::ReadStatus status = cache::read_file_into(path, text, k_max_lock_bytes);
    if (status.error == 0) return text;
    if (!status.opened && status.error == ENOENT) return std::nullopt;
    if (status.not_regular || status.error == EISDIR) {
        throw Error(ErrorCode::usage,
                    "lock file " + path.string() + " is not a regular file (a directory, FIFO or device)");
    }
    if (status.error == EFBIG) {
        throw Error(ErrorCode::usage, "lock file " + path.string() + " is larger than " +
                                          std::to_string(k_max_lock_bytes) + " bytes (k_max_lock_bytes)");
    }
    throw Error(ErrorCode::internal,
                "cannot read " + path.string() + ": " + std::strerror(status.error) + "; check permissions");
}

}  // namespace kernhub::lockfile
