#include "common/text.hpp"

namespace kernhub {

std::string trim(std::string_view text) {
    constexpr std::string_view k_space = " \t\n\v\f\r";
    auto begin = text.find_first_not_of(k_space);
    if (begin == std::string_view::npos) return {};
    auto end = text.find_last_not_of(k_space);
    return std::string(text.substr(begin, end - begin + 1));
}

std::string ascii_lowercase(std::string_view text) {
    std::string out(text);
    for (char& c : out) {
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    }
    return out;
}

std::string printable(std::string_view text) {
    std::string out(text);
    for (char& c : out) {
        auto byte = static_cast<unsigned char>(c);
        if (byte < 0x20 || byte == 0x7f) c = '?';
    }
    return out;
}

std::string quoted_name(std::string_view text) {
    const bool cut = text.size() > k_max_quoted_bytes;
    return "'" + printable(text.substr(0, k_max_quoted_bytes)) + (cut ? "...'" : "'");
}

}  // namespace kernhub
