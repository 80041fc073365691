// The Python environments kernhub looks in for runtimes that Python
// packages ship (tvm-ffi's libtvm_ffi.so, torch's libraries and version
// files): $VIRTUAL_ENV, $CONDA_PREFIX, ~/.local, /usr/local and /usr, each
// through its lib/python3.<minor>/{site,dist}-packages folders, newest
// Python first. Nothing is run: only folder names are read.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kernhub::python_env {

// The package folders, in the order they are searched. Folders that do not
// exist are included (callers test for the file they want).
std::vector<std::string> package_folders();

// A Python environment's own facts, read from its folder names: the
// version of lib/python3.<minor>[t] and whether it is free-threaded (the
// "t" suffix), and whether it holds the mlx package.
struct PythonFacts {
    std::pair<int, int> version{3, 0};
    bool free_threaded = false;
    bool mlx = false;
    std::string source;  // the folder the version was read from
};

// The Python a package folder (or a path below one, such as
// .../lib/python3.12/site-packages/torch) belongs to; nullopt when the
// path is in no lib/python3.<minor>[t]/{site,dist}-packages folder.
std::optional<PythonFacts> python_of(const std::string& path);

// The Python of the active environment ($VIRTUAL_ENV, else $CONDA_PREFIX):
// its newest lib/python3.<minor>[t] folder; nullopt when none is active.
std::optional<PythonFacts> active_python();

// How the list above is described in messages.
inline constexpr const char* k_searched =
    "the Python environments kernhub looks in ($VIRTUAL_ENV, $CONDA_PREFIX, ~/.local, /usr/local, /usr)";

}  // namespace kernhub::python_env
