#include "api/default_registry.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <system_error>

namespace kernhub::api {

namespace {

// A CMake build tree that others (outside the owner and its group) cannot
// change: a group-writable one is what umask 002 makes. The top-level build
// folder holds CMakeCache.txt; a subproject's (add_subdirectory,
// FetchContent) holds cmake_install.cmake. The copy next to
// the code file is for build trees alone: next to a program or library put
// in a shared folder such as /tmp, <dir>/share/kernhub/registry.json would
// be anyone's to write.
// Owned by this user or root, and not writable by others.
bool is_private(const struct stat& info) {
    return (info.st_uid == ::geteuid() || info.st_uid == 0) && (info.st_mode & S_IWOTH) == 0;
}

bool is_private_build_tree(const std::filesystem::path& dir) {
    struct stat folder {};
    struct stat marker {};
    if (::stat(dir.c_str(), &folder) != 0 || !S_ISDIR(folder.st_mode) || !is_private(folder)) return false;
    for (const char* name : {"CMakeCache.txt", "cmake_install.cmake"}) {
        if (::lstat((dir / name).c_str(), &marker) == 0 && S_ISREG(marker.st_mode) && is_private(marker)) return true;
    }
    return false;
}

}  // namespace

bool is_private_registry_file(const std::filesystem::path& file) {
    struct stat info {};
    if (::stat(file.c_str(), &info) != 0 || !S_ISREG(info.st_mode) || !is_private(info)) return false;
    // share/ and share/kernhub/: whoever may create or rename entries
    // there may put another registry.json in place.
    for (const std::filesystem::path& folder : {file.parent_path(), file.parent_path().parent_path()}) {
        if (::stat(folder.c_str(), &info) != 0 || !S_ISDIR(info.st_mode) || !is_private(info)) return false;
    }
    return true;
}

// Where the installed registry lies relative to the program's or the shared
// library's folder (the two are the same path in a default install).
constexpr const char* k_registry_from_bindir = KERNHUB_REGISTRY_FROM_BINDIR;
constexpr const char* k_registry_from_libdir = KERNHUB_REGISTRY_FROM_LIBDIR;

std::vector<std::filesystem::path> default_registry_candidates(const loader::CodeFile& code) {
    if (code.path.empty()) return {};
    const std::filesystem::path dir = code.path.parent_path();
    const char* installed = code.main_program ? k_registry_from_bindir : k_registry_from_libdir;
    std::vector<std::filesystem::path> candidates{(dir / installed).lexically_normal()};
    if (is_private_build_tree(dir)) candidates.push_back(dir / "share" / "kernhub" / "registry.json");
    return candidates;
}

std::filesystem::path find_default_registry() {
    // Any object of this library will do: it lives in the same file, which
    // does not change while the process runs, so the lookup is done once.
    static const char anchor = 0;
    static const std::vector<std::filesystem::path> candidates =
        default_registry_candidates(loader::file_containing(&anchor));
    for (const auto& candidate : candidates) {
        if (is_private_registry_file(candidate)) return candidate;
    }
    return {};
}

}  // namespace kernhub::api
