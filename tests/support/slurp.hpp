// A whole file as bytes, for tests that compare what was written.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <istream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace kernhub::test {

// What is left in `in`, copied in one piece (a character-by-character
// istreambuf_iterator loop is many times slower in test code built with
// -Og, which reads files of several MiB).
inline std::string read_all(std::istream& in) {
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
}

// Empty when the file cannot be opened.
inline std::string slurp(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    return in ? read_all(in) : std::string();
}

// The file's bytes; throws (failing the test) when it cannot be opened.
inline std::vector<std::uint8_t> slurp_bytes(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read " + path.string());
    const std::string bytes = read_all(in);
    return {bytes.begin(), bytes.end()};
}

}  // namespace kernhub::test
