// Op names and namespaces from a torch extension library's bytes.
#include "loader/torch_ops.hpp"

#include <algorithm>
#include <cstring>
#include <string_view>
#include <unordered_set>

#include "elf/elf_binding.hpp"
#include "kernhub/error.hpp"

namespace kernhub::loader {

namespace {

// Bytes scanned between two looks at the cancel flag.
constexpr std::size_t k_cancel_stride = 1u << 20;

bool is_identifier_char(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// What may follow a schema's "(": an argument type followed by what
// follows a type in a schema (a space before the name, "?", "[]" or an
// alias annotation "(a!)", "." in a class path), "*, " before keyword-only arguments, or ") ->"
// for none. A type name alone or in other text ("Double", "SymFloat(...)"
// in a message) does not count.
bool starts_arguments(const char* at, std::size_t left) {
    static const char* const types[] = {"Tensor",  "int",     "float",      "bool",   "str",          "Scalar",
                                        "SymInt",  "Device",  "ScalarType", "Layout", "MemoryFormat", "Generator",
                                        "Storage", "Dimname", "Stream",     "Any",    "complex",      "__torch__"};
    const auto starts_with = [&](const char* word) {
        const std::size_t length = std::strlen(word);
        return left >= length && std::memcmp(at, word, length) == 0;
    };
    if (starts_with("*, ") || starts_with(") ->")) return true;
    return std::any_of(std::begin(types), std::end(types), [&](const char* type) {
        const std::size_t length = std::strlen(type);
        return left > length && std::memcmp(at, type, length) == 0 && std::strchr(" ?[(.", at[length]) != nullptr &&
               at[length] != 0;
    });
}

// The op a whole schema names: "[ns::]name[.overload](...) -> ...".
std::string schema_op(std::string_view text) {
    const std::size_t open = text.find('(');
    if (open == std::string_view::npos || text.find(") ->") == std::string_view::npos ||
        !starts_arguments(text.data() + open + 1, text.size() - open - 1)) {
        return {};
    }
    std::string_view name = text.substr(0, open);
    if (const std::size_t colons = name.rfind("::"); colons != std::string_view::npos) name = name.substr(colons + 2);
    return is_op_name(std::string(name)) ? std::string(name) : std::string();
}

// A hash of a byte run that grows to the left in one step per byte, so the
// suffixes of a run before "(" are looked up without copying any of them.
constexpr std::uint64_t k_hash_base = 1099511628211ULL;

std::uint64_t suffix_hash(std::string_view text) {
    std::uint64_t hash = 0, power = 1;
    for (std::size_t i = text.size(); i-- > 0;) {
        hash += static_cast<unsigned char>(text[i]) * power;
        power *= k_hash_base;
    }
    return hash ^ (text.size() << 56);
}

class Collector {
public:
    Collector(const std::string& source, const std::atomic<bool>* cancel) : m_source(source), m_cancel(cancel) {}

    // The NUL-terminated strings of a block, whole.
    void add_strings(const std::uint8_t* bytes, std::size_t length) {
        std::size_t start = 0;
        for (std::size_t at = 0; at < length; ++at) {
            if (at % k_cancel_stride == 0) check_cancel();
            if (bytes[at] != 0) continue;
            if (at > start) add_string(std::string_view(reinterpret_cast<const char*>(bytes + start), at - start));
            start = at + 1;
        }
    }

    // Schema heads inside a block: "name(" then argument text, where some
    // suffix of the identifier run before "(" is a name string of its own
    // (pieces of several literals may abut with no byte between them); the
    // longest such suffix counts. Needs every name string first.
    void add_heads(const std::uint8_t* bytes, std::size_t length) {
        if (m_hashes.empty()) {
            for (const std::string& name : m_listing.names) m_hashes.insert(suffix_hash(name));
        }
        const char* text = reinterpret_cast<const char*>(bytes);
        for (std::size_t at = 1; at < length; ++at) {
            if (at % k_cancel_stride == 0) check_cancel();
            if (bytes[at] != '(' || !starts_arguments(text + at + 1, length - at - 1)) continue;
            // The suffix lengths whose hash is a name's, then the longest
            // that really is one: one lookup a head, however many hit.
            std::uint64_t hash = 0, power = 1;
            std::size_t hits[k_max_op_name];
            std::size_t count = 0;
            for (std::size_t from = at; from > 0 && at - from < k_max_op_name;) {
                const auto c = static_cast<unsigned char>(text[--from]);
                if (!is_identifier_char(c) && c != '.') break;
                hash += c * power;
                power *= k_hash_base;
                if (m_hashes.count(hash ^ ((at - from) << 56)) != 0) hits[count++] = at - from;
            }
            while (count > 0) {
                const std::size_t run = hits[--count];
                const std::string_view name(text + at - run, run);
                if (m_listing.names.find(name) != m_listing.names.end()) {
                    add_op(std::string(name));
                    break;
                }
            }
        }
    }

    // TORCH_LIBRARY(ns, m) defines the function TORCH_LIBRARY_init_<ns> and
    // the object TORCH_LIBRARY_static_init_<ns>, STABLE_TORCH_LIBRARY the
    // same with STABLE_ in front; both are static, so the C++ names carry
    // their length ("_ZL40TORCH_LIBRARY_init__x"), which bounds <ns>.
    void add_defined_namespaces(const std::uint8_t* bytes, std::size_t length) {
        const std::string_view table(reinterpret_cast<const char*>(bytes), length);
        for (const std::string_view marker :
             {std::string_view("TORCH_LIBRARY_init_"), std::string_view("TORCH_LIBRARY_static_init_")}) {
            for (std::size_t hit = table.find(marker); hit != std::string_view::npos;
                 hit = table.find(marker, hit + 1)) {
                check_cancel();
                add_defined_namespace(table, hit, marker.size());
            }
        }
    }

    TorchOpListing take() {
        m_listing.ops.assign(m_ops.begin(), m_ops.end());
        m_listing.schemas.assign(m_schemas.begin(), m_schemas.end());
        return std::move(m_listing);
    }

private:
    void add_string(std::string_view text) {
        if (text.size() <= k_max_schema_length) {
            if (std::string op = schema_op(text); !op.empty()) {
                add_op(std::move(op));
                if (m_schemas.emplace(text).second && m_schemas.size() > k_max_torch_ops) too_many();
                return;
            }
        }
        if (text.size() > k_max_op_name || !is_op_name(std::string(text))) return;
        if (m_listing.names.size() >= k_max_torch_names) {
            if (m_listing.names.count(std::string(text)) == 0) m_listing.names_complete = false;
            return;
        }
        m_listing.names.emplace(text);
    }

    void add_op(std::string op) {
        if (m_ops.insert(std::move(op)).second && m_ops.size() > k_max_torch_ops) too_many();
    }

    [[noreturn]] void too_many() const {
        throw Error(ErrorCode::verification, m_source + " names more than k_max_torch_ops (" +
                                                 std::to_string(k_max_torch_ops) +
                                                 ") torch ops or schemas; it is not an op library kernhub reads");
    }

    void add_defined_namespace(std::string_view table, std::size_t hit, std::size_t marker) {
        const std::string_view stable = "STABLE_";
        std::size_t start = hit;
        if (start >= stable.size() && table.substr(start - stable.size(), stable.size()) == stable) {
            start -= stable.size();
        }
        std::size_t digits = start, mangled = 0;
        while (digits > 0 && start - digits < 4 && table[digits - 1] >= '0' && table[digits - 1] <= '9') --digits;
        for (std::size_t i = digits; i < start; ++i) mangled = mangled * 10 + static_cast<std::size_t>(table[i] - '0');
        const std::size_t begin = hit + marker;
        const std::size_t prefix = begin - start;
        std::size_t end = begin;
        if (digits < start) {
            if (mangled <= prefix || mangled - prefix > k_max_op_name || mangled - prefix > table.size() - begin)
                return;
            end = begin + (mangled - prefix);
        } else {
            while (end < table.size() && end - begin < k_max_op_name &&
                   is_identifier_char(static_cast<unsigned char>(table[end]))) {
                ++end;
            }
        }
        const std::string_view name = table.substr(begin, end - begin);
        if (!is_identifier(name) || !m_listing.defined_namespaces.emplace(name).second) return;
        if (m_listing.defined_namespaces.size() > k_max_torch_namespaces) {
            throw Error(ErrorCode::verification, m_source + " names more than k_max_torch_namespaces (" +
                                                     std::to_string(k_max_torch_namespaces) +
                                                     ") torch op namespaces in its symbols; it is not an op library "
                                                     "kernhub reads");
        }
    }

    void check_cancel() const {
        if (m_cancel != nullptr && m_cancel->load()) {
            throw Error(ErrorCode::interrupted, "reading the torch ops of " + m_source + " was interrupted");
        }
    }

    const std::string& m_source;
    const std::atomic<bool>* m_cancel;
    TorchOpListing m_listing;
    std::set<std::string> m_ops, m_schemas;
    std::unordered_set<std::uint64_t> m_hashes;
};

}  // namespace

bool is_identifier(std::string_view text) {
    if (text.empty() || (text[0] >= '0' && text[0] <= '9')) return false;
    return std::all_of(text.begin(), text.end(),
                       [](char c) { return is_identifier_char(static_cast<unsigned char>(c)); });
}

bool is_op_name(const std::string& op) {
    if (op.size() > k_max_op_name) return false;
    const std::size_t dot = op.find('.');
    if (dot == std::string::npos) return is_identifier(op);
    return is_identifier(std::string_view(op).substr(0, dot)) && is_identifier(std::string_view(op).substr(dot + 1));
}

TorchOpListing list_torch_ops(const std::uint8_t* data, std::size_t size, const std::string& source,
                              const std::atomic<bool>* cancel) {
    Collector collector(source, cancel);
    std::vector<std::pair<const std::uint8_t*, std::size_t>> blocks;
    elf::for_each_read_only_section(data, size, source, [&](const std::uint8_t* bytes, std::size_t length) {
        blocks.emplace_back(bytes, length);
        collector.add_strings(bytes, length);
    });
    for (const auto& [bytes, length] : blocks) collector.add_heads(bytes, length);
    elf::for_each_symbol_name_table(data, size, source, [&](const std::uint8_t* bytes, std::size_t length) {
        collector.add_defined_namespaces(bytes, length);
    });
    return collector.take();
}

bool may_define_op(const TorchOpListing& listing, const std::string& op) {
    // Where schemas or schema heads were found they are the list; a bare
    // name string (any identifier in read-only data) counts only when none were.
    if (!listing.ops.empty()) return std::binary_search(listing.ops.begin(), listing.ops.end(), op);
    return listing.names.count(op) != 0;
}

}  // namespace kernhub::loader
