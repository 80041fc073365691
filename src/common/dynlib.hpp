// Run-time binding of the C libraries only some operations need (libcurl,
// libcrypto, libarchive): opened with dlopen on first need, never linked, so
// a warm start maps none of them (docs/embedding.md, "Start-up cost and
// the network stack"). Each owning module declares a table of function
// pointers typed from the library's own header (decltype(&::name)), fills
// it in a bind function and reaches it through bound<>(): bound once per
// process, as the CUDA driver is (src/cuda/binding.cpp).
//
// Error policy: a library that cannot be opened, or lacks a symbol, is
// Error(internal) naming the file, the dynamic loader's reason, what needs
// it and what to install; the failure is kept and thrown again on every
// later use.
#pragma once

#include <dlfcn.h>

#include <exception>
#include <initializer_list>
#include <optional>
#include <string>

#include "kernhub/error.hpp"

namespace kernhub::dynlib {

// An opened library; never closed: the resolved pointers live for the
// whole process.
struct Library {
    void* handle = nullptr;
    std::string name;          // the soname that opened
    std::string needed_for;    // "to download kernels", for messages
    std::string install_hint;  // "install libcurl4 (Debian) or libcurl"
};

// Opens the first of `sonames` the dynamic loader finds (RTLD_NOW |
// RTLD_LOCAL). Throws Error(internal) listing every name tried and the
// loader's reason for the last one.
Library open_first(std::initializer_list<const char*> sonames, const std::string& needed_for,
                   const std::string& install_hint);

// The address of `symbol` in `library`; throws Error(internal) when it is
// missing (a library too old for kernhub).
void* find_symbol(const Library& library, const char* symbol);

template <class Fn>
void resolve(const Library& library, const char* symbol, Fn& slot) {
    slot = reinterpret_cast<Fn>(find_symbol(library, symbol));
}

// For a symbol the caller can do without: sets `slot` to its address, or
// to null when the library lacks it, and says which.
template <class Fn>
bool resolve_optional(const Library& library, const char* symbol, Fn& slot) {
    slot = reinterpret_cast<Fn>(::dlsym(library.handle, symbol));
    return slot != nullptr;
}

// The table Bind() returns, computed on the first call and kept for the
// process; a function-local static, so concurrent first calls bind once.
// A failed binding throws the same Error on every call.
template <class Table, Table (*Bind)()>
const Table& bound() {
    struct Outcome {
        std::optional<Table> table;
        // The binding's Error, rethrown as is (std::rethrow_exception
        // copies nothing, so no second exception can arise while throwing).
        std::exception_ptr failure;
    };
    static const Outcome outcome = [] {
        Outcome result;
        try {
            result.table.emplace(Bind());
        } catch (const Error&) {
            result.failure = std::current_exception();
        }
        return result;
    }();
    if (!outcome.table) std::rethrow_exception(outcome.failure);
    return *outcome.table;
}

}  // namespace kernhub::dynlib
