// The one ELF header parser the loader and the inspector share, and the one
// spelling of machines and types.
#include <elf.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "elf/elf_header.hpp"
#include "elf/elf_inspect.hpp"
#include "kernhub/error.hpp"

using kernhub::elf::parse_elf_header;
using Bytes = std::vector<std::uint8_t>;

namespace {

// A 64-bit little-endian header with only identification, e_type and
// e_machine set: all parse_elf_header looks at.
Bytes header64(std::uint16_t type, std::uint16_t machine) {
    Bytes bytes(sizeof(Elf64_Ehdr), 0);
    bytes[0] = ELFMAG0;
    bytes[1] = ELFMAG1;
    bytes[2] = ELFMAG2;
    bytes[3] = ELFMAG3;
    bytes[EI_CLASS] = ELFCLASS64;
    bytes[EI_DATA] = ELFDATA2LSB;
    bytes[EI_OSABI] = 3;
    bytes[offsetof(Elf64_Ehdr, e_type)] = static_cast<std::uint8_t>(type);
    bytes[offsetof(Elf64_Ehdr, e_machine)] = static_cast<std::uint8_t>(machine & 0xff);
    bytes[offsetof(Elf64_Ehdr, e_machine) + 1] = static_cast<std::uint8_t>(machine >> 8);
    return bytes;
}

}  // namespace

TEST_CASE("parse_elf_header reads class, order, type and machine", "[elf]") {
    const Bytes bytes = header64(ET_DYN, EM_AARCH64);
    const auto parse = parse_elf_header(bytes.data(), bytes.size());
    REQUIRE(parse.header);
    CHECK(parse.header->elf_class == ELFCLASS64);
    CHECK(parse.header->little_endian);
    CHECK(parse.header->type == ET_DYN);
    CHECK(parse.header->machine == EM_AARCH64);
    CHECK(parse.header->os_abi == 3);
}

TEST_CASE("parse_elf_header says what is wrong and where", "[elf]") {
    Bytes bytes = header64(ET_DYN, EM_X86_64);
    auto problem = [](const Bytes& b, std::size_t size) {
        const auto parse = parse_elf_header(b.data(), size);
        CHECK_FALSE(parse.header);
        return std::make_pair(parse.problem, parse.offset);
    };
    CHECK(problem(bytes, 0) == std::make_pair(std::string("the file is empty"), std::uint64_t{0}));
    CHECK(problem(bytes, 5) == std::make_pair(std::string("header truncated after 5 bytes"), std::uint64_t{5}));
    CHECK(problem(bytes, 40) ==
          std::make_pair(std::string("header truncated after 40 of 64 bytes"), std::uint64_t{40}));
    bytes[EI_DATA] = 9;
    CHECK(problem(bytes, bytes.size()) ==
          std::make_pair(std::string("unknown byte order EI_DATA 9"), std::uint64_t{EI_DATA}));
    bytes[EI_CLASS] = 7;
    CHECK(problem(bytes, bytes.size()) == std::make_pair(std::string("unknown EI_CLASS 7"), std::uint64_t{EI_CLASS}));
    bytes[1] = 'X';
    CHECK(problem(bytes, bytes.size()) == std::make_pair(std::string("no ELF magic number"), std::uint64_t{0}));
}

TEST_CASE("the inspector and the loader's messages spell machines and types alike", "[elf]") {
    using namespace kernhub::elf;
    CHECK(machine_name(EM_X86_64) == "x86_64");
    CHECK(machine_name(EM_CUDA) == "CUDA");
    CHECK(machine_name(EM_S390) == "s390");
    CHECK(machine_name(4242) == "unknown");
    CHECK(type_name(ET_DYN) == "DYN");
    CHECK(type_name(0x300) == "0x300");
    CHECK(describe_type(ET_EXEC) == "ET_EXEC, an executable");
    CHECK(describe_type(ET_NONE) == "ET_NONE");
    CHECK(describe_type(0x300) == "unknown");

    // The inspector reports a header it cannot use with the parser's words.
    Bytes bytes = header64(ET_DYN, EM_CUDA);
    bytes[EI_CLASS] = 7;
    try {
        inspect_elf(bytes.data(), bytes.size(), "odd.so");
        FAIL("accepted");
    } catch (const kernhub::Error& error) {
        CHECK(error.code() == kernhub::ErrorCode::verification);
        CHECK_THAT(error.message(),
                   Catch::StartsWith("odd.so is a malformed ELF file: unknown EI_CLASS 7 (at offset 4"));
    }
}
