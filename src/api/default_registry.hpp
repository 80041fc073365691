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
// CMake build tree (it holds CMakeCache.txt, or cmake_install.cmake for a
// subproject's folder) owned by this user or root that others may not
// write, <dir>/share/kernhub/registry.json, where a build tree keeps its
// copy. Empty when the code file is unknown.
std::vector<std::filesystem::path> default_registry_candidates(const loader::CodeFile& code);

// A registry file that only this user or root can have put there: the
// file, share/kernhub/ and share/ are owned by one of them and not
// writable by others (a program built in /tmp/build would otherwise read
// whatever another user put in /tmp/share).
bool is_private_registry_file(const std::filesystem::path& file);

// The first candidate for the code of this library that is a private
// registry file; empty when none is (the default layer is then skipped).
std::filesystem::path find_default_registry();

}  // namespace kernhub::api
