// Tree listing pages as the hub sends them, and huggingface_hub's cached
// tree (another tool's file in a shared cache) read on the offline path.
// A page that parses must survive kernhub's own round trip through
// tree_to_json, since that copy is what a warm fetch reads back.
#include <cstdlib>

#include "fetch/fetcher.hpp"
#include "fuzz_target.hpp"
#include "hub/hub_client.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string text = fuzz::as_text(data, size);
    fuzz::expect_error_or_success([&] {
        auto entries = kernhub::hub::parse_tree_page(text, "fuzz listing");
        auto again = kernhub::hub::parse_tree_page(kernhub::hub::tree_to_json(entries), "round trip");
        if (again.size() != entries.size()) std::abort();
        for (const auto& entry : entries) (void)kernhub::fetch::excluded_from_digest(entry.path);
    });
    // As HubClient reads a page: files under build/ only, and a cap that
    // stops parsing part way (the entry count decides where).
    fuzz::expect_error_or_success([&] {
        kernhub::hub::PageFilter filter;
        filter.files_only = true;
        filter.keep_prefix = "build/";
        filter.max_entries = size % 7;
        std::vector<kernhub::hub::TreeEntry> kept;
        const std::size_t seen = kernhub::hub::parse_tree_page_into(text, "fuzz page", filter, kept);
        if (seen > filter.max_entries + 1 || kept.size() > seen) std::abort();
        for (const auto& entry : kept) {
            if (entry.path.rfind("build/", 0) != 0 || !entry.is_file) std::abort();
        }
    });
    fuzz::expect_error_or_success([&] { (void)kernhub::fetch::parse_hf_tree_cache(text); });
    return 0;
}
