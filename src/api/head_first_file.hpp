// The header-first file read of `inspect` (inspect.cpp): the magic is read
// before the rest of the file is touched.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kernhub::api {

// The largest file `inspect` reads (a named limit quoted by its error).
inline constexpr std::uint64_t k_max_inspect_bytes = std::uint64_t{4} << 30;

// One regular file opened once: its first bytes are read without touching
// the rest, and only then, if the caller wants it, the whole file is read
// into memory. Read, not mapped: a mapped file that someone truncates
// while it is parsed would kill the process with SIGBUS; a read one only
// comes out short, which the parsers refuse.
class HeadFirstFile {
public:
    // Error(not_found) when the path is missing or not a regular file (a
    // FIFO never blocks the open), Error(internal) when it cannot be opened.
    explicit HeadFirstFile(const std::string& path);
    ~HeadFirstFile();
    HeadFirstFile(const HeadFirstFile&) = delete;
    HeadFirstFile& operator=(const HeadFirstFile&) = delete;

    // Up to `n` bytes from the start of the file.
    std::vector<std::uint8_t> head(std::size_t n) const;
    // The whole file, as it is now (shorter than its size at open when it
    // shrank since). Error(usage) naming k_max_inspect_bytes when it is
    // larger, Error(internal) when it cannot be read.
    const std::vector<std::uint8_t>& read_all();

private:
    std::size_t read_at(std::uint8_t* out, std::size_t n, std::uint64_t offset) const;

    std::string m_path;
    int m_fd = -1;
    std::uint64_t m_size = 0;
    std::vector<std::uint8_t> m_bytes;
    bool m_read = false;
};

}  // namespace kernhub::api
