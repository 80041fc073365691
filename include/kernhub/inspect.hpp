// Facts about a kernel artifact on disk: a CUDA fatbin or cubin (which
// binaries it holds, which one runs on a compute capability) or an ELF
// shared object (class, machine, type, required GLIBC versions).
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernhub/error.hpp"
#include "kernhub/export.hpp"

namespace kernhub {

struct ComputeCapability {
    int major = 0;
    int minor = 0;
};

// Parses "9.0" / "10.3" / "sm_90" / "90"; Error(usage) for anything else.
KERNHUB_API ComputeCapability parse_compute_capability(const std::string& text);

// One binary of a fatbin or cubin.
struct BinaryEntry {
    enum class Kind { sass, ptx };
    Kind kind = Kind::sass;
    std::string arch;  // "sm_90a", "compute_90"
    bool compressed = false;
    std::uint64_t size = 0;
};

// "sass", "ptx".
inline const char* to_string(BinaryEntry::Kind kind) noexcept {
    return kind == BinaryEntry::Kind::sass ? "sass" : "ptx";
}

// A CUDA fatbin or cubin.
struct FatbinInfo {
    std::size_t containers = 0;
    std::vector<BinaryEntry> entries;
    std::optional<BinaryEntry> selected;  // the entry that runs on the asked capability
};

// An ELF shared object or executable.
struct ElfInfo {
    int elf_class = 0;  // 32 or 64
    std::string machine;
    std::string type;  // "DYN", "EXEC", ...
    std::vector<std::string> glibc_versions;
    std::string max_glibc;
    std::vector<std::string> needed;
    std::vector<std::string> exported_functions;
    // The tvm-ffi functions among them: the names after "__tvm_ffi_" (a
    // tvm-ffi variant's library), less tvm-ffi's own "__tvm_ffi__" symbols.
    std::vector<std::string> tvm_ffi_functions;
    // The torch ops the library registers ("add_one", "add_one.out"), as
    // its read-only data names them (a torch variant's op library;
    // docs/kernels.md, "Torch kernels"), and the whole schemas found there.
    std::vector<std::string> torch_ops;
    std::vector<std::string> torch_schemas;
    // The op namespaces the library defines, as the symbols of its
    // registration (TORCH_LIBRARY, STABLE_TORCH_LIBRARY) name them; empty
    // when its symbol table was stripped.
    std::vector<std::string> torch_namespaces;
};

struct InspectResult {
    enum class Format { fatbin, cubin, elf };
    std::string path;
    Format format = Format::elf;
    std::optional<FatbinInfo> fatbin;  // for Format::fatbin and Format::cubin
    std::optional<ElfInfo> elf;        // for Format::elf
};

// "fatbin", "cubin", "elf".
inline const char* to_string(InspectResult::Format format) noexcept {
    switch (format) {
        case InspectResult::Format::fatbin:
            return "fatbin";
        case InspectResult::Format::cubin:
            return "cubin";
        case InspectResult::Format::elf:
            return "elf";
    }
    return "elf";
}

// Error(not_found) when the file is missing, Error(verification) when it is
// malformed or of no known format, Error(load) when `cc` is given and no
// entry of a fatbin/cubin can run there (the message lists the archs).
KERNHUB_API InspectResult inspect_file(const std::string& path, const std::optional<ComputeCapability>& cc = {});
// The same; the reading ends with Error(interrupted) once *cancel is set
// (the CLI sets it on SIGINT and SIGTERM).
KERNHUB_API InspectResult inspect_file(const std::string& path, const std::optional<ComputeCapability>& cc,
                                       const std::atomic<bool>* cancel);

}  // namespace kernhub
