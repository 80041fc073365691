// Where each ELF field sits, for both classes. The positions come from
// <elf.h>'s own structs, so they cannot drift from the specification; the
// values are still read byte by byte in the file's byte order, never by
// casting the untrusted buffer to those structs (alignment, endianness).
#pragma once

#include <elf.h>

#include <cstddef>

#include "elf/byte_reader.hpp"

namespace kernhub::elf::detail {

struct Layout {
    std::size_t ehdr_size;
    Field e_phoff, e_shoff, e_phentsize, e_phnum, e_shentsize, e_shnum;
    std::size_t phdr_size;
    Field p_type, p_offset, p_vaddr, p_filesz;
    std::size_t shdr_size;
    Field sh_type, sh_offset, sh_size, sh_link, sh_info, sh_entsize;
    std::size_t sym_size;
    Field st_name, st_info, st_other, st_shndx;
    std::size_t dyn_size;
    Field d_tag, d_val;
    Field sh_flags;
};

#define KH_ELF_FIELD(record, member)                     \
    Field {                                              \
        offsetof(record, member), sizeof(record::member) \
    }

template <typename Ehdr, typename Phdr, typename Shdr, typename Sym, typename Dyn>
constexpr Layout make_layout() {
    return Layout{sizeof(Ehdr),
                  KH_ELF_FIELD(Ehdr, e_phoff),
                  KH_ELF_FIELD(Ehdr, e_shoff),
                  KH_ELF_FIELD(Ehdr, e_phentsize),
                  KH_ELF_FIELD(Ehdr, e_phnum),
                  KH_ELF_FIELD(Ehdr, e_shentsize),
                  KH_ELF_FIELD(Ehdr, e_shnum),
                  sizeof(Phdr),
                  KH_ELF_FIELD(Phdr, p_type),
                  KH_ELF_FIELD(Phdr, p_offset),
                  KH_ELF_FIELD(Phdr, p_vaddr),
                  KH_ELF_FIELD(Phdr, p_filesz),
                  sizeof(Shdr),
                  KH_ELF_FIELD(Shdr, sh_type),
                  KH_ELF_FIELD(Shdr, sh_offset),
                  KH_ELF_FIELD(Shdr, sh_size),
                  KH_ELF_FIELD(Shdr, sh_link),
                  KH_ELF_FIELD(Shdr, sh_info),
                  KH_ELF_FIELD(Shdr, sh_entsize),
                  sizeof(Sym),
                  KH_ELF_FIELD(Sym, st_name),
                  KH_ELF_FIELD(Sym, st_info),
                  KH_ELF_FIELD(Sym, st_other),
                  KH_ELF_FIELD(Sym, st_shndx),
                  sizeof(Dyn),
                  KH_ELF_FIELD(Dyn, d_tag),
                  KH_ELF_FIELD(Dyn, d_un),
                  KH_ELF_FIELD(Shdr, sh_flags)};
}

inline constexpr Layout k_elf64 = make_layout<Elf64_Ehdr, Elf64_Phdr, Elf64_Shdr, Elf64_Sym, Elf64_Dyn>();
inline constexpr Layout k_elf32 = make_layout<Elf32_Ehdr, Elf32_Phdr, Elf32_Shdr, Elf32_Sym, Elf32_Dyn>();

// Version-needed records are the same in both classes.
static_assert(sizeof(Elf32_Verneed) == sizeof(Elf64_Verneed) && sizeof(Elf32_Vernaux) == sizeof(Elf64_Vernaux),
              "verneed records are class-independent");
inline constexpr std::size_t k_verneed_size = sizeof(Elf64_Verneed);
inline constexpr Field k_vn_file = KH_ELF_FIELD(Elf64_Verneed, vn_file);
inline constexpr Field k_vn_aux = KH_ELF_FIELD(Elf64_Verneed, vn_aux);
inline constexpr Field k_vn_next = KH_ELF_FIELD(Elf64_Verneed, vn_next);
inline constexpr std::size_t k_vernaux_size = sizeof(Elf64_Vernaux);
inline constexpr Field k_vna_name = KH_ELF_FIELD(Elf64_Vernaux, vna_name);
inline constexpr Field k_vna_next = KH_ELF_FIELD(Elf64_Vernaux, vna_next);

#undef KH_ELF_FIELD

}  // namespace kernhub::elf::detail
