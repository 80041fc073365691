// The Python environments kernhub looks in for runtimes that Python
// packages ship (tvm-ffi's libtvm_ffi.so, torch's libraries and version
// files): $VIRTUAL_ENV, $CONDA_PREFIX, ~/.local, /usr/local and /usr, each
// through its lib/python3.<minor>/{site,dist}-packages folders, newest
// Python first. Nothing is run: only folder names are read.
#pragma once

#include <string>
#include <vector>

namespace kernhub::python_env {

// The package folders, in the order they are searched. Folders that do not
// exist are included (callers test for the file they want).
std::vector<std::string> package_folders();

// How the list above is described in messages.
inline constexpr const char* k_searched =
    "the Python environments kernhub looks in ($VIRTUAL_ENV, $CONDA_PREFIX, ~/.local, /usr/local, /usr)";

}  // namespace kernhub::python_env
