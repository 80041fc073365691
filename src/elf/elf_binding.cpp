// The relocations a shared object asks the dynamic loader to resolve, and
// whether they wait for a first call (docs/kernels.md, "Torch ops":
// an op library's Python module init may stay unbound, a Python data
// reference may not).
#include "elf/elf_binding.hpp"

#include <elf.h>

#include <algorithm>
#include <map>
#include <optional>
#include <string_view>
#include <unordered_map>

#include "elf/elf_walk.hpp"

namespace kernhub::elf {

using detail::ByteReader;
using detail::Layout;
using detail::ProgramView;
using detail::Range;

namespace {

// The dynamic entries the relocation walk needs; addresses are virtual.
struct RelocationRefs {
    std::optional<std::uint64_t> rela, rela_size, rel, rel_size, jmprel, jmprel_size, pltrel;
    std::optional<std::uint64_t> symtab, strtab, strsz;
    std::uint64_t flags = 0, flags_1 = 0;
    bool bind_now = false;
};

RelocationRefs read_relocation_refs(const ByteReader& reader, const Layout& layout, const Range& dynamic) {
    RelocationRefs refs;
    const std::map<std::uint64_t, std::optional<std::uint64_t>*> slots = {
        {DT_RELA, &refs.rela},      {DT_RELASZ, &refs.rela_size}, {DT_REL, &refs.rel},
        {DT_RELSZ, &refs.rel_size}, {DT_JMPREL, &refs.jmprel},    {DT_PLTRELSZ, &refs.jmprel_size},
        {DT_PLTREL, &refs.pltrel},  {DT_SYMTAB, &refs.symtab},    {DT_STRTAB, &refs.strtab},
        {DT_STRSZ, &refs.strsz}};
    const std::uint64_t end = dynamic.end() - dynamic.size % layout.dyn_size;
    for (std::uint64_t at = dynamic.offset; at < end; at += layout.dyn_size) {
        const std::uint64_t tag = reader.field(at, layout.d_tag, "d_tag");
        const std::uint64_t value = reader.field(at, layout.d_val, "d_val");
        if (tag == DT_NULL) break;
        if (auto slot = slots.find(tag); slot != slots.end()) {
            *slot->second = value;
        } else if (tag == DT_FLAGS) {
            refs.flags = value;
        } else if (tag == DT_FLAGS_1) {
            refs.flags_1 = value;
        } else if (tag == DT_BIND_NOW) {
            refs.bind_now = true;
        }
    }
    return refs;
}

// The PLT slot relocation of a machine, bound lazily; 0 when unknown.
std::uint32_t plt_slot_type(int machine) {
    switch (machine) {
        case EM_X86_64:
            return R_X86_64_JUMP_SLOT;
        case EM_AARCH64:
            return R_AARCH64_JUMP_SLOT;
        case EM_386:
            return R_386_JMP_SLOT;
        case EM_PPC64:
            return R_PPC64_JMP_SLOT;
        case EM_RISCV:
            return R_RISCV_JUMP_SLOT;
        case EM_S390:
            return R_390_JMP_SLOT;
        case EM_ARM:
            return R_ARM_JUMP_SLOT;
        default:
            return 0;
    }
}

// Reads one relocation table and records the undefined symbols it refers to.
class RelocationWalk {
public:
    RelocationWalk(const ByteReader& reader, const ProgramView& view, const RelocationRefs& refs, int elf_class,
                   int machine)
        : m_reader(reader),
          m_view(view),
          m_layout(elf_class == 64 ? detail::k_elf64 : detail::k_elf32),
          m_wide(elf_class == 64),
          m_plt_slot(plt_slot_type(machine)) {
        if (refs.symtab) m_symbols = detail::mapped_range(reader, view, *refs.symtab, "DT_SYMTAB");
        if (refs.strtab) {
            m_strings = detail::mapped_range(reader, view, *refs.strtab, "DT_STRTAB");
            if (refs.strsz) m_strings = reader.range(m_strings.offset, *refs.strsz, "DT_STRTAB string table");
        }
    }

    // A table of `size` bytes at `address`; `addend`: Rela entries, else Rel.
    void table(std::uint64_t address, std::uint64_t size, bool addend, bool plt, const char* what) {
        if (size == 0) return;
        const std::size_t width = m_wide ? 8 : 4;
        const std::size_t entry = width * (addend ? 3U : 2U);
        const Range mapped = detail::mapped_range(m_reader, m_view, address, what);
        const Range bytes = m_reader.range(mapped.offset, std::min(size, mapped.size), what);
        for (std::uint64_t at = bytes.offset; bytes.end() - at >= entry; at += entry) {
            const std::uint64_t info = m_reader.read(at + width, width, "r_info");
            const std::uint64_t symbol = m_wide ? info >> 32 : info >> 8;
            const auto type = static_cast<std::uint32_t>(m_wide ? info & 0xffffffffU : info & 0xffU);
            if (symbol != 0) record(symbol, type, !(plt && (m_plt_slot == 0 || type == m_plt_slot)), at);
        }
    }

    std::vector<UndefinedReference> result() const {
        std::vector<UndefinedReference> list;
        for (const auto& [name, reference] : m_found) list.push_back(reference);
        return list;
    }

private:
    // Many relocations name one symbol: each symbol is read once, and a
    // name over k_max_symbol_name (no Python or C function has one) is
    // left out, so the walk is linear in the tables.
    void record(std::uint64_t index, std::uint32_t type, bool eager, std::uint64_t where) {
        if (m_symbols.size == 0 || index >= m_symbols.size / m_layout.sym_size) {
            m_reader.fail("a relocation names symbol " + std::to_string(index) + " outside DT_SYMTAB's segment", where);
        }
        auto [seen, first] = m_by_index.emplace(index, nullptr);
        if (first) seen->second = read_symbol(index, type, eager);
        UndefinedReference* found = seen->second;
        if (found != nullptr && eager && !found->eager) {
            found->eager = true;
            found->type = type;
        }
    }

    // The undefined, non-weak symbol `index` in m_found; null for any other.
    UndefinedReference* read_symbol(std::uint64_t index, std::uint32_t type, bool eager) {
        const std::uint64_t at = m_symbols.offset + index * m_layout.sym_size;
        const std::uint64_t info = m_reader.field(at, m_layout.st_info, "st_info");
        if (m_reader.field(at, m_layout.st_shndx, "st_shndx") != SHN_UNDEF || ELF64_ST_BIND(info) == STB_WEAK) {
            return nullptr;
        }
        const std::optional<std::string_view> name = m_reader.bounded_string_at(
            m_strings, m_reader.field(at, m_layout.st_name, "st_name"), detail::k_max_symbol_name, "st_name");
        if (!name) return nullptr;
        // Two symbols may carry one name: the first entry holds both.
        auto [it, added] = m_found.emplace(std::string(*name), UndefinedReference{std::string(*name), eager, type});
        return &it->second;
    }

    const ByteReader& m_reader;
    const ProgramView& m_view;
    const Layout& m_layout;
    bool m_wide;
    std::uint32_t m_plt_slot;
    Range m_symbols, m_strings;
    std::map<std::string, UndefinedReference> m_found;
    std::unordered_map<std::uint64_t, UndefinedReference*> m_by_index;
};

std::string bind_now_flag(const RelocationRefs& refs) {
    if ((refs.flags_1 & DF_1_NOW) != 0) return "DF_1_NOW";
    if ((refs.flags & DF_BIND_NOW) != 0) return "DF_BIND_NOW";
    return refs.bind_now ? "DT_BIND_NOW" : "";
}

}  // namespace

BindingFacts inspect_binding(const std::uint8_t* data, std::size_t size, const std::string& source) {
    ByteReader reader(data, size, source);
    ElfFacts identity;
    detail::read_identification(reader, data, size, identity);
    const Layout& layout = identity.elf_class == 64 ? detail::k_elf64 : detail::k_elf32;
    const ProgramView view = detail::read_program_headers(reader, layout, detail::read_header(reader, layout));
    BindingFacts facts;
    facts.machine = identity.machine;
    if (!view.dynamic) return facts;
    const RelocationRefs refs = read_relocation_refs(reader, layout, *view.dynamic);
    facts.bind_now = bind_now_flag(refs);
    RelocationWalk walk(reader, view, refs, identity.elf_class, identity.machine);
    if (refs.rela) walk.table(*refs.rela, refs.rela_size.value_or(0), true, false, "DT_RELA");
    if (refs.rel) walk.table(*refs.rel, refs.rel_size.value_or(0), false, false, "DT_REL");
    if (refs.jmprel) {
        walk.table(*refs.jmprel, refs.jmprel_size.value_or(0), refs.pltrel.value_or(DT_RELA) == DT_RELA, true,
                   "DT_JMPREL");
    }
    facts.undefined = walk.result();
    return facts;
}

std::string relocation_name(int machine, std::uint32_t type) {
    struct Named {
        int machine;
        std::uint32_t type;
        const char* name;
    };
    static const Named names[] = {
        {EM_X86_64, R_X86_64_64, "R_X86_64_64"},
        {EM_X86_64, R_X86_64_GLOB_DAT, "R_X86_64_GLOB_DAT"},
        {EM_X86_64, R_X86_64_JUMP_SLOT, "R_X86_64_JUMP_SLOT"},
        {EM_X86_64, R_X86_64_COPY, "R_X86_64_COPY"},
        {EM_AARCH64, R_AARCH64_ABS64, "R_AARCH64_ABS64"},
        {EM_AARCH64, R_AARCH64_GLOB_DAT, "R_AARCH64_GLOB_DAT"},
        {EM_AARCH64, R_AARCH64_JUMP_SLOT, "R_AARCH64_JUMP_SLOT"},
    };
    for (const Named& named : names) {
        if (named.machine == machine && named.type == type) return named.name;
    }
    return "relocation type " + std::to_string(type);
}

namespace {

// The file ranges of the sections `wanted` picks (given a section header's
// offset, the range it names, or nothing), sorted, with overlapping ranges
// merged: a byte many headers point at is visited once.
std::vector<Range> section_ranges(
    const std::uint8_t* data, std::size_t size, const std::string& source,
    const std::function<std::optional<Range>(const ByteReader&, const Layout&, const Range& sections,
                                             std::uint64_t at)>& wanted) {
    ByteReader reader(data, size, source);
    ElfFacts identity;
    detail::read_identification(reader, data, size, identity);
    const Layout& layout = identity.elf_class == 64 ? detail::k_elf64 : detail::k_elf32;
    const detail::HeaderTables tables = detail::read_header(reader, layout);
    const Range sections = detail::table_range(reader, tables.shoff, tables.shnum, tables.shentsize, layout.shdr_size,
                                               "section header table");
    std::vector<Range> ranges;
    for (std::uint64_t at = sections.offset; at < sections.end(); at += layout.shdr_size) {
        if (std::optional<Range> range = wanted(reader, layout, sections, at); range && range->size > 0) {
            ranges.push_back(*range);
        }
    }
    std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) { return a.offset < b.offset; });
    std::vector<Range> merged;
    for (const Range& range : ranges) {
        if (!merged.empty() && range.offset < merged.back().end()) {
            merged.back().size = std::max(merged.back().end(), range.end()) - merged.back().offset;
        } else {
            merged.push_back(range);
        }
    }
    return merged;
}

void visit_ranges(const std::uint8_t* data, const std::vector<Range>& ranges,
                  const std::function<void(const std::uint8_t* bytes, std::size_t length)>& visit) {
    for (const Range& range : ranges) visit(data + range.offset, static_cast<std::size_t>(range.size));
}

}  // namespace

void for_each_read_only_section(const std::uint8_t* data, std::size_t size, const std::string& source,
                                const std::function<void(const std::uint8_t* bytes, std::size_t length)>& visit) {
    const auto read_only = [](const ByteReader& reader, const Layout& layout, const Range&,
                              std::uint64_t at) -> std::optional<Range> {
        const std::uint64_t flags = reader.field(at, layout.sh_flags, "sh_flags");
        if (reader.field(at, layout.sh_type, "sh_type") != SHT_PROGBITS || (flags & SHF_ALLOC) == 0 ||
            (flags & (SHF_WRITE | SHF_EXECINSTR)) != 0) {
            return std::nullopt;
        }
        return detail::section_range(reader, layout, at, "read-only section");
    };
    visit_ranges(data, section_ranges(data, size, source, read_only), visit);
}

void for_each_symbol_name_table(const std::uint8_t* data, std::size_t size, const std::string& source,
                                const std::function<void(const std::uint8_t* bytes, std::size_t length)>& visit) {
    const auto name_table = [](const ByteReader& reader, const Layout& layout, const Range& sections,
                               std::uint64_t at) -> std::optional<Range> {
        const std::uint64_t type = reader.field(at, layout.sh_type, "sh_type");
        if (type != SHT_SYMTAB && type != SHT_DYNSYM) return std::nullopt;
        const std::uint64_t link = reader.field(at, layout.sh_link, "sh_link");
        if (link >= sections.size / layout.shdr_size) reader.fail("a symbol table's sh_link names no section", at);
        const std::uint64_t strings = sections.offset + link * layout.shdr_size;
        if (reader.field(strings, layout.sh_type, "sh_type") != SHT_STRTAB) return std::nullopt;
        return detail::section_range(reader, layout, strings, "symbol name table");
    };
    visit_ranges(data, section_ranges(data, size, source, name_table), visit);
}

}  // namespace kernhub::elf
