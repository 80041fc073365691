// The ops a torch extension library defines, read from its bytes without
// torch (docs/kernels.md, "Torch ops"): kernhub names them when an op
// is missing, and `kernhub inspect` lists them. And the op namespace of a
// torch variant, from its _ops.py.
#pragma once

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace kernhub::loader {

struct TorchOpListing {
    // "name" or "name.overload", sorted and unique.
    std::vector<std::string> ops;
    // The whole schemas found ("add_one(Tensor x) -> Tensor"), sorted.
    std::vector<std::string> schemas;
    // Every NUL-terminated string of the read-only data that could name an
    // op: the names given to def and impl ("add_one", "add_one.out").
    std::set<std::string> names;
};

// Reads the library's read-only sections. An op counts when a whole schema
// string names it (the stable ABI's registrations, and compilers that keep
// the literal), or when a schema's head "name(" precedes argument text and
// "name" is also a NUL-terminated string of its own (an optimising
// compiler keeps a TORCH_LIBRARY schema literal only as the pieces it
// copies, but the name given to impl() whole). Throws Error(verification)
// for a malformed ELF file.
TorchOpListing list_torch_ops(const std::uint8_t* data, std::size_t size, const std::string& source);

// Whether `op` ("name" or "name.overload") is among the listed ops, or is
// a name string of the library (an op whose schema the listing could not
// see still has its name there).
bool may_define_op(const TorchOpListing& listing, const std::string& op);

// "name" or "name.overload" with both parts identifiers.
bool is_op_name(const std::string& op);

// The namespace of `ops = torch.ops.<NAME>` in a variant's _ops.py text;
// "" when it has no such line.
std::string ops_namespace(const std::string& ops_py);

}  // namespace kernhub::loader
