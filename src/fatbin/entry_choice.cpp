// Choosing the entry a GPU of a given compute capability would run, and
// naming architectures for messages.
#include <algorithm>
#include <array>
#include <optional>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "fatbin/fatbin.hpp"

namespace kernhub::fatbin {

namespace {

// Whether the driver could run (SASS) or JIT-compile (PTX) the entry on
// major.minor. 'a' code uses features of exactly one chip; 'f' code those
// shared by a family (same major, later minors included); plain SASS is
// binary compatible within a major; plain PTX compiles forward.
bool runs_on(const Entry& entry, int major, int minor) {
    const int entry_major = entry.cc_major();
    const int entry_minor = entry.cc_minor();
    if (entry.variant == 'a') return entry_major == major && entry_minor == minor;
    if (entry.kind == EntryKind::sass || entry.variant == 'f') return entry_major == major && entry_minor <= minor;
    return major > entry_major || (major == entry_major && minor >= entry_minor);
}

// Higher is better, compared lexicographically. Only entries that run are
// ranked, so for SASS the arch decides by its minor and an 'a' entry is
// always the exact chip.
std::array<int, 4> rank(const Entry& entry) {
    const int variant_rank = entry.variant == 'a' ? 2 : entry.variant == 'f' ? 1 : 0;
    if (entry.kind == EntryKind::sass) {
        return {1, entry.variant == 'a' ? 1 : 0, entry.cc_minor(), variant_rank};
    }
    return {0, 0, entry.arch, variant_rank};
}

}  // namespace

std::string Entry::arch_name() const {
    std::string name = (kind == EntryKind::sass ? "sm_" : "compute_") + std::to_string(arch);
    if (variant != 0) name += variant;
    return name;
}

std::optional<Entry> select_entry(const Fatbin& fatbin, int major, int minor) {
    const Entry* best = nullptr;
    for (const Entry& entry : fatbin.entries) {
        if (!runs_on(entry, major, minor)) continue;
        // Strictly better only, so equal entries resolve to the first in file order.
        if (best == nullptr || rank(entry) > rank(*best)) best = &entry;
    }
    if (best == nullptr) return std::nullopt;
    return *best;
}

std::string describe_archs(const Fatbin& fatbin) {
    std::vector<std::string> names;
    std::unordered_set<std::string> seen;
    for (const Entry& entry : fatbin.entries) {
        std::string name = entry.arch_name();
        if (seen.insert(name).second) names.push_back(std::move(name));
    }
    if (names.empty()) return "none";
    std::string out;
    for (const std::string& name : names) {
        if (!out.empty()) out += ", ";
        out += name;
    }
    return out;
}

}  // namespace kernhub::fatbin
