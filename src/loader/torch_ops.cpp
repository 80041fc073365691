// Op names from a torch extension library's read-only data.
#include "loader/torch_ops.hpp"

#include <algorithm>
#include <cstring>

#include "elf/elf_binding.hpp"

namespace kernhub::loader {

namespace {

// An op name ("name" or "name.overload") longer than this is not one: the
// bound keeps a crafted library's long identifier runs from costing more
// than linear time, and a message from quoting them whole.
constexpr std::size_t k_max_op_name = 256;

bool is_identifier_char(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

bool is_identifier(const std::string& text) {
    if (text.empty() || (text[0] >= '0' && text[0] <= '9')) return false;
    return std::all_of(text.begin(), text.end(),
                       [](char c) { return is_identifier_char(static_cast<unsigned char>(c)); });
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
std::string schema_op(const std::string& text) {
    const std::size_t open = text.find('(');
    if (open == std::string::npos || text.find(") ->") == std::string::npos ||
        !starts_arguments(text.data() + open + 1, text.size() - open - 1)) {
        return {};
    }
    std::string name = text.substr(0, open);
    if (const std::size_t colons = name.rfind("::"); colons != std::string::npos) name = name.substr(colons + 2);
    return is_op_name(name) ? name : std::string();
}

// The NUL-terminated printable strings of a block, whole.
void add_strings(const std::uint8_t* bytes, std::size_t length, TorchOpListing& listing) {
    std::size_t start = 0;
    for (std::size_t at = 0; at < length; ++at) {
        if (bytes[at] != 0) continue;
        if (at > start) {
            const std::string text(reinterpret_cast<const char*>(bytes + start), at - start);
            if (const std::string op = schema_op(text); !op.empty()) {
                listing.ops.push_back(op);
                listing.schemas.push_back(text);
            } else if (is_op_name(text)) {
                listing.names.insert(text);
            }
        }
        start = at + 1;
    }
}

// Schema heads inside a block: "name(" then argument text, where some
// suffix of the identifier run before "(" is a name string of its own
// (pieces of several literals may abut with no byte between them).
void add_heads(const std::uint8_t* bytes, std::size_t length, TorchOpListing& listing) {
    for (std::size_t at = 1; at < length; ++at) {
        if (bytes[at] != '(' || !starts_arguments(reinterpret_cast<const char*>(bytes + at + 1), length - at - 1)) {
            continue;
        }
        std::size_t begin = at;
        while (begin > 0 && at - begin < k_max_op_name &&
               (is_identifier_char(bytes[begin - 1]) || bytes[begin - 1] == '.')) {
            --begin;
        }
        for (std::size_t from = begin; from < at; ++from) {
            const std::string name(reinterpret_cast<const char*>(bytes + from), at - from);
            if (listing.names.count(name) != 0) {
                listing.ops.push_back(name);
                break;
            }
        }
    }
}

}  // namespace

bool is_op_name(const std::string& op) {
    if (op.size() > k_max_op_name) return false;
    const std::size_t dot = op.find('.');
    if (dot == std::string::npos) return is_identifier(op);
    return is_identifier(op.substr(0, dot)) && is_identifier(op.substr(dot + 1));
}

TorchOpListing list_torch_ops(const std::uint8_t* data, std::size_t size, const std::string& source) {
    TorchOpListing listing;
    std::vector<std::pair<const std::uint8_t*, std::size_t>> blocks;
    elf::for_each_read_only_section(data, size, source, [&](const std::uint8_t* bytes, std::size_t length) {
        blocks.emplace_back(bytes, length);
        add_strings(bytes, length, listing);
    });
    // The heads need every name string first.
    for (const auto& [bytes, length] : blocks) add_heads(bytes, length, listing);
    std::sort(listing.ops.begin(), listing.ops.end());
    listing.ops.erase(std::unique(listing.ops.begin(), listing.ops.end()), listing.ops.end());
    std::sort(listing.schemas.begin(), listing.schemas.end());
    listing.schemas.erase(std::unique(listing.schemas.begin(), listing.schemas.end()), listing.schemas.end());
    return listing;
}

bool may_define_op(const TorchOpListing& listing, const std::string& op) {
    // Where schemas or schema heads were found they are the list; a bare
    // name string (any identifier in read-only data) counts only when none were.
    if (!listing.ops.empty()) return std::binary_search(listing.ops.begin(), listing.ops.end(), op);
    return listing.names.count(op) != 0;
}

std::string ops_namespace(const std::string& ops_py) {
    const std::string marker = "torch.ops.";
    for (std::size_t at = ops_py.find(marker); at != std::string::npos; at = ops_py.find(marker, at + 1)) {
        // Only an assignment `ops = torch.ops.<NAME>` names the namespace.
        const std::size_t line = ops_py.rfind('\n', at);
        std::string head =
            ops_py.substr(line == std::string::npos ? 0 : line + 1, at - (line == std::string::npos ? 0 : line + 1));
        head.erase(std::remove(head.begin(), head.end(), ' '), head.end());
        if (head != "ops=") continue;
        std::size_t end = at + marker.size();
        while (end < ops_py.size() && is_identifier_char(static_cast<unsigned char>(ops_py[end]))) ++end;
        std::string name = ops_py.substr(at + marker.size(), end - at - marker.size());
        if (is_identifier(name)) return name;
    }
    return {};
}

}  // namespace kernhub::loader
