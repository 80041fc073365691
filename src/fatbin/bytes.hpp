// Bounds-checked little-endian reads and the one error message shape of the
// fatbin module. Internal to src/fatbin.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace kernhub::fatbin::detail {

// Largest arch number accepted in a fatbin entry or a cubin's ELF flags;
// today's top is 121. A bound keeps garbage from turning into absurd names
// and keeps the value inside an int.
constexpr std::uint32_t k_max_arch = 999;

// A view of untrusted input. Every read checks its bounds itself, so a bug
// in a caller's size arithmetic ends in an Error, never in a stray read.
class Bytes {
public:
    Bytes(const std::uint8_t* data, std::size_t size, const std::string& source, const char* what)
        : m_data(data), m_size(size), m_source(source), m_what(what) {}

    std::size_t size() const noexcept { return m_size; }
    // Bytes from `offset` to the end; 0 when offset is past the end.
    std::size_t left(std::size_t offset) const noexcept { return offset < m_size ? m_size - offset : 0; }

    std::uint8_t u8(std::size_t offset) const { return static_cast<std::uint8_t>(read(offset, 1)); }
    std::uint16_t u16(std::size_t offset) const { return static_cast<std::uint16_t>(read(offset, 2)); }
    std::uint32_t u32(std::size_t offset) const { return static_cast<std::uint32_t>(read(offset, 4)); }
    std::uint64_t u64(std::size_t offset) const { return read(offset, 8); }

    // Throws Error(verification) naming the source, the byte offset and what
    // to do next.
    [[noreturn]] void fail(std::size_t offset, const std::string& problem) const;

private:
    std::uint64_t read(std::size_t offset, std::size_t width) const;

    const std::uint8_t* m_data;
    std::size_t m_size;
    const std::string& m_source;
    const char* m_what;  // "fatbin" or "cubin", for messages
};

}  // namespace kernhub::fatbin::detail
