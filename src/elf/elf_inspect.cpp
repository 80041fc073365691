// Walks an ELF file the way the dynamic loader does: identification, then
// the program headers to find the dynamic segment, whose entries name the
// string table, the needed libraries and the version requirements. Reading
// DT_VERNEED rather than the .gnu.version_r section header means the check
// sees what ld.so will enforce even when section headers are stripped or
// disagree. Section headers are read only for .dynsym, which ld.so never
// needs but `kernhub inspect` shows.
#include "elf/elf_inspect.hpp"

#include <elf.h>

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string_view>
#include <unordered_set>

#include "digest/digest.hpp"
#include "elf/byte_reader.hpp"
#include "elf/elf_header.hpp"
#include "elf/elf_layout.hpp"
#include "elf/elf_walk.hpp"

namespace kernhub::elf {

using detail::ByteReader;
using detail::Layout;
using detail::Range;

using detail::HeaderTables;
using detail::ProgramView;
using detail::Segment;

// Bounds on what one file's dynamic facts may hold: libraries it needs, the
// length of a library's file name (NAME_MAX) and of a version name worth
// reading, and the exported function names listed, each at most
// k_max_symbol_name bytes (longer ones are no C entry points) and together
// at most k_max_symbol_bytes.
constexpr std::size_t k_max_needed = 1024;
constexpr std::size_t k_max_file_name = 255;
constexpr std::size_t k_max_version_name = 64;
constexpr std::size_t k_max_symbol_bytes = 64u << 20;

namespace detail {

// Class, byte order and the header fields every class keeps in the same
// place; everything after depends on the first two.
void read_identification(ByteReader& reader, const std::uint8_t* data, std::size_t size, ElfFacts& facts) {
    const HeaderParse parse = parse_elf_header(data, size);
    if (!parse.header) reader.fail(parse.problem, parse.offset);
    const ElfHeaderFacts& header = *parse.header;
    facts.elf_class = header.elf_class == ELFCLASS64 ? 64 : 32;
    facts.little_endian = header.little_endian;
    facts.os_abi = header.os_abi;
    facts.type = type_name(header.type);
    facts.machine = header.machine;
    facts.machine_name = machine_name(header.machine);
    reader.set_little_endian(facts.little_endian);
}

// A table of `count` records of `entsize` bytes, checked to lie in the file.
// The count is untrusted, so it is compared by division before multiplying.
Range table_range(const ByteReader& reader, std::uint64_t offset, std::uint64_t count, std::uint64_t entsize,
                  std::size_t expected_entsize, const char* what) {
    if (count == 0) return Range{};
    if (entsize != expected_entsize) {
        reader.fail(std::string(what) + " entry size " + std::to_string(entsize) + " is not the expected " +
                        std::to_string(expected_entsize),
                    offset);
    }
    if (count > reader.size() / entsize) {
        reader.fail(std::string(what) + " of " + std::to_string(count) + " entries is larger than the file", offset);
    }
    return reader.range(offset, count * entsize, what);
}

// With 0xffff or more sections (or PN_XNUM program headers) the real counts
// live in section header 0 (ELF gABI "extended section numbering").
static void resolve_extended_counts(const ByteReader& reader, const Layout& layout, HeaderTables& tables) {
    const bool sections_extended = tables.shnum == 0 && tables.shoff != 0;
    const bool segments_extended = tables.phnum == PN_XNUM;
    if (!sections_extended && !segments_extended) return;
    if (tables.shoff == 0) reader.fail("PN_XNUM program header count without section header 0", 0);
    table_range(reader, tables.shoff, 1, tables.shentsize, layout.shdr_size, "section header 0");
    if (sections_extended) tables.shnum = reader.field(tables.shoff, layout.sh_size, "extended section count");
    if (segments_extended) tables.phnum = reader.field(tables.shoff, layout.sh_info, "extended segment count");
}

HeaderTables read_header(const ByteReader& reader, const Layout& layout) {
    reader.range(0, layout.ehdr_size, "the ELF header");
    HeaderTables tables;
    tables.phoff = reader.field(0, layout.e_phoff, "e_phoff");
    tables.phentsize = reader.field(0, layout.e_phentsize, "e_phentsize");
    tables.phnum = reader.field(0, layout.e_phnum, "e_phnum");
    tables.shoff = reader.field(0, layout.e_shoff, "e_shoff");
    tables.shentsize = reader.field(0, layout.e_shentsize, "e_shentsize");
    tables.shnum = reader.field(0, layout.e_shnum, "e_shnum");
    resolve_extended_counts(reader, layout, tables);
    return tables;
}

// Keeps PT_LOAD (to map addresses to file offsets) and PT_DYNAMIC; both must
// have their file bytes inside the file.
ProgramView read_program_headers(const ByteReader& reader, const Layout& layout, const HeaderTables& tables) {
    const Range table =
        table_range(reader, tables.phoff, tables.phnum, tables.phentsize, layout.phdr_size, "program header table");
    ProgramView view;
    for (std::uint64_t at = table.offset; at < table.end(); at += layout.phdr_size) {
        const std::uint64_t type = reader.field(at, layout.p_type, "p_type");
        if (type != PT_LOAD && type != PT_DYNAMIC) continue;
        const std::uint64_t offset = reader.field(at, layout.p_offset, "p_offset");
        const std::uint64_t filesz = reader.field(at, layout.p_filesz, "p_filesz");
        const Range bytes = reader.range(offset, filesz, type == PT_LOAD ? "PT_LOAD segment" : "PT_DYNAMIC segment");
        if (type == PT_LOAD) {
            view.loads.push_back(Segment{reader.field(at, layout.p_vaddr, "p_vaddr"), offset, filesz});
        } else if (!view.dynamic) {
            view.dynamic = bytes;
        }
    }
    return view;
}

// The file bytes behind a virtual address, up to the end of the file part
// of the PT_LOAD segment that contains it.
Range mapped_range(const ByteReader& reader, const ProgramView& view, std::uint64_t address, const char* what) {
    for (const Segment& segment : view.loads) {
        // Subtraction first: vaddr + filesz may overflow for a hostile header.
        if (address >= segment.vaddr && address - segment.vaddr < segment.filesz) {
            const std::uint64_t delta = address - segment.vaddr;
            return Range{segment.offset + delta, segment.filesz - delta};
        }
    }
    reader.fail(std::string(what) + " address " + digest::to_hex_literal(address) + " is in no loaded segment", 0);
}

Range section_range(const ByteReader& reader, const Layout& layout, std::uint64_t header, const char* what) {
    return reader.range(reader.field(header, layout.sh_offset, "sh_offset"),
                        reader.field(header, layout.sh_size, "sh_size"), what);
}

}  // namespace detail

namespace {

using detail::mapped_range;
using detail::section_range;
using detail::table_range;

// What the dynamic segment points at; addresses are virtual, not offsets.
struct DynamicRefs {
    std::vector<std::uint64_t> needed;
    std::optional<std::uint64_t> soname, strtab, strsz, verneed;
};

DynamicRefs read_dynamic_entries(const ByteReader& reader, const Layout& layout, const Range& dynamic) {
    DynamicRefs refs;
    const std::uint64_t end = dynamic.end() - dynamic.size % layout.dyn_size;
    for (std::uint64_t at = dynamic.offset; at < end; at += layout.dyn_size) {
        const std::uint64_t tag = reader.field(at, layout.d_tag, "d_tag");
        const std::uint64_t value = reader.field(at, layout.d_val, "d_val");
        if (tag == DT_NULL) break;
        switch (tag) {
            case DT_NEEDED:
                if (refs.needed.size() == k_max_needed) {
                    reader.fail("the dynamic segment names more than k_max_needed (" + std::to_string(k_max_needed) +
                                    ") libraries",
                                at);
                }
                refs.needed.push_back(value);
                break;
            case DT_SONAME:
                refs.soname = value;
                break;
            case DT_STRTAB:
                refs.strtab = value;
                break;
            case DT_STRSZ:
                refs.strsz = value;
                break;
            case DT_VERNEED:
                refs.verneed = value;
                break;
            default:
                break;
        }
    }
    return refs;
}

bool is_glibc_version(std::string_view name) {
    constexpr std::string_view prefix = "GLIBC_";
    return name.size() > prefix.size() && name.substr(0, prefix.size()) == prefix && name[prefix.size()] >= '0' &&
           name[prefix.size()] <= '9';
}

// Each link must move forward by at least one record (the gABI lays them
// out back to back), so the walk cannot revisit a record; the step budget
// is a second guard that needs no such reasoning.
std::uint64_t next_record(const ByteReader& reader, const Range& region, std::uint64_t at, std::uint64_t step,
                          std::size_t record_size, std::uint64_t& budget, const char* what) {
    if (step < record_size) reader.fail(std::string(what) + " chain overlaps itself", at);
    if (budget == 0) reader.fail(std::string(what) + " chain is longer than its segment (a loop)", at);
    --budget;
    if (step > region.end() - at) reader.fail(std::string(what) + " chain leaves its segment", at);
    return at + step;
}

void check_record(const ByteReader& reader, const Range& region, std::uint64_t at, std::size_t size, const char* what) {
    if (at < region.offset || at > region.end() || region.end() - at < size) {
        reader.fail(std::string(what) + " lies outside its segment", at);
    }
}

// Follows vn_aux/vna_next until a zero link, as ld.so does (it ignores
// vn_cnt), so the check sees exactly the nodes the loader will demand.
void read_version_needs(const ByteReader& reader, const Range& region, const Range& strings, ElfFacts& facts) {
    std::uint64_t budget = region.size / detail::k_verneed_size;
    std::unordered_set<std::string_view> versions;
    for (std::uint64_t need = region.offset;;) {
        check_record(reader, region, need, detail::k_verneed_size, "version-needed entry");
        if (!reader.bounded_string_at(strings, reader.field(need, detail::k_vn_file, "vn_file"), k_max_file_name,
                                      "vn_file")) {
            reader.fail("vn_file: a library name longer than NAME_MAX (" + std::to_string(k_max_file_name) + " bytes)",
                        need);
        }
        const std::uint64_t aux_step = reader.field(need, detail::k_vn_aux, "vn_aux");
        if (aux_step > region.end() - need) reader.fail("vn_aux leaves its segment", need);
        for (std::uint64_t aux = need + aux_step;;) {
            check_record(reader, region, aux, detail::k_vernaux_size, "version-needed auxiliary entry");
            // A name longer than any GLIBC_X.Y.Z is no version this check lists.
            const std::optional<std::string_view> name = reader.bounded_string_at(
                strings, reader.field(aux, detail::k_vna_name, "vna_name"), k_max_version_name, "vna_name");
            if (name && is_glibc_version(*name) && versions.emplace(*name).second) {
                facts.glibc_versions.emplace_back(*name);
            }
            const std::uint64_t step = reader.field(aux, detail::k_vna_next, "vna_next");
            if (step == 0) break;
            aux = next_record(reader, region, aux, step, detail::k_vernaux_size, budget, "vna_next");
        }
        const std::uint64_t step = reader.field(need, detail::k_vn_next, "vn_next");
        if (step == 0) break;
        need = next_record(reader, region, need, step, detail::k_verneed_size, budget, "vn_next");
    }
}

void read_dynamic(const ByteReader& reader, const Layout& layout, const ProgramView& view, ElfFacts& facts) {
    if (!view.dynamic) return;
    const DynamicRefs refs = read_dynamic_entries(reader, layout, *view.dynamic);
    const bool uses_strings = !refs.needed.empty() || refs.soname || refs.verneed;
    if (!uses_strings) return;
    if (!refs.strtab) reader.fail("the dynamic segment names strings but has no DT_STRTAB", view.dynamic->offset);
    Range strings = mapped_range(reader, view, *refs.strtab, "DT_STRTAB");
    if (refs.strsz) strings = reader.range(strings.offset, *refs.strsz, "DT_STRTAB string table");
    for (std::uint64_t index : refs.needed) facts.needed.push_back(reader.string_at(strings, index, "DT_NEEDED"));
    if (refs.soname) facts.soname = reader.string_at(strings, *refs.soname, "DT_SONAME");
    if (refs.verneed) {
        read_version_needs(reader, mapped_range(reader, view, *refs.verneed, "DT_VERNEED"), strings, facts);
    }
}

bool is_exported_function(std::uint64_t info, std::uint64_t other, std::uint64_t shndx) {
    const auto bind = ELF64_ST_BIND(info);
    const auto type = ELF64_ST_TYPE(info);
    const auto visibility = ELF64_ST_VISIBILITY(other);
    const bool global = bind == STB_GLOBAL || bind == STB_WEAK || bind == STB_GNU_UNIQUE;
    const bool function = type == STT_FUNC || type == STT_GNU_IFUNC;
    const bool visible = visibility == STV_DEFAULT || visibility == STV_PROTECTED;
    return global && function && visible && shndx != SHN_UNDEF;
}

void read_dynsym(const ByteReader& reader, const Layout& layout, const Range& sections, std::uint64_t header,
                 ElfFacts& facts) {
    const std::uint64_t link = reader.field(header, layout.sh_link, "sh_link");
    if (link >= sections.size / layout.shdr_size) reader.fail(".dynsym sh_link names no section", header);
    const Range strings = section_range(reader, layout, sections.offset + link * layout.shdr_size, ".dynstr");
    const Range symbols = section_range(reader, layout, header, ".dynsym");
    const std::uint64_t entsize = reader.field(header, layout.sh_entsize, "sh_entsize");
    if (entsize != layout.sym_size) reader.fail(".dynsym entry size " + std::to_string(entsize) + " is wrong", header);
    const std::uint64_t end = symbols.end() - symbols.size % layout.sym_size;
    // Many symbols may name one string (or overlapping ones): each offset
    // is read once, a name over k_max_symbol_name is left out, and the
    // names kept are bounded in bytes.
    std::unordered_set<std::uint64_t> offsets;
    std::size_t kept = 0;
    // Symbol 0 is the reserved undefined symbol.
    for (std::uint64_t at = symbols.offset + layout.sym_size; at < end; at += layout.sym_size) {
        const std::uint64_t info = reader.field(at, layout.st_info, "st_info");
        const std::uint64_t other = reader.field(at, layout.st_other, "st_other");
        const std::uint64_t shndx = reader.field(at, layout.st_shndx, "st_shndx");
        if (!is_exported_function(info, other, shndx)) continue;
        const std::uint64_t offset = reader.field(at, layout.st_name, "st_name");
        if (!offsets.insert(offset).second) continue;
        const std::optional<std::string_view> name =
            reader.bounded_string_at(strings, offset, detail::k_max_symbol_name, "st_name");
        if (!name || name->empty()) continue;
        kept += name->size();
        if (kept > k_max_symbol_bytes) {
            reader.fail(".dynsym names more than k_max_symbol_bytes (" + std::to_string(k_max_symbol_bytes) +
                            ") bytes of exported functions",
                        at);
        }
        facts.exported_functions.emplace_back(*name);
    }
}

void read_exports(const ByteReader& reader, const Layout& layout, const HeaderTables& tables, ElfFacts& facts) {
    const Range sections =
        table_range(reader, tables.shoff, tables.shnum, tables.shentsize, layout.shdr_size, "section header table");
    for (std::uint64_t at = sections.offset; at < sections.end(); at += layout.shdr_size) {
        if (reader.field(at, layout.sh_type, "sh_type") == SHT_DYNSYM) {
            read_dynsym(reader, layout, sections, at, facts);
            break;
        }
    }
}

void sort_unique(std::vector<std::string>& names, bool (*less)(const std::string&, const std::string&)) {
    std::sort(names.begin(), names.end(), less);
    names.erase(std::unique(names.begin(), names.end()), names.end());
}

}  // namespace

ElfFacts inspect_elf(const std::uint8_t* data, std::size_t size, const std::string& source) {
    ByteReader reader(data, size, source);
    ElfFacts facts;
    read_identification(reader, data, size, facts);
    const Layout& layout = facts.elf_class == 64 ? detail::k_elf64 : detail::k_elf32;
    const HeaderTables tables = read_header(reader, layout);
    read_dynamic(reader, layout, read_program_headers(reader, layout, tables), facts);
    read_exports(reader, layout, tables, facts);
    sort_unique(facts.glibc_versions,
                [](const std::string& a, const std::string& b) { return compare_glibc(a, b) < 0; });
    sort_unique(facts.exported_functions, [](const std::string& a, const std::string& b) { return a < b; });
    if (!facts.glibc_versions.empty()) facts.max_glibc = facts.glibc_versions.back();
    return facts;
}

}  // namespace kernhub::elf
