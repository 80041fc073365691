// Damaged and hostile fatbins: every outcome is a parse or an
// Error(verification), never a crash, a stray read or a huge allocation.
// Each attempt parses an exactly sized copy so that AddressSanitizer builds
// catch a read one byte past the end.
#include <catch2/catch.hpp>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "fatbin/fatbin.hpp"
#include "fatbin_builder.hpp"
#include "kernhub/error.hpp"

using namespace kernhub::fatbin;
using namespace fatbin_test;
using kernhub::ErrorCode;

namespace {

constexpr std::uint64_t k_u64_max = std::numeric_limits<std::uint64_t>::max();

// A small but complete fatbin: ELF sm_80, compressed PTX compute_90 with a
// wider header, 'a' SASS with the sm_100+ header size.
Bytes sample_fatbin() {
    ContainerSpec spec;
    spec.entries = {
        EntrySpec{},
        EntrySpec{1, 80, 90, 0x8011, 30, 200, 32, {}},
        EntrySpec{2, 112, 100, 0x1100011, 0, 0, 24, {}},
    };
    return container_bytes(spec);
}

Bytes prefix(const Bytes& bytes, std::size_t length) {
    return Bytes(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(length));
}

// On success the result must describe the bytes it came from.
void check_consistent(const Bytes& bytes) {
    const Fatbin fatbin = parse(bytes);
    for (const Entry& entry : fatbin.entries) {
        CHECK(entry.offset <= bytes.size());
        CHECK(entry.size <= bytes.size() - entry.offset);
        CHECK(entry.container < fatbin.containers);
    }
}

// Every prefix of `file` either parses or throws Error(verification); a
// proper prefix that does not end on a container boundary must throw.
void check_truncations(const Bytes& file, const std::vector<std::size_t>& boundaries) {
    for (std::size_t length = 0; length <= file.size(); ++length) {
        const Bytes cut = prefix(file, length);
        const ErrorCode code = parse_error(cut);
        bool at_boundary = length == file.size();
        for (std::size_t boundary : boundaries) at_boundary = at_boundary || length == boundary;
        if (code != (at_boundary ? ErrorCode::ok : ErrorCode::verification)) {
            FAIL("length " << length << " of " << file.size() << " gave code " << static_cast<int>(code));
        }
        if (code == ErrorCode::ok) check_consistent(cut);
    }
}

// Flips 1..4 bytes per round, half of the time inside the container and
// entry headers where the sizes live, so that most rounds hit a field the
// parser reads rather than payload it only skips.
void check_random_flips(const Bytes& file, std::uint32_t seed, int rounds) {
    const Fatbin clean = parse(file);
    std::vector<std::size_t> header_bytes;
    for (std::size_t i = 0; i < 16; ++i) header_bytes.push_back(i);
    // Single-container files: each entry header starts where the previous
    // payload ends.
    REQUIRE(clean.containers == 1);
    std::size_t entry_start = 16;
    for (const Entry& entry : clean.entries) {
        for (std::size_t i = entry_start; i < entry.offset; ++i) header_bytes.push_back(i);
        entry_start = static_cast<std::size_t>(entry.offset + entry.size);
    }
    std::mt19937 random(seed);
    std::uniform_int_distribution<std::size_t> anywhere(0, file.size() - 1);
    std::uniform_int_distribution<std::size_t> in_header(0, header_bytes.size() - 1);
    std::uniform_int_distribution<int> flips(1, 4);
    std::uniform_int_distribution<int> mask(1, 255);
    int failures = 0;
    for (int round = 0; round < rounds; ++round) {
        Bytes damaged = file;
        const int count = flips(random);
        for (int i = 0; i < count; ++i) {
            const std::size_t at = round % 2 == 0 ? anywhere(random) : header_bytes[in_header(random)];
            damaged[at] = static_cast<std::uint8_t>(damaged[at] ^ mask(random));
        }
        const ErrorCode code = parse_error(damaged);
        if (code == ErrorCode::ok) {
            check_consistent(damaged);
        } else if (code != ErrorCode::verification) {
            FAIL("round " << round << " gave code " << static_cast<int>(code));
        } else {
            ++failures;
        }
    }
    // Header damage must be noticed some of the time, or the test is not
    // exercising the checks at all.
    CHECK(failures > rounds / 10);
}

std::string error_message(const Bytes& bytes, const std::string& source) {
    try {
        parse(bytes, source);
    } catch (const kernhub::Error& error) {
        CHECK(error.code() == ErrorCode::verification);
        return error.message();
    }
    FAIL("parsed without error");
    return {};
}

}  // namespace

TEST_CASE("every truncation of a hand-built fatbin throws Error(verification)", "[fatbin]") {
    const Bytes file = sample_fatbin();
    REQUIRE(parse(file).entries.size() == 3);
    check_truncations(file, {});
    Bytes twice = file;
    twice.insert(twice.end(), file.begin(), file.end());
    check_truncations(twice, {file.size()});
}

TEST_CASE("every truncation of the nvcc fatbins parses or throws Error(verification)", "[fatbin][needs:nvcc]") {
    check_truncations(read_fixture("ptx_only.fatbin"), {});
    check_truncations(read_fixture("multi.fatbin"), {});
    check_truncations(read_fixture("two_containers.fatbin"), {read_fixture("ptx_only.fatbin").size()});
}

TEST_CASE("2000 seeded random byte flips of a hand-built fatbin parse or throw Error(verification)", "[fatbin]") {
    check_random_flips(sample_fatbin(), 20240601u, 2000);
}

TEST_CASE("2000 seeded random byte flips of the nvcc fatbins parse or throw Error(verification)",
          "[fatbin][needs:nvcc]") {
    check_random_flips(read_fixture("multi.fatbin"), 20240602u, 2000);
    check_random_flips(read_fixture("sm100.fatbin"), 20240603u, 2000);
}

TEST_CASE("hand-built headers with bad fields throw Error(verification)", "[fatbin]") {
    auto with_entry = [](EntrySpec entry) {
        ContainerSpec spec;
        spec.entries = {entry};
        return container_bytes(spec);
    };
    ContainerSpec bad_magic;
    bad_magic.magic = 0x464c457f;
    ContainerSpec version2;
    version2.version = 2;
    ContainerSpec header0;
    header0.header_size = 0;
    ContainerSpec header15;
    header15.header_size = 15;
    ContainerSpec huge_payload;
    huge_payload.claimed_payload = k_u64_max;
    ContainerSpec one_past;
    one_past.entries = {EntrySpec{}};
    one_past.claimed_payload = 64 + 16 + 1;
    ContainerSpec short_payload;  // the entry runs past its container, not the file
    short_payload.entries = {EntrySpec{}, EntrySpec{}};
    short_payload.claimed_payload = 64 + 16 + 32;

    const std::vector<std::pair<const char*, Bytes>> cases = {
        {"bad magic", container_bytes(bad_magic)},
        {"version 2", container_bytes(version2)},
        {"container header_size 0", container_bytes(header0)},
        {"container header_size 15", container_bytes(header15)},
        {"container payload 2^64-1", container_bytes(huge_payload)},
        {"container payload one past the end", container_bytes(one_past)},
        {"entry cut by its container", container_bytes(short_payload)},
        {"entry header_size 0", with_entry(EntrySpec{2, 0, 80, 0x11, 0, 0, 16, {}})},
        {"entry header_size 63", with_entry(EntrySpec{2, 63, 80, 0x11, 0, 0, 16, {}})},
        {"entry header_size 2^32-1", with_entry(EntrySpec{2, 0xffffffffu, 80, 0x11, 0, 0, 16, {}})},
        {"entry payload 2^64-1", with_entry(EntrySpec{2, 64, 80, 0x11, 0, 0, 16, k_u64_max})},
        {"entry header + payload wraps", with_entry(EntrySpec{2, 64, 80, 0x11, 0, 0, 16, k_u64_max - 63})},
        {"unknown kind 3", with_entry(EntrySpec{3, 64, 80, 0x11, 0, 0, 16, {}})},
        {"arch 0", with_entry(EntrySpec{2, 64, 0, 0x11, 0, 0, 16, {}})},
        {"arch 2^32-1", with_entry(EntrySpec{2, 64, 0xffffffffu, 0x11, 0, 0, 16, {}})},
        {"both 'a' and 'f'", with_entry(EntrySpec{2, 64, 100, 0x300011, 0, 0, 16, {}})},
        {"compressed size above stored", with_entry(EntrySpec{1, 80, 90, 0x8011, 17, 100, 16, {}})},
        {"trailing bytes",
         [] {
             Bytes bytes = container_bytes({});
             bytes.insert(bytes.end(), 5, 0);
             return bytes;
         }()},
        {"empty", Bytes{}},
    };
    for (const auto& [name, bytes] : cases) {
        INFO(name);
        CHECK(parse_error(bytes) == ErrorCode::verification);
    }
    CHECK_THROWS_AS(parse_fatbin(nullptr, 0, "null"), kernhub::Error);
}

TEST_CASE("messages name the source and the byte offset", "[fatbin]") {
    ContainerSpec spec;
    spec.entries = {EntrySpec{}, EntrySpec{2, 8, 80, 0x11, 0, 0, 16, {}}};
    const std::string message = error_message(container_bytes(spec), "org/repo/kernel.fatbin");
    CHECK_THAT(message, Catch::Contains("org/repo/kernel.fatbin"));
    // The second entry starts at 16 + 64 + 16 = 96; its header_size at +4.
    CHECK_THAT(message, Catch::Contains("at byte 100"));
    CHECK_THAT(message, Catch::Contains("header_size 8"));
    ContainerSpec magic;
    magic.magic = 0x12345678;
    CHECK_THAT(error_message(container_bytes(magic), "x"),
               Catch::Contains("0x12345678") && Catch::Contains("at byte 0"));
}

TEST_CASE("hand-built variants the parser accepts", "[fatbin]") {
    SECTION("fields of a valid entry") {
        const Bytes file = sample_fatbin();
        const Fatbin fatbin = parse(file);
        REQUIRE(fatbin.entries.size() == 3);
        const Entry& ptx = fatbin.entries[1];
        CHECK(ptx.arch_name() == "compute_90");
        CHECK(ptx.compressed);
        CHECK(ptx.size == 32);
        CHECK(ptx.uncompressed_size == 200);
        CHECK(ptx.offset == 16 + 64 + 16 + 80);
        CHECK(fatbin.entries[2].arch_name() == "sm_100a");
        CHECK(fatbin.entries[0].uncompressed_size == 0);
    }
    SECTION("a wider container header is skipped") {
        ContainerSpec spec;
        spec.header_size = 24;
        spec.entries = {EntrySpec{}};
        const Fatbin fatbin = parse(container_bytes(spec));
        REQUIRE(fatbin.entries.size() == 1);
        CHECK(fatbin.entries[0].offset == 24 + 64);
    }
    SECTION("an empty container") {
        const Fatbin fatbin = parse(container_bytes({}));
        CHECK(fatbin.containers == 1);
        CHECK(fatbin.entries.empty());
    }
    SECTION("LTO-IR entries are skipped, the SASS next to them kept") {
        ContainerSpec spec;
        spec.entries = {EntrySpec{8, 120, 90, 0x18011, 0, 0, 40, {}}, EntrySpec{2, 64, 90, 0x11, 0, 0, 16, {}}};
        const Fatbin fatbin = parse(container_bytes(spec));
        REQUIRE(fatbin.entries.size() == 1);
        CHECK(fatbin.entries[0].arch_name() == "sm_90");
        CHECK(fatbin.entries[0].offset == 16 + 120 + 40 + 64);
    }
    SECTION("the lz4-style flag counts as compressed") {
        ContainerSpec spec;
        spec.entries = {EntrySpec{2, 64, 80, 0x2011, 16, 500, 16, {}}};
        const Fatbin fatbin = parse(container_bytes(spec));
        CHECK(fatbin.entries.at(0).compressed);
        CHECK(fatbin.entries.at(0).uncompressed_size == 500);
    }
}
