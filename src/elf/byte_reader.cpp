#include "elf/byte_reader.hpp"

#include <cstring>

#include "common/hint.hpp"
#include "kernhub/error.hpp"

namespace kernhub::elf::detail {

void ByteReader::fail(const std::string& what, std::uint64_t offset) const {
    throw Error(ErrorCode::verification,
                m_source + " is a malformed ELF file: " + what + " (at offset " + std::to_string(offset) + " of " +
                    std::to_string(m_size) +
                    " bytes); the file is damaged or is not a kernel build: fetch it again, or check what it is",
                hint::action("inspect"));
}

Range ByteReader::range(std::uint64_t offset, std::uint64_t length, const char* what) const {
    // Written as two comparisons so offset + length is never computed
    // before it is known to fit.
    if (offset > m_size || length > m_size - offset) {
        fail(std::string(what) + " (" + std::to_string(length) + " bytes) extends past the end of the file", offset);
    }
    return Range{offset, length};
}

std::uint64_t ByteReader::read(std::uint64_t offset, std::size_t width, const char* what) const {
    range(offset, width, what);
    const std::uint8_t* bytes = m_data + offset;
    std::uint64_t value = 0;
    for (std::size_t i = 0; i < width; ++i) {
        const std::size_t index = m_little_endian ? width - 1 - i : i;
        value = (value << 8) | bytes[index];
    }
    return value;
}

std::uint64_t ByteReader::field(std::uint64_t record, Field f, const char* what) const {
    if (record > m_size) fail(std::string(what) + " starts past the end of the file", record);
    return read(record + f.offset, f.width, what);
}

std::optional<std::string_view> ByteReader::bounded_string_at(const Range& table, std::uint64_t index,
                                                              std::size_t limit, const char* what) const {
    range(table.offset, table.size, what);  // a Range is only a promise; keep the check local
    if (index >= table.size) {
        fail(std::string(what) + ": string index " + std::to_string(index) + " is outside its string table of " +
                 std::to_string(table.size) + " bytes",
             table.offset);
    }
    const char* start = reinterpret_cast<const char*>(m_data + table.offset + index);
    const auto available = static_cast<std::size_t>(table.size - index);
    const std::size_t searched = limit < available ? limit + 1 : available;
    const void* nul = std::memchr(start, '\0', searched);
    if (nul == nullptr) {
        if (searched < available) return std::nullopt;
        fail(std::string(what) + ": string runs past the end of its string table", table.offset + index);
    }
    return std::string_view(start, static_cast<std::size_t>(static_cast<const char*>(nul) - start));
}

std::string ByteReader::string_at(const Range& table, std::uint64_t index, const char* what) const {
    const std::optional<std::string_view> text = bounded_string_at(table, index, k_max_elf_string, what);
    if (!text) {
        fail(std::string(what) + ": string is longer than k_max_elf_string (" + std::to_string(k_max_elf_string) +
                 " bytes)",
             table.offset + index);
    }
    return std::string(*text);
}

}  // namespace kernhub::elf::detail
