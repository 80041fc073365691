// The ELF inspector against damaged files: targeted patches of one field
// each (the damage an attacker would choose), every truncation of a real
// .so, and seeded random byte flips. Each must parse or be refused with
// Error(verification); a crash or out-of-bounds read is the failure this
// guards against (run under -fsanitize=address,undefined to see overreads).
#include <elf.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "elf_test_support.hpp"
#include "support/temp_dir.hpp"

using kernhub::test::TempDir;
using namespace kernhub::test::elf;
using Bytes = std::vector<std::uint8_t>;

namespace {

// The patches below locate structures with <elf.h>'s structs, which is only
// right for files in the host's own layout.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ && sizeof(void*) == 8, "patches assume a LE64 host");

template <typename T>
T load(const Bytes& bytes, std::size_t offset) {
    T value{};
    std::memcpy(&value, bytes.data() + offset, sizeof value);
    return value;
}

template <typename T>
void store(Bytes& bytes, std::size_t offset, T value) {
    std::memcpy(bytes.data() + offset, &value, sizeof value);
}

// The offset of the first section header of `type`.
std::size_t section_header(const Bytes& bytes, std::uint32_t type) {
    const auto header = load<Elf64_Ehdr>(bytes, 0);
    for (std::size_t i = 0; i < header.e_shnum; ++i) {
        const std::size_t at = header.e_shoff + i * sizeof(Elf64_Shdr);
        if (load<Elf64_Shdr>(bytes, at).sh_type == type) return at;
    }
    throw std::runtime_error("test file has no section of type " + std::to_string(type));
}

std::size_t section_data(const Bytes& bytes, std::uint32_t type) {
    return load<Elf64_Shdr>(bytes, section_header(bytes, type)).sh_offset;
}

// The offset of the first dynamic entry with `tag`.
std::size_t dynamic_entry(const Bytes& bytes, std::int64_t tag) {
    const auto section = load<Elf64_Shdr>(bytes, section_header(bytes, SHT_DYNAMIC));
    for (std::size_t at = section.sh_offset; at < section.sh_offset + section.sh_size; at += sizeof(Elf64_Dyn)) {
        if (load<Elf64_Dyn>(bytes, at).d_tag == tag) return at;
    }
    throw std::runtime_error("test file has no dynamic tag " + std::to_string(tag));
}

void set_dynamic(Bytes& bytes, std::int64_t tag, std::uint64_t value) {
    store<std::uint64_t>(bytes, dynamic_entry(bytes, tag) + offsetof(Elf64_Dyn, d_un), value);
}

std::size_t first_vernaux(const Bytes& bytes) {
    const std::size_t need = section_data(bytes, SHT_GNU_verneed);
    return need + load<Elf64_Verneed>(bytes, need).vn_aux;
}

std::size_t program_header(const Bytes& bytes, std::uint32_t type) {
    const auto header = load<Elf64_Ehdr>(bytes, 0);
    for (std::size_t i = 0; i < header.e_phnum; ++i) {
        const std::size_t at = header.e_phoff + i * sizeof(Elf64_Phdr);
        if (load<Elf64_Phdr>(bytes, at).p_type == type) return at;
    }
    throw std::runtime_error("test file has no segment of type " + std::to_string(type));
}

using Patch = std::pair<const char*, std::function<void(Bytes&)>>;

std::vector<Patch> targeted_patches() {
    constexpr std::uint64_t u64_max = std::numeric_limits<std::uint64_t>::max();
    return {
        {"bad magic", [](Bytes& b) { b[1] = 'X'; }},
        {"unknown class", [](Bytes& b) { b[EI_CLASS] = 7; }},
        {"section table past the end",
         [](Bytes& b) { store<std::uint64_t>(b, offsetof(Elf64_Ehdr, e_shoff), b.size() - 10); }},
        {"program table offset overflows",
         [=](Bytes& b) { store<std::uint64_t>(b, offsetof(Elf64_Ehdr, e_phoff), u64_max - 8); }},
        {"huge section count", [](Bytes& b) { store<std::uint16_t>(b, offsetof(Elf64_Ehdr, e_shnum), 0xfffe); }},
        {"wrong program header size", [](Bytes& b) { store<std::uint16_t>(b, offsetof(Elf64_Ehdr, e_phentsize), 1); }},
        {"PT_DYNAMIC past the end",
         [](Bytes& b) {
             store<std::uint64_t>(b, program_header(b, PT_DYNAMIC) + offsetof(Elf64_Phdr, p_filesz), b.size());
         }},
        {"PT_LOAD size overflows",
         [=](Bytes& b) {
             store<std::uint64_t>(b, program_header(b, PT_LOAD) + offsetof(Elf64_Phdr, p_filesz), u64_max);
         }},
        {"DT_NEEDED outside the string table", [](Bytes& b) { set_dynamic(b, DT_NEEDED, 0xffffffff); }},
        {"DT_STRSZ past the end", [=](Bytes& b) { set_dynamic(b, DT_STRSZ, u64_max - 2); }},
        {"string runs past DT_STRSZ",
         [](Bytes& b) {
             const auto needed = load<Elf64_Dyn>(b, dynamic_entry(b, DT_NEEDED)).d_un.d_val;
             set_dynamic(b, DT_STRSZ, needed + 3);
         }},
        {"DT_STRTAB in no segment", [](Bytes& b) { set_dynamic(b, DT_STRTAB, 0xdead00000000); }},
        {"DT_VERNEED in no segment", [=](Bytes& b) { set_dynamic(b, DT_VERNEED, u64_max); }},
        {"vn_next leaves the segment",
         [](Bytes& b) { store<std::uint32_t>(b, section_data(b, SHT_GNU_verneed) + 12, 0xfffffff0); }},
        {"vn_next overlaps its record",
         [](Bytes& b) { store<std::uint32_t>(b, section_data(b, SHT_GNU_verneed) + 12, 1); }},
        {"vn_aux leaves the segment",
         [](Bytes& b) { store<std::uint32_t>(b, section_data(b, SHT_GNU_verneed) + 8, 0xfffffff0); }},
        {"vna_name outside the string table",
         [](Bytes& b) { store<std::uint32_t>(b, first_vernaux(b) + 8, 0xffffffff); }},
        {"vna_next leaves the segment", [](Bytes& b) { store<std::uint32_t>(b, first_vernaux(b) + 12, 0x7ffffff0); }},
        {"vna_next overlaps its record", [](Bytes& b) { store<std::uint32_t>(b, first_vernaux(b) + 12, 4); }},
        {".dynsym entry size wrong",
         [](Bytes& b) {
             store<std::uint64_t>(b, section_header(b, SHT_DYNSYM) + offsetof(Elf64_Shdr, sh_entsize), 23);
         }},
        {".dynsym links to no section",
         [](Bytes& b) {
             store<std::uint32_t>(b, section_header(b, SHT_DYNSYM) + offsetof(Elf64_Shdr, sh_link), 0xffff);
         }},
        {".dynsym past the end",
         [](Bytes& b) {
             store<std::uint64_t>(b, section_header(b, SHT_DYNSYM) + offsetof(Elf64_Shdr, sh_offset), b.size() - 8);
         }},
    };
}

}  // namespace

TEST_CASE("each targeted malformation is refused with a message naming the file", "[elf]") {
    TempDir dir;
    const auto library = build_glibc_user(dir.path());
    REQUIRE(library);
    const Bytes original = read_bytes(*library);
    REQUIRE(parses_or_rejects(original, "original"));
    for (const Patch& patch : targeted_patches()) {
        Bytes bytes = original;
        patch.second(bytes);
        const std::string source = std::string("patched (") + patch.first + ").so";
        INFO(source);
        try {
            kernhub::elf::inspect_elf(bytes.data(), bytes.size(), source);
            FAIL_CHECK("accepted");
        } catch (const kernhub::Error& error) {
            CHECK(error.code() == kernhub::ErrorCode::verification);
            CHECK(error.message().find(source) != std::string::npos);
            CHECK(error.message().find("offset") != std::string::npos);
        }
    }
}

TEST_CASE("every truncation of a shared object parses or is refused", "[elf]") {
    const Bytes original = read_bytes(k_good);
    std::size_t parsed = 0;
    std::size_t refused = 0;
    for (std::size_t length = 0; length <= original.size(); length += length < 4096 ? 1 : 97) {
        // An exactly sized copy, so a sanitizer sees any read past its end.
        const Bytes prefix(original.begin(), original.begin() + static_cast<std::ptrdiff_t>(length));
        (parses_or_rejects(prefix, "truncated.so") ? parsed : refused) += 1;
    }
    INFO(parsed << " parsed, " << refused << " refused");
    CHECK(refused > 0);
    CHECK(parses_or_rejects(original, "whole.so"));
}

TEST_CASE("seeded random byte flips never crash the inspector", "[elf]") {
    TempDir dir;
    const auto library = build_glibc_user(dir.path());
    REQUIRE(library);
    const std::vector<Bytes> originals = {read_bytes(k_good), read_bytes(*library)};
    std::mt19937_64 random(20240611);
    std::size_t refused = 0;
    for (int round = 0; round < 2000; ++round) {
        Bytes bytes = originals[static_cast<std::size_t>(round) % originals.size()];
        const std::size_t flips = 1 + random() % 4;
        for (std::size_t i = 0; i < flips; ++i) {
            // Aim most flips at the headers at either end of the file, where
            // a flip changes what the parser does rather than code bytes.
            const std::size_t region = random() % 3;
            std::size_t at = random() % bytes.size();
            if (region == 0) at = random() % std::min<std::size_t>(bytes.size(), 1024);
            if (region == 1) at = bytes.size() - 1 - random() % std::min<std::size_t>(bytes.size(), 2048);
            bytes[at] = static_cast<std::uint8_t>(bytes[at] ^ (1u << (random() % 8)));
        }
        if (!parses_or_rejects(bytes, "flipped-" + std::to_string(round) + ".so")) ++refused;
    }
    CHECK(refused > 0);
}
