// python_env::package_folders: the lib/python3.<minor> folders of a few
// prefixes, read with opendir (bounded), never by running Python.
#include "common/python_env.hpp"

#include <dirent.h>

#include <sys/stat.h>

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

// "python3.12" -> 12, "python3.13t" -> 13 with free_threaded; nullopt for
// any other name.
std::optional<long> python_minor(const std::string& name, bool& free_threaded) {
    const std::string prefix = "python3.";
    if (name.rfind(prefix, 0) != 0) return std::nullopt;
    std::string digits = name.substr(prefix.size());
    free_threaded = !digits.empty() && digits.back() == 't';
    if (free_threaded) digits.pop_back();
    if (digits.empty() || digits.size() > 4 || digits.find_first_not_of("0123456789") != std::string::npos) {
        return std::nullopt;
    }
    return std::stol(digits);
}

bool is_file(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

PythonFacts facts_of(const std::string& python_folder, long minor, bool free_threaded) {
    PythonFacts facts;
    facts.version = {3, static_cast<int>(minor)};
    facts.free_threaded = free_threaded;
    facts.source = python_folder;
    for (const char* packages : {"/site-packages", "/dist-packages"}) {
        if (is_file(python_folder + packages + "/mlx/__init__.py")) facts.mlx = true;
    }
    return facts;
}

// The python3.<minor>[t] folders of <prefix>/lib, newest minor first
// (python3.12 before python3.9).
std::vector<std::string> python_folders(const std::string& lib) {
    std::vector<std::pair<long, std::string>> found;
    DIR* dir = ::opendir(lib.c_str());
    if (dir == nullptr) return {};
    int seen = 0;
    while (const dirent* entry = ::readdir(dir)) {
        if (++seen > k_max_lib_entries) break;
        const std::string name = entry->d_name;
        bool free_threaded = false;
        const std::optional<long> minor = python_minor(name, free_threaded);
        if (!minor) continue;
        found.emplace_back(*minor, lib + "/" + name);
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

std::optional<PythonFacts> python_of(const std::string& path) {
    // Walk up: .../lib/python3.12/site-packages[/torch...].
    std::string rest = path;
    while (!rest.empty() && rest.back() == '/') rest.pop_back();
    for (int depth = 0; depth < 64 && !rest.empty(); ++depth) {
        const std::size_t slash = rest.rfind('/');
        if (slash == std::string::npos) return std::nullopt;
        const std::string name = rest.substr(slash + 1);
        const std::string parent = rest.substr(0, slash);
        if (name == "site-packages" || name == "dist-packages") {
            const std::size_t up = parent.rfind('/');
            bool free_threaded = false;
            const std::optional<long> minor =
                up == std::string::npos ? std::nullopt : python_minor(parent.substr(up + 1), free_threaded);
            if (minor && parent.substr(0, up).size() >= 4 && parent.compare(up - 4, 4, "/lib") == 0) {
                return facts_of(parent, *minor, free_threaded);
            }
        }
        rest = parent;
    }
    return std::nullopt;
}

std::optional<PythonFacts> active_python() {
    for (const char* variable : {"VIRTUAL_ENV", "CONDA_PREFIX"}) {
        const std::string value = from_environment(variable);
        if (value.empty() || value.front() != '/') continue;
        for (const auto& folder : python_folders(value + "/lib")) {
            const std::string name = folder.substr(folder.rfind('/') + 1);
            bool free_threaded = false;
            if (const std::optional<long> minor = python_minor(name, free_threaded)) {
                return facts_of(folder, *minor, free_threaded);
            }
        }
    }
    return std::nullopt;
}

}  // namespace kernhub::python_env
