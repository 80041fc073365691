// Which op namespace a torch variant's library registers (docs/kernels.md,
// "Torch ops"): what its _ops.py says, checked against what its own bytes
// say, before the library is loaded. Pure, apart from the bytes it is given.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <string>

#include "loader/torch_ops.hpp"

namespace kernhub::loader {

// What _ops.py assigns to `ops` as Python runs it (ops_py.cpp): the last
// top-level `ops = torch.ops.<NAME>` (or `ops: T = ...`) decides, the text
// cut into logical lines as Python's tokenizer cuts it. `problem` is set
// (and `name` empty) when the last binding of ops is something else: an
// assignment of another value, one in a block, another form of binding (a
// tuple, starred or chained target, :=, import, for, with, def, class,
// del, an augmented assignment), or NAME no namespace (not an identifier,
// a dunder attribute of torch.ops, over k_max_op_name bytes); and when the
// code holds non-ASCII bytes, whose identifiers Python folds. Nothing is
// set when the file binds no `ops`. Dynamic binding (globals(), exec) is
// not seen.
struct OpsPy {
    std::string name;
    std::string problem;
};
OpsPy read_ops_py(const std::string& text);

// The namespace the library's ops are in, and every namespace loading it
// registers (what the one-library-per-namespace guard holds).
struct TorchNamespace {
    std::string name;
    std::set<std::string> registered;
};

// Where the claim comes from: _ops.py's NAME, or (no _ops.py) the file
// name up to its first dot.
struct NamespaceClaim {
    std::string name;
    bool from_ops_py = false;
};

// The namespace of `file`, from its listing (and bytes, when the listing's
// names are incomplete):
// - when its symbol tables name the namespaces it defines, the claim must
//   be one of them, and all are registered; without _ops.py a library that
//   defines one namespace is in that one, whatever its file name;
// - when its symbols were stripped, the claim must be a whole string of
//   its read-only data (the literal the registration macro passes) and not
//   one of its op names.
// Anything else is Error(verification) naming both names.
TorchNamespace choose_namespace(const TorchOpListing& listing, const NamespaceClaim& claim, const std::uint8_t* data,
                                std::size_t size, const std::string& file);

// Whether the library's read-only data holds `name` as a whole
// NUL-terminated string (one linear search, for when the listing's names
// are incomplete).
bool names_string(const std::uint8_t* data, std::size_t size, const std::string& file, const std::string& name);

}  // namespace kernhub::loader
