// GLIBC version strings: ordering them, and this host's own. Version nodes
// are strings in the file ("GLIBC_2.2.5"), and plain string order puts
// "GLIBC_2.4" after "GLIBC_2.34", so they are compared as numbers.
#include <cstdint>
#include <string>
#include <vector>

#include "elf/elf_inspect.hpp"

#if defined(__GLIBC__)
#include <gnu/libc-version.h>
#endif

namespace kernhub::elf {

namespace {

// The dotted numbers from the first digit on: "GLIBC_2.2.5" -> {2, 2, 5}.
// Components saturate instead of overflowing; no real version comes near.
std::vector<std::uint64_t> version_numbers(const std::string& text) {
    constexpr std::uint64_t k_cap = 1'000'000'000;
    std::vector<std::uint64_t> numbers;
    std::size_t at = text.find_first_of("0123456789");
    while (at < text.size() && text[at] >= '0' && text[at] <= '9') {
        std::uint64_t value = 0;
        for (; at < text.size() && text[at] >= '0' && text[at] <= '9'; ++at) {
            value = value >= k_cap ? k_cap : value * 10 + static_cast<std::uint64_t>(text[at] - '0');
        }
        numbers.push_back(value);
        if (at + 1 >= text.size() || text[at] != '.') break;
        ++at;
    }
    return numbers;
}

}  // namespace

int compare_glibc(const std::string& a, const std::string& b) {
    const std::vector<std::uint64_t> left = version_numbers(a);
    const std::vector<std::uint64_t> right = version_numbers(b);
    const std::size_t count = left.size() > right.size() ? left.size() : right.size();
    for (std::size_t i = 0; i < count; ++i) {
        const std::uint64_t x = i < left.size() ? left[i] : 0;
        const std::uint64_t y = i < right.size() ? right[i] : 0;
        if (x != y) return x < y ? -1 : 1;
    }
    const int text = a.compare(b);
    return text < 0 ? -1 : (text > 0 ? 1 : 0);
}

std::string host_glibc() {
#if defined(__GLIBC__)
    return std::string("GLIBC_") + gnu_get_libc_version();
#else
    return {};
#endif
}

}  // namespace kernhub::elf
