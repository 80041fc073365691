// Parsing the fatbin container format.
//
// There is no published specification. The layout below was checked against
// what nvcc 13.0 (V13.0.88) writes with -fatbin; all fields little-endian.
//
// Container header, 16 bytes:
//   +0 u32 magic 0xBA55ED50   +4 u16 version 1   +6 u16 header_size 16
//   +8 u64 payload bytes (the entries), which follow the header.
//   One -fatbin run puts all -gencode images into ONE container. Files made
//   with `cat a.fatbin b.fatbin` hold several containers back to back; nvcc's
//   container payloads are multiples of 8, so no padding appears between them.
// Entry header (payload follows at entry + header_size):
//   +0x00 u16 kind: 1 PTX, 2 ELF (SASS), 8 LTO-IR (code=lto_90)
//   +0x02 u16 0x0101   +0x04 u32 header_size   +0x08 u64 payload bytes stored
//   +0x10 u32 compressed bytes (<= stored; stored is padded to 8)
//   +0x14 u32 offset of an options block inside the header (0 for plain ELF)
//   +0x18 u16 minor, +0x1A u16 major of the image format (PTX ISA 9.0, ELF 1.8)
//   +0x1C u32 arch: 80, 90, 100, 103, 120, 121 (no letter suffix)
//   +0x20 u32 name offset, +0x24 u32 name length, inside the header (-G)
//   +0x28 u64 flags   +0x38 u64 decompressed size (0 when not compressed)
//   header_size seen: 64 (ELF), 72 (ELF with -G: name), 80 (PTX), 112 (ELF
//   for sm_100 and later), 120 (LTO-IR), 128 (PTX with -G: name + options).
// Flags seen: 0x1 64-bit, 0x2 debug (-G), 0x10 linux, 0x8000 zstd payload
//   (starts 28 b5 2f fd), 0x2000 the other codec (-compress-mode=speed),
//   0x10000 on LTO-IR, 0x100000 'a' (sm_90a, sm_100a, sm_121a, compute_100a),
//   0x200000 'f' (sm_100f, sm_103f, compute_100f, compute_120f), 0x1000000 on
//   every sm_100+ ELF entry (meaning unknown; ignored).
// Compression: by default nvcc 13 stores ELF uncompressed and compresses PTX
//   (and -G images) with zstd; -Xfatbin -compress-all compresses ELF too;
//   -Xfatbin -compress=false stores PTX as plain text.
// nvcc refuses sm_100 together with sm_100f in one run (the same code), so a
//   plain and an 'f' build of one arch only meet in concatenated files.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "digest/digest.hpp"
#include "fatbin/bytes.hpp"
#include "fatbin/fatbin.hpp"

namespace kernhub::fatbin {

namespace {

using detail::Bytes;
using detail::k_max_arch;

constexpr std::uint32_t k_container_magic = 0xBA55ED50;
constexpr std::uint16_t k_container_version = 1;
constexpr std::size_t k_container_header_min = 16;
// The decompressed size at +0x38 is the last field read.
constexpr std::size_t k_entry_header_min = 64;

constexpr std::uint16_t k_kind_ptx = 1;
constexpr std::uint16_t k_kind_elf = 2;
constexpr std::uint16_t k_kind_ltoir = 8;

constexpr std::uint64_t k_flag_lz4 = 0x2000;
constexpr std::uint64_t k_flag_zstd = 0x8000;
constexpr std::uint64_t k_flag_arch_specific = 0x100000;
constexpr std::uint64_t k_flag_family = 0x200000;

char read_variant(const Bytes& in, std::size_t pos, std::uint64_t flags) {
    const bool arch_specific = (flags & k_flag_arch_specific) != 0;
    const bool family = (flags & k_flag_family) != 0;
    if (arch_specific && family) {
        in.fail(pos + 0x28, "entry flags " + digest::to_hex_literal(flags) + " claim both 'a' and 'f'");
    }
    if (arch_specific) return 'a';
    return family ? 'f' : 0;
}

// Reads the fields of a PTX or ELF entry whose header and payload are known
// to lie inside the container.
Entry read_entry(const Bytes& in, std::size_t pos, std::uint64_t header_size, std::uint64_t stored,
                 std::size_t container) {
    Entry entry;
    entry.kind = in.u16(pos) == k_kind_ptx ? EntryKind::ptx : EntryKind::sass;
    const std::uint32_t arch = in.u32(pos + 0x1C);
    if (arch == 0 || arch > k_max_arch) in.fail(pos + 0x1C, "implausible architecture " + std::to_string(arch));
    entry.arch = static_cast<int>(arch);
    const std::uint64_t flags = in.u64(pos + 0x28);
    entry.variant = read_variant(in, pos, flags);
    entry.compressed = (flags & (k_flag_lz4 | k_flag_zstd)) != 0;
    if (entry.compressed) {
        const std::uint32_t packed = in.u32(pos + 0x10);
        if (packed > stored) {
            in.fail(pos + 0x10,
                    "compressed size " + std::to_string(packed) + " exceeds the stored size " + std::to_string(stored));
        }
        entry.uncompressed_size = in.u64(pos + 0x38);
    }
    entry.size = stored;
    entry.offset = pos + header_size;
    entry.container = container;
    return entry;
}

// Parses the entry at `pos` and returns where the next one starts. `end` is
// the end of the enclosing container's payload and never exceeds in.size().
std::size_t parse_entry(const Bytes& in, std::size_t pos, std::size_t end, std::size_t container,
                        std::vector<Entry>& out) {
    const std::size_t room = end - pos;
    if (room < k_entry_header_min) {
        in.fail(pos, "truncated entry header (" + std::to_string(room) + " of " + std::to_string(k_entry_header_min) +
                         " bytes left in the container)");
    }
    const std::uint16_t kind = in.u16(pos);
    const std::uint32_t header_size = in.u32(pos + 4);
    const std::uint64_t stored = in.u64(pos + 8);
    if (header_size < k_entry_header_min) {
        in.fail(pos + 4,
                "entry header_size " + std::to_string(header_size) + " is below " + std::to_string(k_entry_header_min));
    }
    if (header_size > room) {
        in.fail(pos + 4, "entry header_size " + std::to_string(header_size) + " runs past the end of its container");
    }
    if (stored > room - header_size) {
        in.fail(pos + 8, "entry payload of " + std::to_string(stored) + " bytes runs past the end of its container (" +
                             std::to_string(room - header_size) + " bytes left)");
    }
    if (kind != k_kind_ptx && kind != k_kind_elf && kind != k_kind_ltoir) {
        in.fail(pos, "unknown entry kind " + std::to_string(kind));
    }
    if (kind != k_kind_ltoir) out.push_back(read_entry(in, pos, header_size, stored, container));
    // Both terms were checked against room, so the sum stays <= end.
    return pos + header_size + static_cast<std::size_t>(stored);
}

// Parses the container at `start` and returns where the next one starts.
std::size_t parse_container(const Bytes& in, std::size_t start, std::size_t index, std::vector<Entry>& out) {
    const std::size_t room = in.left(start);
    if (room < k_container_header_min) {
        in.fail(start, "truncated container header (" + std::to_string(room) + " of " +
                           std::to_string(k_container_header_min) + " bytes)");
    }
    const std::uint32_t magic = in.u32(start);
    if (magic != k_container_magic) {
        in.fail(start, "bad magic " + digest::to_hex_literal(magic) + " (a fatbin container starts with " +
                           digest::to_hex_literal(k_container_magic) + ")");
    }
    const std::uint16_t version = in.u16(start + 4);
    if (version != k_container_version) in.fail(start + 4, "unsupported container version " + std::to_string(version));
    const std::uint16_t header_size = in.u16(start + 6);
    if (header_size < k_container_header_min) {
        in.fail(start + 6, "container header_size " + std::to_string(header_size) + " is below " +
                               std::to_string(k_container_header_min));
    }
    if (header_size > room) in.fail(start + 6, "container header_size runs past the end of the file");
    const std::uint64_t payload = in.u64(start + 8);
    if (payload > room - header_size) {
        in.fail(start + 8, "container payload of " + std::to_string(payload) +
                               " bytes runs past the end of the file (" + std::to_string(room - header_size) +
                               " bytes left)");
    }
    const std::size_t end = start + header_size + static_cast<std::size_t>(payload);
    for (std::size_t pos = start + header_size; pos < end;) pos = parse_entry(in, pos, end, index, out);
    return end;
}

}  // namespace

Fatbin parse_fatbin(const std::uint8_t* data, std::size_t size, const std::string& source) {
    const Bytes in(data, size, source, "fatbin");
    Fatbin result;
    // At least one container: an empty file is not a fatbin.
    std::size_t pos = 0;
    do {
        pos = parse_container(in, pos, result.containers, result.entries);
        ++result.containers;
    } while (pos < size);
    return result;
}

}  // namespace kernhub::fatbin
