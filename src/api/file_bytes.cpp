#include "api/file_bytes.hpp"

#include <filesystem>
#include <fstream>
#include <iterator>

#include "kernhub/error.hpp"

namespace kernhub::api {

std::vector<std::uint8_t> read_file_bytes(const std::string& path) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) {
        throw Error(ErrorCode::not_found, "file " + path + " does not exist or is not a regular file");
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(ErrorCode::internal, "cannot open " + path + "; check permissions");
    std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (in.bad()) throw Error(ErrorCode::internal, "cannot read " + path + "; check the disk");
    return bytes;
}

}  // namespace kernhub::api
