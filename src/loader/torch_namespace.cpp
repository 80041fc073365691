// The op namespace of a torch variant: _ops.py read as Python reads it,
// and checked against the library's bytes.
#include "loader/torch_namespace.hpp"

#include <algorithm>
#include <functional>
#include <string_view>
#include <vector>

#include "common/join.hpp"
#include "common/text.hpp"
#include "elf/elf_binding.hpp"
#include "kernhub/error.hpp"

namespace kernhub::loader {

namespace {

std::string names_of(const std::set<std::string>& names) {
    std::vector<std::string> quoted;
    quoted.reserve(names.size() + 1);
    for (const std::string& name : names) quoted.push_back(quoted_name(name));
    if (quoted.size() > 8) {
        const std::size_t more = quoted.size() - 8;
        quoted.resize(8);
        quoted.push_back(std::to_string(more) + " more");
    }
    return join(quoted);
}

std::string claim_words(const NamespaceClaim& claim) {
    return claim.from_ops_py ? "its _ops.py says the namespace is " + quoted_name(claim.name)
                             : "it has no _ops.py, and its file name says the namespace is " + quoted_name(claim.name);
}

}  // namespace

bool names_string(const std::uint8_t* data, std::size_t size, const std::string& file, const std::string& name) {
    const std::string needle = std::string(1, '\0') + name + std::string(1, '\0');
    const std::boyer_moore_horspool_searcher searcher(needle.begin(), needle.end());
    bool found = false;
    elf::for_each_read_only_section(data, size, file, [&](const std::uint8_t* bytes, std::size_t length) {
        const char* begin = reinterpret_cast<const char*>(bytes);
        const std::string_view block(begin, length);
        if (found || block.substr(0, name.size() + 1) == needle.substr(1)) {
            found = true;
            return;
        }
        found = std::search(begin, begin + length, searcher) != begin + length;
    });
    return found;
}

TorchNamespace choose_namespace(const TorchOpListing& listing, const NamespaceClaim& claim, const std::uint8_t* data,
                                std::size_t size, const std::string& file) {
    const std::set<std::string>& defined = listing.defined_namespaces;
    if (!defined.empty()) {
        if (defined.count(claim.name) != 0) return {claim.name, defined};
        if (!claim.from_ops_py && defined.size() == 1) return {*defined.begin(), defined};
        throw Error(ErrorCode::verification,
                    "the torch op library " + file + " registers the op namespace " + names_of(defined) +
                        " (its symbols say so), and " + claim_words(claim) +
                        (claim.from_ops_py ? "" : "; with several, kernhub cannot tell which holds its ops") +
                        "; the publisher must make the two agree");
    }
    const bool op_name = std::binary_search(listing.ops.begin(), listing.ops.end(), claim.name);
    const bool held = !op_name && (listing.names.count(claim.name) != 0 ||
                                   (!listing.names_complete && names_string(data, size, file, claim.name)));
    if (held) return {claim.name, {claim.name}};
    throw Error(ErrorCode::verification,
                "the torch op library " + file + " does not name the op namespace " + quoted_name(claim.name) +
                    (op_name ? " (that is one of its ops)" : "") + ", and " + claim_words(claim) +
                    "; its bytes keep no TORCH_LIBRARY symbol to say which namespace it registers" +
                    (claim.from_ops_py ? "; the publisher must fix _ops.py or the library"
                                       : "; the library was renamed, or needs its _ops.py beside it"));
}

}  // namespace kernhub::loader
