// Bounds-checked reads from untrusted ELF bytes in the byte order the file
// declares. All offsets are 64-bit file offsets (ELF64 fields are 64-bit even
// on a 32-bit host) and are checked against the size before any pointer is
// formed, so no arithmetic on them can wrap into a valid-looking position.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kernhub::elf::detail {

// The longest string of a dynamic segment (DT_NEEDED, DT_SONAME, version
// names) kernhub reads: PATH_MAX, which ld.so's own file names obey.
inline constexpr std::size_t k_max_elf_string = 4096;
// The longest symbol name the walks keep: no C or Python function has a
// longer one, and longer names are left out.
inline constexpr std::size_t k_max_symbol_name = 1024;

// One field of an ELF record: its offset inside the record and its width.
struct Field {
    std::size_t offset;
    std::size_t width;
};

// A byte range inside the file, already checked to lie within it.
struct Range {
    std::uint64_t offset = 0;
    std::uint64_t size = 0;
    std::uint64_t end() const noexcept { return offset + size; }
};

class ByteReader {
public:
    ByteReader(const std::uint8_t* data, std::size_t size, const std::string& source) noexcept
        : m_data(data), m_size(size), m_source(source) {}

    void set_little_endian(bool little) noexcept { m_little_endian = little; }
    std::uint64_t size() const noexcept { return m_size; }

    // Throws Error(verification) naming the source, `what` and the offset.
    [[noreturn]] void fail(const std::string& what, std::uint64_t offset) const;

    // The range [offset, offset + length) if it lies within the file, or
    // throws. Safe for any inputs: the check cannot overflow.
    Range range(std::uint64_t offset, std::uint64_t length, const char* what) const;

    // An unsigned integer of 1, 2, 4 or 8 bytes at `offset`.
    std::uint64_t read(std::uint64_t offset, std::size_t width, const char* what) const;

    // A field of the record that starts at `record`.
    std::uint64_t field(std::uint64_t record, Field f, const char* what) const;

    // The NUL-terminated string starting `index` bytes into `table`; throws
    // when the index is outside the table, the string runs past its end, or
    // it is longer than k_max_elf_string (no name ld.so reads is).
    std::string string_at(const Range& table, std::uint64_t index, const char* what) const;

    // The same string in place, nullopt when it is longer than `limit`; the
    // search for its end stops after `limit` bytes, so N reads cost at most
    // N * limit however the strings overlap.
    std::optional<std::string_view> bounded_string_at(const Range& table, std::uint64_t index, std::size_t limit,
                                                      const char* what) const;

    // The raw byte at an offset already known to be in range.
    std::uint8_t byte(std::uint64_t offset) const noexcept { return m_data[offset]; }

private:
    const std::uint8_t* m_data;
    std::uint64_t m_size;
    const std::string& m_source;
    bool m_little_endian = true;
};

}  // namespace kernhub::elf::detail
