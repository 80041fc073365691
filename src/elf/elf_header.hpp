// The ELF header alone: what a file is and which machine it is built for.
// The loader reads it after dlopen refused a file, to say why, and the
// inspector starts from it, so both accept and refuse the same headers and
// spell machines the same way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace kernhub::elf {

struct ElfHeaderFacts {
    int elf_class = 0;  // EI_CLASS: 1 = 32-bit, 2 = 64-bit
    bool little_endian = false;
    int type = 0;     // e_type; ET_DYN = 3
    int machine = 0;  // e_machine; 62 x86_64, 183 aarch64, 190 CUDA
    int os_abi = 0;   // EI_OSABI
};

// The header at the start of `data`, of which `size` bytes are present (the
// first bytes of a file are enough). When they do not hold a whole header
// with a known class and byte order, `header` is empty and `problem` says
// why ("no ELF magic number", "header truncated after 20 of 64 bytes") and
// `offset` where, so that each caller phrases its own error around them.
struct HeaderParse {
    std::optional<ElfHeaderFacts> header;
    std::string problem;
    std::uint64_t offset = 0;
};
HeaderParse parse_elf_header(const std::uint8_t* data, std::size_t size);

// Reads the header of the shared object at `path`, and only its first bytes.
// Throws Error(verification) naming the path when the file is not a regular
// ELF file or is truncated, Error(not_found) when it does not exist and
// Error(internal) when it cannot be opened or read.
ElfHeaderFacts read_elf_header(const std::filesystem::path& path);

// e_machine of the running process (62 on x86_64, 183 on aarch64).
int host_elf_machine();

// "x86_64", "aarch64", "CUDA", "i386", ... or "unknown".
std::string machine_name(int machine);

// e_type as `kernhub inspect` shows it: "DYN", "EXEC", "REL", "CORE", or
// the number in hex.
std::string type_name(int type);

// e_type for an error message: "ET_EXEC, an executable", "ET_NONE", or
// "unknown".
std::string describe_type(int type);

}  // namespace kernhub::elf
