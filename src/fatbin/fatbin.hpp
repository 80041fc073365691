// Reading CUDA fatbins and cubins as plain bytes: which architectures a
// binary carries and which of its entries a given GPU would run. No CUDA
// header or library is involved, so a host without a GPU can still check a
// download and explain why a kernel cannot run on some device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kernhub::fatbin {

enum class EntryKind { ptx, sass };

// One image inside a fatbin. `arch` is the SM number as nvcc spells it:
// 90 for sm_90 / compute_90, 100 for sm_100, 121 for sm_121.
struct Entry {
    EntryKind kind = EntryKind::sass;
    int arch = 0;
    char variant = 0;  // 0, 'a' (arch-specific) or 'f' (family-specific)
    bool compressed = false;
    std::uint64_t size = 0;               // bytes of payload as stored
    std::uint64_t uncompressed_size = 0;  // 0 when not compressed / unknown
    std::uint64_t offset = 0;             // payload offset in the file
    std::size_t container = 0;            // index of the container holding it

    // "sm_90a", "compute_90", "sm_100f".
    std::string arch_name() const;
    // 90 -> 9.0, 121 -> 12.1, 100 -> 10.0: the last digit is the minor.
    int cc_major() const { return arch / 10; }
    int cc_minor() const { return arch % 10; }
};

struct Fatbin {
    std::size_t containers = 0;
    std::vector<Entry> entries;  // in file order
};

// Parses every container in [data, data + size). Throws Error(verification)
// naming `source` and the byte offset for anything malformed: bad magic or
// version, truncated container or entry header, header sizes too small,
// sizes running past the end, unknown entry kinds. Never reads outside the
// buffer and never allocates in proportion to a size claimed by the input.
// LTO-IR entries (kind 8) are skipped: no driver loads them, but they may
// sit next to SASS that does run.
Fatbin parse_fatbin(const std::uint8_t* data, std::size_t size, const std::string& source);

// cubin = ELF with e_machine 190 (EM_CUDA); elf = any other ELF file.
enum class Format { fatbin, cubin, elf, unknown };
Format detect_format(const std::uint8_t* data, std::size_t size);

// A cubin as a one-entry Fatbin (kind sass, arch from the ELF e_flags).
// The 'a' / 'f' variant is not recorded in a cubin, so variant is always 0.
// Throws Error(verification) naming `source` when the bytes are not a
// 64-bit little-endian CUDA ELF file.
Fatbin parse_cubin(const std::uint8_t* data, std::size_t size, const std::string& source);

// Which entry runs on compute capability major.minor; nullopt when none.
// Pure: it looks at the entries only, not at a driver. Rules:
//   SASS sm_AB   runs when A == major and B <= minor ('f' the same);
//   SASS sm_ABa  runs only on exactly A.B;
//   PTX  compute_AB  JIT-compiles on any major.minor >= A.B;
//   PTX  compute_ABa only on exactly A.B; compute_ABf within family A, B <= minor.
// Preference: SASS over PTX; among SASS the exact 'a' build, then the highest
// B (on a tie 'f' before plain); among PTX the highest A.B (on a tie 'a',
// then 'f', then plain). Equal entries: the first in file order.
std::optional<Entry> select_entry(const Fatbin& fatbin, int major, int minor);

// "sm_80, sm_90a, compute_90": each architecture once, in file order, for
// messages; "none" when there are no entries.
std::string describe_archs(const Fatbin& fatbin);

}  // namespace kernhub::fatbin
