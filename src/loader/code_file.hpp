// Which file on disk holds a given piece of loaded code: the shared library
// kernhub was linked into, or the executable when it was linked statically.
// The default registry is found relative to it (docs/embedding.md
// "Library and packaging").
#pragma once

#include <filesystem>

namespace kernhub::loader {

struct CodeFile {
    std::filesystem::path path;  // absolute, symlinks resolved; empty when unknown
    bool main_program = false;   // the executable rather than a shared library
};

// The object that maps `address`. For the main program the dynamic loader
// names no file (or argv[0]), so /proc/self/exe answers instead.
CodeFile file_containing(const void* address);

}  // namespace kernhub::loader
