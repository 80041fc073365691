// The steps of an ELF walk that more than one reader takes (elf_inspect.cpp
// defines them; elf_binding.cpp reuses them): the identification, the
// header tables, the program headers and the mapping of a virtual address
// to file bytes. Every step checks its ranges against the file and throws
// Error(verification) through the ByteReader.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "elf/byte_reader.hpp"
#include "elf/elf_inspect.hpp"
#include "elf/elf_layout.hpp"

namespace kernhub::elf::detail {

struct HeaderTables {
    std::uint64_t phoff = 0, phentsize = 0, phnum = 0;
    std::uint64_t shoff = 0, shentsize = 0, shnum = 0;
};

struct Segment {
    std::uint64_t vaddr = 0, offset = 0, filesz = 0;
};

struct ProgramView {
    std::vector<Segment> loads;
    std::optional<Range> dynamic;
};

// Class, byte order, type and machine into `facts`; sets the reader's byte order.
void read_identification(ByteReader& reader, const std::uint8_t* data, std::size_t size, ElfFacts& facts);
HeaderTables read_header(const ByteReader& reader, const Layout& layout);
// PT_LOAD segments and the first PT_DYNAMIC.
ProgramView read_program_headers(const ByteReader& reader, const Layout& layout, const HeaderTables& tables);
// The file bytes behind a virtual address, to the end of its segment's file part.
Range mapped_range(const ByteReader& reader, const ProgramView& view, std::uint64_t address, const char* what);
// `count` records of `entsize` bytes (which must be `expected_entsize`) at `offset`.
Range table_range(const ByteReader& reader, std::uint64_t offset, std::uint64_t count, std::uint64_t entsize,
                  std::size_t expected_entsize, const char* what);
// The bytes of the section whose header starts at `header`.
Range section_range(const ByteReader& reader, const Layout& layout, std::uint64_t header, const char* what);

}  // namespace kernhub::elf::detail
