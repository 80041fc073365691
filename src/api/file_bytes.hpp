// Whole-file reads for artifacts the api layer parses (fatbins, cubins,
// inspected files): store::read_file_into with the api's error wording.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kernhub::api {

// Error(not_found) when the path is not a regular file, Error(internal)
// when it cannot be opened or read.
std::vector<std::uint8_t> read_file_bytes(const std::string& path);

}  // namespace kernhub::api
