#include "support/elf_craft.hpp"

#include <elf.h>

#include <cstring>
#include <stdexcept>

namespace kernhub::test {

namespace {

struct Headers {
    Elf64_Ehdr header;
    std::vector<Elf64_Shdr> sections;
};

Headers read_headers(const std::vector<std::uint8_t>& bytes) {
    Headers out{};
    if (bytes.size() < sizeof(Elf64_Ehdr)) throw std::runtime_error("not an ELF file");
    std::memcpy(&out.header, bytes.data(), sizeof(Elf64_Ehdr));
    const Elf64_Ehdr& h = out.header;
    if (std::memcmp(h.e_ident, ELFMAG, SELFMAG) != 0 || h.e_ident[EI_CLASS] != ELFCLASS64 ||
        h.e_ident[EI_DATA] != ELFDATA2LSB || h.e_shentsize != sizeof(Elf64_Shdr)) {
        throw std::runtime_error("not an ELF64 little-endian file with section headers");
    }
    if (h.e_shoff + std::uint64_t{h.e_shnum} * sizeof(Elf64_Shdr) > bytes.size()) {
        throw std::runtime_error("section headers past the end");
    }
    out.sections.resize(h.e_shnum);
    std::memcpy(out.sections.data(), bytes.data() + h.e_shoff, h.e_shnum * sizeof(Elf64_Shdr));
    return out;
}

// The original bytes, padded to 8, then the headers as the new table.
std::vector<std::uint8_t> with_table(std::vector<std::uint8_t> bytes, Headers headers) {
    if (headers.sections.size() >= SHN_LORESERVE) throw std::runtime_error("too many section headers");
    bytes.resize((bytes.size() + 7) & ~std::size_t{7});
    headers.header.e_shoff = bytes.size();
    headers.header.e_shnum = static_cast<Elf64_Half>(headers.sections.size());
    const auto* table = reinterpret_cast<const std::uint8_t*>(headers.sections.data());
    bytes.insert(bytes.end(), table, table + headers.sections.size() * sizeof(Elf64_Shdr));
    std::memcpy(bytes.data(), &headers.header, sizeof(Elf64_Ehdr));
    return bytes;
}

}  // namespace

std::vector<std::uint8_t> with_section_copies(const std::vector<std::uint8_t>& bytes, const std::string& section,
                                              std::size_t copies) {
    Headers headers = read_headers(bytes);
    const Elf64_Shdr& names = headers.sections.at(headers.header.e_shstrndx);
    for (const Elf64_Shdr& candidate : headers.sections) {
        const std::uint64_t at = names.sh_offset + candidate.sh_name;
        if (at + section.size() + 1 > bytes.size() ||
            std::memcmp(bytes.data() + at, section.c_str(), section.size() + 1) != 0) {
            continue;
        }
        const Elf64_Shdr copy = candidate;
        headers.sections.insert(headers.sections.end(), copies, copy);
        return with_table(bytes, std::move(headers));
    }
    throw std::runtime_error("no section " + section);
}

std::vector<std::uint8_t> with_last_section_copies(const std::vector<std::uint8_t>& bytes, std::size_t copies) {
    Headers headers = read_headers(bytes);
    if (headers.sections.empty()) throw std::runtime_error("no section headers");
    const Elf64_Shdr copy = headers.sections.back();
    headers.sections.insert(headers.sections.end(), copies, copy);
    return with_table(bytes, std::move(headers));
}

std::vector<std::uint8_t> with_read_only_section(const std::vector<std::uint8_t>& bytes,
                                                 const std::vector<std::uint8_t>& payload) {
    Headers headers = read_headers(bytes);
    std::vector<std::uint8_t> out = bytes;
    out.resize((out.size() + 7) & ~std::size_t{7});
    Elf64_Shdr added{};
    added.sh_type = SHT_PROGBITS;
    added.sh_flags = SHF_ALLOC;
    added.sh_offset = out.size();
    added.sh_size = payload.size();
    added.sh_addralign = 1;
    out.insert(out.end(), payload.begin(), payload.end());
    headers.sections.push_back(added);
    return with_table(std::move(out), std::move(headers));
}

}  // namespace kernhub::test
