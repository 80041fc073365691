// The ops a torch extension library defines and the namespaces it
// registers them in, read from its bytes without torch (docs/kernels.md,
// "Torch ops"): kernhub checks them before it loads the library, names them
// when an op is missing, and `kernhub inspect` lists them.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace kernhub::loader {

// Bounds on one listing: distinct ops and schemas (more is
// Error(verification); LibTorch's own library names about 4,800 schemas),
// the length of a schema worth listing, and the name strings kept (beyond
// it the rest are not collected).
inline constexpr std::size_t k_max_torch_ops = 16384;
inline constexpr std::size_t k_max_schema_length = 4096;
inline constexpr std::size_t k_max_torch_names = 65536;
// Namespaces the symbols may name (more is Error(verification); LibTorch's
// own library defines 15).
inline constexpr std::size_t k_max_torch_namespaces = 256;
// The longest op name or op namespace kernhub takes for one.
inline constexpr std::size_t k_max_op_name = 256;

struct TorchOpListing {
    // "name" or "name.overload", sorted and unique.
    std::vector<std::string> ops;
    // The whole schemas found ("add_one(Tensor x) -> Tensor"), sorted and unique.
    std::vector<std::string> schemas;
    // Every NUL-terminated string of the read-only data that could name an
    // op or a namespace: the names given to def and impl ("add_one",
    // "add_one.out"), and the namespace literal TORCH_LIBRARY and
    // STABLE_TORCH_LIBRARY pass. At most k_max_torch_names of them;
    // names_complete says whether that bound left some out.
    std::set<std::string, std::less<>> names;
    bool names_complete = true;
    // The namespaces the library defines, from the symbols the two macros
    // leave (TORCH_LIBRARY_init_<ns>, STABLE_TORCH_LIBRARY_static_init_<ns>,
    // ...), which only a symbol table that was not stripped keeps.
    std::set<std::string> defined_namespaces;
};

// Reads the library's read-only sections, each byte once, and its symbol
// tables' names. An op counts when a whole schema string names it (the
// stable ABI's registrations, and compilers that keep the literal), or
// when a schema's head "name(" precedes argument text and "name" is also a
// NUL-terminated string of its own (an optimising compiler keeps a
// TORCH_LIBRARY schema literal only as the pieces it copies, but the name
// given to impl() whole). Throws Error(verification) for a malformed ELF
// file or more than k_max_torch_ops ops, and Error(interrupted) once
// *cancel is set.
TorchOpListing list_torch_ops(const std::uint8_t* data, std::size_t size, const std::string& source,
                              const std::atomic<bool>* cancel = nullptr);

// Whether `op` ("name" or "name.overload") is among the listed ops, or is
// a name string of the library (an op whose schema the listing could not
// see still has its name there).
bool may_define_op(const TorchOpListing& listing, const std::string& op);

// "name" or "name.overload" with both parts identifiers.
bool is_op_name(const std::string& op);

// A C/Python identifier: [A-Za-z_][A-Za-z0-9_]*.
bool is_identifier(std::string_view text);

}  // namespace kernhub::loader
