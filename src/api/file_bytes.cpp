#include "api/file_bytes.hpp"

#include <filesystem>

#include "kernhub/error.hpp"
#include "store/cache.hpp"

namespace kernhub::api {

std::vector<std::uint8_t> read_file_bytes(const std::string& path) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) {
        throw Error(ErrorCode::not_found, "file " + path + " does not exist or is not a regular file");
    }
    std::vector<std::uint8_t> bytes;
    const store::ReadStatus status = store::read_file_into(path, bytes);
    if (status.error != 0 && !status.opened) {
        throw Error(ErrorCode::internal, "cannot open " + path + "; check permissions");
    }
    if (status.error != 0) throw Error(ErrorCode::internal, "cannot read " + path + "; check the disk");
    return bytes;
}

}  // namespace kernhub::api
