// Where the default registry is: relative to the file that holds kernhub's
// code, never a path fixed at build time, so an installed tree can move
// (docs/embedding.md "Library and packaging").
#pragma once

#include <filesystem>
#include <vector>

#include "loader/code_file.hpp"

namespace kernhub::api {

// The places to look, in order: the installed layout (from the executable's
// bin/ or the library's lib/ to share/kernhub/registry.json, both relative
// paths fixed at configure time), then, only when the file's folder is a
// CMake build tree (it holds CMakeCache.txt) that others may not write,
// <dir>/share/kernhub/registry.json, where a build tree keeps its copy.
// Empty when the code file is unknown.
std::vector<std::filesystem::path> default_registry_candidates(const loader::CodeFile& code);

// The first candidate that exists for the code of this library; empty when
// none does (the default layer is then skipped).
std::filesystem::path find_default_registry();

}  // namespace kernhub::api
