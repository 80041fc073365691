// Parsing real nvcc output (tests/fixtures builds it when nvcc exists),
// cubins and format detection.
#include <catch2/catch.hpp>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fatbin/fatbin.hpp"
#include "fatbin_builder.hpp"
#include "kernhub/error.hpp"

using namespace kernhub::fatbin;
using namespace fatbin_test;

namespace {

struct Expected {
    std::string arch_name;
    EntryKind kind;
    bool compressed;
    std::size_t container;
};

const std::uint8_t k_elf_magic[] = {0x7f, 'E', 'L', 'F'};
const std::uint8_t k_zstd_magic[] = {0x28, 0xb5, 0x2f, 0xfd};

bool payload_starts_with(const Bytes& file, const Entry& entry, const std::uint8_t (&magic)[4]) {
    if (entry.size < 4) return false;
    for (std::size_t i = 0; i < 4; ++i) {
        if (file[entry.offset + i] != magic[i]) return false;
    }
    return true;
}

// The exact entry list, and payloads that lie inside the file and start the
// way their kind and compression say.
void check_entries(const Bytes& file, const Fatbin& fatbin, const std::vector<Expected>& expected) {
    REQUIRE(fatbin.entries.size() == expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i) {
        const Entry& entry = fatbin.entries[i];
        INFO("entry " << i << " " << entry.arch_name());
        CHECK(entry.arch_name() == expected[i].arch_name);
        CHECK(entry.kind == expected[i].kind);
        CHECK(entry.compressed == expected[i].compressed);
        CHECK(entry.container == expected[i].container);
        CHECK(entry.size > 0);
        REQUIRE(entry.offset + entry.size <= file.size());
        if (entry.compressed) {
            CHECK(entry.uncompressed_size > entry.size);
            CHECK(payload_starts_with(file, entry, k_zstd_magic));
        } else {
            CHECK(entry.uncompressed_size == 0);
        }
        if (!entry.compressed && entry.kind == EntryKind::sass) CHECK(payload_starts_with(file, entry, k_elf_magic));
    }
}

const auto sass = EntryKind::sass;
const auto ptx = EntryKind::ptx;

}  // namespace

TEST_CASE("nvcc fatbins parse to their exact entry lists", "[fatbin][needs:nvcc]") {
    SECTION("multi: sm_80 + sm_90a SASS, compute_90 PTX compressed by default") {
        const Bytes file = read_fixture("multi.fatbin");
        const Fatbin fatbin = parse(file);
        CHECK(fatbin.containers == 1);
        check_entries(file, fatbin,
                      {{"sm_80", sass, false, 0}, {"sm_90a", sass, false, 0}, {"compute_90", ptx, true, 0}});
        CHECK(describe_archs(fatbin) == "sm_80, sm_90a, compute_90");
    }
    SECTION("compressed: -compress-all compresses the SASS too") {
        const Bytes file = read_fixture("compressed.fatbin");
        const Fatbin fatbin = parse(file);
        CHECK(fatbin.containers == 1);
        check_entries(file, fatbin,
                      {{"sm_80", sass, true, 0}, {"sm_90a", sass, true, 0}, {"compute_90", ptx, true, 0}});
    }
    SECTION("ptx_only") {
        const Bytes file = read_fixture("ptx_only.fatbin");
        const Fatbin fatbin = parse(file);
        CHECK(fatbin.containers == 1);
        check_entries(file, fatbin, {{"compute_80", ptx, true, 0}});
    }
    SECTION("sm100: plain, 'a' and 'f' SASS and 'f' PTX") {
        const Bytes file = read_fixture("sm100.fatbin");
        const Fatbin fatbin = parse(file);
        CHECK(fatbin.containers == 1);
        check_entries(file, fatbin,
                      {{"sm_100", sass, false, 0},
                       {"sm_100a", sass, false, 0},
                       {"sm_103f", sass, false, 0},
                       {"compute_100f", ptx, true, 0}});
        CHECK(fatbin.entries[0].cc_major() == 10);
        CHECK(fatbin.entries[2].cc_minor() == 3);
    }
    SECTION("two_containers: both containers, entry offsets relative to the whole file") {
        const Bytes file = read_fixture("two_containers.fatbin");
        const Fatbin fatbin = parse(file);
        CHECK(fatbin.containers == 2);
        check_entries(file, fatbin,
                      {{"compute_80", ptx, true, 0},
                       {"sm_80", sass, false, 1},
                       {"sm_90a", sass, false, 1},
                       {"compute_90", ptx, true, 1}});
        const std::size_t first_size = read_fixture("ptx_only.fatbin").size();
        const Fatbin multi = parse(read_fixture("multi.fatbin"));
        CHECK(fatbin.entries[1].offset == first_size + multi.entries[0].offset);
        CHECK(describe_archs(fatbin) == "compute_80, sm_80, sm_90a, compute_90");
    }
}

TEST_CASE("nvcc cubin: SM version from e_flags, no variant", "[fatbin][needs:nvcc]") {
    const Bytes cubin = read_fixture("kernel_sm90.cubin");
    CHECK(detect_format(cubin.data(), cubin.size()) == Format::cubin);
    const Fatbin fatbin = parse_cubin(cubin.data(), cubin.size(), "kernel_sm90.cubin");
    CHECK(fatbin.containers == 1);
    REQUIRE(fatbin.entries.size() == 1);
    CHECK(fatbin.entries[0].arch_name() == "sm_90");
    CHECK(fatbin.entries[0].size == cubin.size());
    CHECK(fatbin.entries[0].offset == 0);

    // The SASS images inside a fatbin are cubins too; sm_90a's e_flags equal
    // sm_90's, so only the fatbin entry knows the 'a'.
    const Bytes file = read_fixture("multi.fatbin");
    const Fatbin multi = parse(file);
    REQUIRE(multi.entries.size() == 3);  // sm_80, sm_90a, compute_90
    for (std::size_t i = 0; i < 2; ++i) {
        const Entry& entry = multi.entries[i];
        const Fatbin inner = parse_cubin(file.data() + entry.offset, static_cast<std::size_t>(entry.size), "inner");
        CHECK(inner.entries.at(0).arch_name() == (i == 0 ? "sm_80" : "sm_90"));
    }
    CHECK_THROWS_AS(parse_cubin(file.data(), file.size(), "multi.fatbin"), kernhub::Error);
}

TEST_CASE("detect_format tells fatbin, cubin, other ELF and text apart", "[fatbin]") {
    auto detect = [](const Bytes& bytes) { return detect_format(bytes.data(), bytes.size()); };
    CHECK(detect(container_bytes({})) == Format::fatbin);
    const Bytes so = read_fixture("libkh_good.so");
    CHECK(detect(so) == Format::elf);
    const std::string text = "// a kernel's README\n";
    CHECK(detect(Bytes(text.begin(), text.end())) == Format::unknown);
    CHECK(detect({}) == Format::unknown);
    CHECK(detect_format(nullptr, 0) == Format::unknown);
    CHECK(detect({0x50, 0xed, 0x55}) == Format::unknown);
    CHECK(detect({0x7f, 'E', 'L', 'F'}) == Format::elf);
}

TEST_CASE("detect_format tells nvcc's fatbin and cubin apart", "[fatbin][needs:nvcc]") {
    const Bytes fatbin = read_fixture("multi.fatbin");
    const Bytes cubin = read_fixture("kernel_sm90.cubin");
    CHECK(detect_format(fatbin.data(), fatbin.size()) == Format::fatbin);
    CHECK(detect_format(cubin.data(), cubin.size()) == Format::cubin);
}

namespace {

// A 64-byte ELF64 header with only the fields parse_cubin reads.
Bytes cubin_header(std::uint8_t osabi, std::uint32_t e_flags, std::uint16_t machine = 190) {
    Bytes header(64, 0);
    header[0] = 0x7f;
    header[1] = 'E';
    header[2] = 'L';
    header[3] = 'F';
    header[4] = 2;  // ELFCLASS64
    header[5] = 1;  // little-endian
    header[7] = osabi;
    put(header, 18, machine, 2);
    put(header, 48, e_flags, 4);
    return header;
}

std::string cubin_arch(const Bytes& bytes) {
    return parse_cubin(bytes.data(), bytes.size(), "k.cubin").entries.at(0).arch_name();
}

kernhub::ErrorCode cubin_error(const Bytes& bytes) {
    try {
        parse_cubin(bytes.data(), bytes.size(), "k.cubin");
    } catch (const kernhub::Error& error) {
        return error.code();
    }
    return kernhub::ErrorCode::ok;
}

}  // namespace

TEST_CASE("hand-built cubin headers", "[fatbin]") {
    using kernhub::ErrorCode;
    // e_flags as nvcc 13 writes them (SM in bits 8..15).
    CHECK(cubin_arch(cubin_header(0x41, 0x06005004)) == "sm_80");
    CHECK(cubin_arch(cubin_header(0x41, 0x06006402)) == "sm_100");
    CHECK(cubin_arch(cubin_header(0x41, 0x06007902)) == "sm_121");
    // The pre-13 layout: SM in the low byte.
    CHECK(cubin_arch(cubin_header(0x33, 0x005a055a)) == "sm_90");
    CHECK(detect_format(cubin_header(0x41, 0x06005004).data(), 64) == Format::cubin);

    CHECK(cubin_error(cubin_header(0x41, 0x06005004, 62)) == ErrorCode::verification);
    CHECK(cubin_error(cubin_header(0x41, 0)) == ErrorCode::verification);
    CHECK(cubin_error(cubin_header(0x00, 0x06005004)) == ErrorCode::verification);
    Bytes class32 = cubin_header(0x41, 0x06005004);
    class32[4] = 1;
    CHECK(cubin_error(class32) == ErrorCode::verification);
    Bytes big_endian = cubin_header(0x41, 0x06005004);
    big_endian[5] = 2;
    CHECK(cubin_error(big_endian) == ErrorCode::verification);
    CHECK(cubin_error({}) == ErrorCode::verification);

    const Bytes full = cubin_header(0x41, 0x06005a04);
    for (std::size_t length = 0; length < full.size(); ++length) {
        INFO("length " << length);
        CHECK(cubin_error(Bytes(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(length))) ==
              ErrorCode::verification);
    }
}
