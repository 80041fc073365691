// What loading a shared object asks the dynamic loader to bind, read from
// its dynamic segment as ld.so reads it (DT_RELA / DT_REL, DT_JMPREL,
// DT_SYMTAB, DT_FLAGS, DT_FLAGS_1), and the bytes of its read-only data
// sections. Pure and bounds-checked like inspect_elf: the bytes are
// untrusted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace kernhub::elf {

// One undefined, non-weak symbol that a relocation refers to.
struct UndefinedReference {
    std::string symbol;
    // True when the dynamic loader binds it while it loads the object,
    // even under RTLD_LAZY: every relocation but a PLT slot (a data
    // reference, a function address taken). False for a PLT slot
    // (R_X86_64_JUMP_SLOT, R_AARCH64_JUMP_SLOT, ...), bound at the first
    // call under lazy binding.
    bool eager = false;
    std::uint32_t type = 0;  // the relocation type, for messages
};

struct BindingFacts {
    int machine = 0;  // e_machine
    // The object asks for every symbol to be bound at load (it was linked
    // with -z now): the flag that says so ("DF_1_NOW", "DF_BIND_NOW",
    // "DT_BIND_NOW"), "" when none.
    std::string bind_now;
    // Sorted by symbol; one entry per symbol, eager when any of its
    // relocations is.
    std::vector<UndefinedReference> undefined;
};

// Throws Error(verification) naming `source` for malformed tables.
BindingFacts inspect_binding(const std::uint8_t* data, std::size_t size, const std::string& source);

// A relocation type's name for messages ("R_X86_64_GLOB_DAT"), or its
// number for the types this table does not name.
std::string relocation_name(int machine, std::uint32_t type);

// Calls `visit` with the bytes of each allocated, read-only, non-code
// section that has file contents (.rodata and its kin), in file order.
// Sections whose bytes overlap are visited as one range, so each byte is
// visited once however many headers name it. Nothing when the file has no
// section headers.
void for_each_read_only_section(const std::uint8_t* data, std::size_t size, const std::string& source,
                                const std::function<void(const std::uint8_t* bytes, std::size_t length)>& visit);

// The same for the string tables that symbol tables (.symtab, .dynsym)
// name their symbols in.
void for_each_symbol_name_table(const std::uint8_t* data, std::size_t size, const std::string& source,
                                const std::function<void(const std::uint8_t* bytes, std::size_t length)>& visit);

// The file mapped read-only for `read` (MAP_PRIVATE): Error(not_found) when
// it is missing, Error(internal) when it cannot be opened or mapped.
void with_mapped_file(const std::filesystem::path& path,
                      const std::function<void(const std::uint8_t* data, std::size_t size)>& read);

}  // namespace kernhub::elf
