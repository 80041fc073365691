// Shared by every libFuzzer target in tests/fuzz/ (CONTRIBUTING.md,
// "How the tests are organised"): the entry point's signature, and the one outcome a parser may
// have besides success. A parser refusing hostile bytes throws
// kernhub::Error; anything else that escapes (another exception type, a
// crash, a sanitizer report, a hang, unbounded memory) is a finding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "kernhub/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace fuzz {

inline std::string as_text(const std::uint8_t* data, std::size_t size) {
    return std::string(reinterpret_cast<const char*>(data), size);
}

// Runs `parse`, accepting kernhub::Error as the refusal it is meant to be.
template <typename Fn>
void expect_error_or_success(Fn&& parse) {
    try {
        parse();
    } catch (const kernhub::Error&) {
    }
}

}  // namespace fuzz
