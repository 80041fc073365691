// A pure ELF inspector over bytes already in memory: no dlopen, no libelf,
// nothing executed. It answers "what is this file and what will the dynamic
// loader ask of this host": the loader module asks it after dlopen refused a
// file, to say why (a GLIBC version the host lacks), and to name the
// functions a library exports when a symbol is missing; and it feeds
// `kernhub inspect`. The bytes are untrusted (they come from a hub), so every
// read is bounds-checked and every walk is bounded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace kernhub::elf {

struct ElfFacts {
    int elf_class = 0;  // 32 or 64
    bool little_endian = true;
    std::string type;                 // "DYN", "EXEC", "REL", "CORE" or "0x..." (hex e_type)
    int machine = 0;                  // e_machine
    std::string machine_name;         // elf::machine_name: "x86_64", "aarch64", "CUDA", ... or "unknown"
    int os_abi = 0;                   // EI_OSABI
    std::string soname;               // DT_SONAME, may be empty
    std::vector<std::string> needed;  // DT_NEEDED libraries, in file order
    // GLIBC_<number> versions the file requires (.gnu.version_r, reached
    // through DT_VERNEED as the dynamic loader does), sorted by
    // compare_glibc and unique. Non-numeric nodes such as GLIBC_PRIVATE or
    // GLIBC_ABI_DT_RELR are left out.
    std::vector<std::string> glibc_versions;
    std::string max_glibc;  // the last of glibc_versions, "" when none
    // Defined global/weak/unique FUNC or IFUNC symbols of .dynsym with
    // default or protected visibility, sorted and unique; a name longer
    // than 1 KiB (no C entry point is) is left out.
    std::vector<std::string> exported_functions;
};

// Reads the identification, the program headers (for the dynamic segment:
// DT_NEEDED, DT_SONAME, DT_VERNEED) and the section headers (for .dynsym).
// A file without program headers (ET_REL) has no dynamic facts; one without
// section headers has no exported_functions.
//
// Throws Error(verification) naming `source` and the offset for anything
// malformed: bad magic, truncation, header tables or referenced ranges
// outside the file, unterminated or out-of-range strings, version chains
// that overlap or leave their segment, offset arithmetic that overflows.
// Never reads outside [data, data + size). Work and allocations are linear
// in the size however many records share one string, and bounded by named
// limits: more than k_max_needed DT_NEEDED entries, or exported names over
// k_max_symbol_bytes in all, are Error(verification).
ElfFacts inspect_elf(const std::uint8_t* data, std::size_t size, const std::string& source);

// inspect_elf over a file (mapped, not read). Error(not_found) when it is
// missing, Error(internal) when it cannot be opened or mapped.
ElfFacts inspect_elf_file(const std::filesystem::path& path);

// Compares the dotted numbers after the first digit numerically, missing
// components counting as 0 ("GLIBC_2.34" > "GLIBC_2.4"); ties between
// differently spelled equal versions ("2.2" and "2.2.0") fall back to plain
// string order so that sorting is deterministic. Returns <0, 0 or >0.
int compare_glibc(const std::string& a, const std::string& b);

// The running C library's version as "GLIBC_X.Y" (gnu_get_libc_version()),
// or "" when the process does not run on glibc.
std::string host_glibc();

}  // namespace kernhub::elf
