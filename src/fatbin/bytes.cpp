// Bounds-checked reads over untrusted fatbin / cubin bytes.
#include "fatbin/bytes.hpp"

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/hint.hpp"
#include "kernhub/error.hpp"

namespace kernhub::fatbin::detail {

void Bytes::fail(std::size_t offset, const std::string& problem) const {
    throw Error(ErrorCode::verification,
                std::string(m_what) + " " + m_source + " is malformed: " + problem + " at byte " +
                    std::to_string(offset) +
                    "; the download is damaged or is not a CUDA kernel build: fetch it again, or check what it is",
                hint::action("inspect"));
}

// Assembled byte by byte so the result does not depend on host endianness
// or alignment.
std::uint64_t Bytes::read(std::size_t offset, std::size_t width) const {
    if (offset > m_size || width > m_size - offset) {
        fail(offset, "a " + std::to_string(width) + "-byte field runs past the end of the " + std::to_string(m_size) +
                         "-byte file");
    }
    std::uint64_t value = 0;
    for (std::size_t i = width; i > 0; --i) value = (value << 8) | m_data[offset + i - 1];
    return value;
}

}  // namespace kernhub::fatbin::detail
