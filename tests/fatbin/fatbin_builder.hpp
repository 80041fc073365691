// Test helpers for the fatbin tests: reading the nvcc-built fixtures, and
// writing fatbin bytes by hand for the cases nvcc never produces (damaged
// headers, huge sizes). The writer follows the layout documented at the top
// of src/fatbin/fatbin.cpp; it is a byte writer, not a second parser.
#pragma once

#include <catch2/catch.hpp>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "fatbin/fatbin.hpp"
#include "kernhub/error.hpp"
#include "support/build_paths.hpp"
#include "support/slurp.hpp"

namespace fatbin_test {

using Bytes = std::vector<std::uint8_t>;

inline const std::filesystem::path k_fixtures = KERNHUB_FIXTURE_DIR;

// The nvcc-built fixtures exist only when the build found nvcc: tests that
// read them carry the tag [needs:nvcc] (tests/support/requirements.hpp).
inline Bytes read_fixture(const std::string& name) {
    return kernhub::test::slurp_bytes(k_fixtures / name);
}

inline void put(Bytes& out, std::size_t at, std::uint64_t value, std::size_t width) {
    if (out.size() < at + width) out.resize(at + width);
    for (std::size_t i = 0; i < width; ++i) out[at + i] = static_cast<std::uint8_t>(value >> (8 * i));
}

struct EntrySpec {
    std::uint16_t kind = 2;  // 1 PTX, 2 ELF, 8 LTO-IR
    std::uint32_t header_size = 64;
    std::uint32_t arch = 80;
    std::uint64_t flags = 0x11;
    std::uint32_t compressed_size = 0;
    std::uint64_t decompressed_size = 0;
    std::size_t payload_bytes = 16;
    std::optional<std::uint64_t> claimed_size;  // written instead of payload_bytes
};

inline Bytes entry_bytes(const EntrySpec& spec) {
    // Header sizes the parser must refuse (below 64, absurdly large) still
    // get 64 real header bytes, so only the field is wrong.
    const bool sane = spec.header_size >= 64 && spec.header_size <= 4096;
    const std::size_t written = sane ? spec.header_size : 64;
    Bytes out(written, 0);
    put(out, 0x00, spec.kind, 2);
    put(out, 0x02, 0x0101, 2);
    put(out, 0x04, spec.header_size, 4);
    put(out, 0x08, spec.claimed_size.value_or(spec.payload_bytes), 8);
    put(out, 0x10, spec.compressed_size, 4);
    put(out, 0x1C, spec.arch, 4);
    put(out, 0x28, spec.flags, 8);
    put(out, 0x38, spec.decompressed_size, 8);
    out.insert(out.end(), spec.payload_bytes, 0xAB);
    return out;
}

struct ContainerSpec {
    std::vector<EntrySpec> entries;
    std::uint32_t magic = 0xBA55ED50;
    std::uint16_t version = 1;
    std::uint16_t header_size = 16;
    std::optional<std::uint64_t> claimed_payload;  // written instead of the real size
};

inline Bytes container_bytes(const ContainerSpec& spec) {
    Bytes body;
    for (const EntrySpec& entry : spec.entries) {
        const Bytes bytes = entry_bytes(entry);
        body.insert(body.end(), bytes.begin(), bytes.end());
    }
    Bytes out(spec.header_size >= 16 ? spec.header_size : 16, 0);
    put(out, 0, spec.magic, 4);
    put(out, 4, spec.version, 2);
    put(out, 6, spec.header_size, 2);
    put(out, 8, spec.claimed_payload.value_or(body.size()), 8);
    out.insert(out.end(), body.begin(), body.end());
    return out;
}

inline kernhub::fatbin::Fatbin parse(const Bytes& bytes, const std::string& source = "test.fatbin") {
    return kernhub::fatbin::parse_fatbin(bytes.data(), bytes.size(), source);
}

// The code of the Error that parse_fatbin throws; ErrorCode::ok when it
// parses. Any other exception propagates and fails the test.
inline kernhub::ErrorCode parse_error(const Bytes& bytes) {
    try {
        parse(bytes);
    } catch (const kernhub::Error& error) {
        return error.code();
    }
    return kernhub::ErrorCode::ok;
}

// "sm_90a" / "compute_100f" -> an Entry, for hand-built selection tables.
inline kernhub::fatbin::Entry entry_named(const std::string& name, std::size_t container = 0) {
    kernhub::fatbin::Entry entry;
    const bool sass = name.rfind("sm_", 0) == 0;
    entry.kind = sass ? kernhub::fatbin::EntryKind::sass : kernhub::fatbin::EntryKind::ptx;
    std::string digits = name.substr(sass ? 3 : 8);
    if (!digits.empty() && (digits.back() == 'a' || digits.back() == 'f')) {
        entry.variant = digits.back();
        digits.pop_back();
    }
    entry.arch = std::stoi(digits);
    entry.container = container;
    return entry;
}

inline kernhub::fatbin::Fatbin fatbin_of(const std::vector<std::string>& names) {
    kernhub::fatbin::Fatbin fatbin;
    fatbin.containers = 1;
    for (const std::string& name : names) fatbin.entries.push_back(entry_named(name));
    return fatbin;
}

}  // namespace fatbin_test
