// python_env::package_folders: the lib/python3.<minor> folders of a few
// prefixes, read with opendir (bounded), never by running Python.
#include "common/python_env.hpp"

#include <dirent.h>

#include <algorithm>
#include <cstdlib>
#include <utility>

namespace kernhub::python_env {
namespace {

// A lib folder with more entries than this is not read further.
constexpr int k_max_lib_entries = 4096;

std::string from_environment(const char* name) {
    const char* value = std::getenv(name);
    return value == nullptr ? std::string() : std::string(value);
}

// The python3.<minor> folders of <prefix>/lib, newest minor first
// (python3.12 before python3.9).
std::vector<std::string> python_folders(const std::string& lib) {
    std::vector<std::pair<long, std::string>> found;
    DIR* dir = ::opendir(lib.c_str());
    if (dir == nullptr) return {};
    int seen = 0;
    const std::string prefix = "python3.";
    while (const dirent* entry = ::readdir(dir)) {
        if (++seen > k_max_lib_entries) break;
        const std::string name = entry->d_name;
        if (name.rfind(prefix, 0) != 0 || name.size() == prefix.size() || name.size() > prefix.size() + 4 ||
            name.find_first_not_of("0123456789", prefix.size()) != std::string::npos) {
            continue;
        }
        found.emplace_back(std::stol(name.substr(prefix.size())), lib + "/" + name);
    }
    ::closedir(dir);
    std::stable_sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    std::vector<std::string> folders;
    folders.reserve(found.size());
    for (auto& entry : found) folders.push_back(std::move(entry.second));
    return folders;
}

}  // namespace

std::vector<std::string> package_folders() {
    std::vector<std::string> prefixes;
    for (const char* variable : {"VIRTUAL_ENV", "CONDA_PREFIX"}) {
        const std::string value = from_environment(variable);
        if (!value.empty() && value.front() == '/') prefixes.push_back(value);
    }
    const std::string home = from_environment("HOME");
    if (!home.empty() && home.front() == '/') prefixes.push_back(home + "/.local");
    prefixes.emplace_back("/usr/local");
    prefixes.emplace_back("/usr");
    std::vector<std::string> folders;
    for (const auto& prefix : prefixes) {
        for (const auto& python : python_folders(prefix + "/lib")) {
            for (const char* packages : {"site-packages", "dist-packages"}) {
                folders.push_back(python + "/" + packages);
            }
        }
    }
    return folders;
}

}  // namespace kernhub::python_env
