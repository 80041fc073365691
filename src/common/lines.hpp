// Splitting text at '\n', shared by the lock diff and the Sigstore
// checkpoint reader.
#pragma once

#include <string>
#include <vector>

namespace kernhub {

// The lines of `text` without their '\n'; a final line without one is
// kept, and a trailing '\n' adds no empty line.
inline std::vector<std::string> split_lines(const std::string& text) {
    std::vector<std::string> lines;
    std::size_t start = 0;
    while (start < text.size()) {
        std::size_t end = text.find('\n', start);
        if (end == std::string::npos) end = text.size();
        lines.push_back(text.substr(start, end - start));
        start = end + 1;
    }
    return lines;
}

}  // namespace kernhub
