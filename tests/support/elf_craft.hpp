// Hostile copies of real ELF64 little-endian files, made at test time for
// the bounds tests and the listing benchmark: many section headers over
// one section's bytes, or a large read-only section appended. Each keeps
// the original's bytes and program headers (so it still loads) and writes
// a new section header table at the end of the file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kernhub::test {

// `bytes` with `copies` more section headers, each a copy of the header of
// the section named `section` (".rodata"). Throws std::runtime_error when
// the file is not ELF64 LE or has no such section, or the count would not
// fit e_shnum.
std::vector<std::uint8_t> with_section_copies(const std::vector<std::uint8_t>& bytes, const std::string& section,
                                              std::size_t copies);

// The same with copies of the last section header (the one
// with_read_only_section appends, for one).
std::vector<std::uint8_t> with_last_section_copies(const std::vector<std::uint8_t>& bytes, std::size_t copies);

// `bytes` with `payload` appended as one more allocated, read-only
// PROGBITS section (not mapped by any segment).
std::vector<std::uint8_t> with_read_only_section(const std::vector<std::uint8_t>& bytes,
                                                 const std::vector<std::uint8_t>& payload);

}  // namespace kernhub::test
