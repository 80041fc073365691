// Whole-file reads for artifacts the api layer parses (fatbins, cubins,
// inspected files): store::read_file_into with the api's error wording, and
// a read-only mapping for `inspect`, which looks at the header first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kernhub::api {

// Error(not_found) when the path is not a regular file, Error(internal)
// when it cannot be opened or read.
std::vector<std::uint8_t> read_file_bytes(const std::string& path);

// The largest file `inspect` maps (a named limit quoted by its error).
inline constexpr std::uint64_t k_max_inspect_bytes = std::uint64_t{4} << 30;

// One regular file opened once: its first bytes are read without touching
// the rest, and only then, if the caller wants it, the whole file is
// mapped read-only (pages are read as the parser touches them). A file
// truncated by someone else while mapped can fault, as with any mapping.
class MappedFile {
public:
    // Error(not_found) when the path is missing or not a regular file (a
    // FIFO never blocks the open), Error(internal) when it cannot be opened.
    explicit MappedFile(const std::string& path);
    ~MappedFile();
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    std::uint64_t size() const noexcept { return m_size; }
    // Up to `n` bytes from the start of the file.
    std::vector<std::uint8_t> head(std::size_t n) const;
    // Maps the whole file. Error(usage) naming k_max_inspect_bytes when it
    // is larger, Error(internal) when mmap fails.
    void map();
    const std::uint8_t* data() const noexcept { return m_data; }

private:
    std::string m_path;
    int m_fd = -1;
    std::uint64_t m_size = 0;
    const std::uint8_t* m_data = nullptr;
};

}  // namespace kernhub::api
