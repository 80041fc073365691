// Telling fatbins, cubins and other ELF files apart, and reading the SM
// version of a cubin.
//
// Checked against nvcc 13.0 `-cubin -arch=sm_XX` output: 64-bit
// little-endian ELF, e_ident[EI_OSABI] 0x41, e_ident[EI_ABIVERSION] 8,
// ET_EXEC, e_machine 190. The SM version sits in bits 8..15 of e_flags:
//   sm_80 0x06005004, sm_90 0x06005a04, sm_100 0x06006402, sm_103 0x06006702,
//   sm_120 0x06007802, sm_121 0x06007902.
// sm_90a, sm_100a, sm_100f and sm_121a give the same e_flags as the plain
// arch; the variant only shows in the ptxas command line kept in
// .note.nv.tkinfo ("-arch sm_90a"), which is tool text, not a format field,
// so a cubin's variant is reported as plain.
// Toolkits before 13 wrote e_ident[EI_OSABI] 0x33 with the SM version in the
// low byte of e_flags (e.g. 0x5a055a for sm_90). That layout is not
// producible with this toolkit and is untested here.
#include <cstddef>
#include <cstdint>
#include <string>

#include "digest/digest.hpp"
#include "fatbin/bytes.hpp"
#include "fatbin/fatbin.hpp"

namespace kernhub::fatbin {

namespace {

using detail::Bytes;
using detail::k_max_arch;

constexpr std::uint32_t k_fatbin_magic = 0xBA55ED50;
constexpr std::uint8_t k_elf_magic[4] = {0x7f, 'E', 'L', 'F'};
constexpr std::size_t k_elf64_header = 64;
constexpr std::size_t k_ei_class = 4;
constexpr std::size_t k_ei_data = 5;
constexpr std::size_t k_ei_osabi = 7;
constexpr std::size_t k_e_machine = 18;
constexpr std::size_t k_e_flags = 48;
constexpr std::uint8_t k_elfclass64 = 2;
constexpr std::uint8_t k_elfdata_lsb = 1;
constexpr std::uint8_t k_elfdata_msb = 2;
constexpr std::uint16_t k_em_cuda = 190;
constexpr std::uint8_t k_osabi_cuda_v13 = 0x41;
constexpr std::uint8_t k_osabi_cuda_legacy = 0x33;

bool has_elf_magic(const std::uint8_t* data, std::size_t size) {
    if (size < sizeof k_elf_magic) return false;
    for (std::size_t i = 0; i < sizeof k_elf_magic; ++i) {
        if (data[i] != k_elf_magic[i]) return false;
    }
    return true;
}

std::uint16_t elf_machine(const std::uint8_t* data) {
    const auto lo = data[k_e_machine];
    const auto hi = data[k_e_machine + 1];
    const bool big_endian = data[k_ei_data] == k_elfdata_msb;
    return static_cast<std::uint16_t>(big_endian ? (lo << 8) | hi : (hi << 8) | lo);
}

int cubin_arch(const Bytes& in) {
    const std::uint8_t osabi = in.u8(k_ei_osabi);
    const std::uint32_t flags = in.u32(k_e_flags);
    std::uint32_t arch = 0;
    if (osabi == k_osabi_cuda_v13) {
        arch = (flags >> 8) & 0xffu;
    } else if (osabi == k_osabi_cuda_legacy) {
        arch = flags & 0xffu;
    } else {
        in.fail(k_ei_osabi, "unknown CUDA ELF ABI " + std::to_string(osabi));
    }
    if (arch == 0 || arch > k_max_arch) {
        in.fail(k_e_flags, "e_flags " + digest::to_hex_literal(flags) + " name no SM version");
    }
    return static_cast<int>(arch);
}

}  // namespace

Format detect_format(const std::uint8_t* data, std::size_t size) {
    if (size >= 4) {
        const std::uint32_t magic = static_cast<std::uint32_t>(data[0]) | static_cast<std::uint32_t>(data[1]) << 8 |
                                    static_cast<std::uint32_t>(data[2]) << 16 |
                                    static_cast<std::uint32_t>(data[3]) << 24;
        if (magic == k_fatbin_magic) return Format::fatbin;
    }
    if (!has_elf_magic(data, size)) return Format::unknown;
    if (size >= k_e_machine + 2 && elf_machine(data) == k_em_cuda) return Format::cubin;
    return Format::elf;
}

Fatbin parse_cubin(const std::uint8_t* data, std::size_t size, const std::string& source) {
    const Bytes in(data, size, source, "cubin");
    if (!has_elf_magic(data, size)) in.fail(0, "no ELF magic");
    if (size < k_elf64_header) in.fail(size, "truncated ELF header");
    if (in.u8(k_ei_class) != k_elfclass64) in.fail(k_ei_class, "not a 64-bit ELF file");
    if (in.u8(k_ei_data) != k_elfdata_lsb) in.fail(k_ei_data, "not a little-endian ELF file");
    const std::uint16_t machine = in.u16(k_e_machine);
    if (machine != k_em_cuda) {
        in.fail(k_e_machine, "e_machine " + std::to_string(machine) + " is not CUDA (190)");
    }
    Entry entry;
    entry.kind = EntryKind::sass;
    entry.arch = cubin_arch(in);
    entry.size = size;
    // The whole file is the one image; it counts as one container so that
    // entry.container is a valid index.
    Fatbin result;
    result.containers = 1;
    result.entries.push_back(entry);
    return result;
}

}  // namespace kernhub::fatbin
