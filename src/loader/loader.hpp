// Loading shared objects: dlopen(RTLD_NOW|RTLD_LOCAL) (the ELF header and
// glibc checks explain a refusal) and dlsym. The mechanism of the
// shared-object and tvm-ffi kinds (kind.hpp). The loader module owns
// <dlfcn.h>; the CUDA binding's own dlopen of libcuda reads the failure
// text through take_dlerror below.
#pragma once

#include <filesystem>
#include <string>
#include <utility>

#include "loader/sealed_image.hpp"

namespace kernhub::loader {

// Checks that the file is a 64-bit little-endian ET_DYN object for this
// host's machine (elf::read_elf_header reads it). Throws Error(verification)
// with the reason otherwise, Error(not_found) when the file does not exist.
void validate_shared_object(const std::filesystem::path& path);

// False when the dynamic loader knows `address` as a symbol that is not
// code (a data object, TLS); true for a function, or when it cannot tell.
bool is_code_symbol(const void* address);

// dlerror()'s text, which also clears it; "" when the dynamic loader left
// none. For every dlopen/dlsym caller in kernhub, the CUDA binding included.
std::string take_dlerror();

// `text` with every `from` replaced by `to`: a message about a sealed copy
// names the cached file instead of /proc/self/fd/<n>.
std::string renamed(std::string text, const std::string& from, const std::string& to);

// How dlopen binds a library's symbols. `now` (RTLD_NOW) for every kind
// but torch ops: an unresolved symbol fails the load rather than the first
// call. `lazy` (RTLD_LAZY) for a torch op library, whose Python module init
// refers to Python functions that a process without Python lacks and that
// nothing calls (docs/kernels.md, "Torch ops").
// `now_global` (RTLD_NOW | RTLD_GLOBAL) for a dependency's shared object
// (docs/registry.md, "Kernel dependencies"): its symbols join the global scope, so
// the kernels that depend on it find them when they are opened after it.
enum class Binding { now, lazy, now_global };

// A dlopen handle. Kernels stay loaded for the life of the process (dlclose
// of C++ objects is unreliable), so the destructor does not dlclose.
class Library {
public:
    // dlopen(RTLD_NOW or RTLD_LAZY, | RTLD_LOCAL). When the dynamic loader
    // refuses, throws validate_shared_object's error, Error(load) for a
    // too-new glibc requirement, else Error(load) with dlerror() text.
    static Library open(const std::filesystem::path& path, Binding binding = Binding::now);
    // dlopen of a sealed copy (/proc/self/fd/<memfd>) that `label`'s bytes
    // were copied into and checked against `content_id` (their SHA-256).
    // Errors name `label`, never the /proc path. The same content loaded
    // again gets the first handle, as dlopen of one path twice does; a
    // loaded image's descriptor stays open for the process's life, because
    // its number is the library's name to the dynamic loader and a reused
    // number would make dlopen answer with the old library.
    static Library open_sealed(SealedImage image, const std::filesystem::path& label, const std::string& content_id,
                               Binding binding = Binding::now);

    // Throws Error(not_found) naming the symbol and the file when missing.
    void* symbol(const std::string& name) const;

    const std::filesystem::path& path() const noexcept { return m_path; }

private:
    Library(void* handle, std::filesystem::path path) : m_handle(handle), m_path(std::move(path)) {}
    void* m_handle = nullptr;
    std::filesystem::path m_path;
};

}  // namespace kernhub::loader
