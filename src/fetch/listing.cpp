// Where a commit's listing comes from: kernhub's own copy, the hub, and
// offline huggingface_hub's cached tree or the snapshot links themselves;
// the checks every listing passes; the Client's memo of parsed side data.
#include <algorithm>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "cache/cache.hpp"
#include "common/hint.hpp"
#include "common/text.hpp"
#include "fetch/fetcher.hpp"
#include "kernhub/error.hpp"

namespace kernhub::fetch {

using nlohmann::json;

bool excluded_from_digest(const std::string& relpath) {
    return relpath == "metadata.json" || relpath == "metadata.json.sigstore" || is_python_bytecode(relpath);
}

std::optional<std::vector<hub::TreeEntry>> parse_hf_tree_cache(const std::string& text) {
    const cache::HfTree tree = cache::parse_hf_tree(text, "build/");
    if (tree.status != cache::HfTree::Status::ok) return std::nullopt;
    std::vector<hub::TreeEntry> entries;
    entries.reserve(tree.files.size());
    for (const cache::HfTreeFile& file : tree.files) {
        hub::TreeEntry entry;
        entry.path = file.path;
        entry.is_file = true;
        entry.size = file.size;
        entry.oid = file.blob_id;
        entry.lfs_sha256 = file.lfs_sha256;
        entries.push_back(std::move(entry));
    }
    return entries;
}

// Without any listing, a snapshot another tool filled is described by its
// links. The blob name is the hub's hash, so the files can still be verified,
// but nothing shows which files are missing.
static std::vector<hub::TreeEntry> listing_from_snapshot(const cache::RepoCache& cache, const std::string& commit) {
    std::vector<hub::TreeEntry> entries;
    for (const auto& file : cache.list_snapshot(commit, "build")) {
        hub::TreeEntry entry;
        entry.path = file.relpath;
        entry.is_file = true;
        entry.size = file.size;
        if (file.etag.size() == 64) {
            entry.lfs_sha256 = file.etag;
        } else if (file.etag.size() == 40) {
            entry.oid = file.etag;
        } else {
            continue;  // not a link into blobs/: cannot be verified
        }
        entries.push_back(std::move(entry));
    }
    return entries;
}

static void check_listing(std::vector<hub::TreeEntry>& entries, const std::string& what);

// kernhub's copy of the hub's listing; nullopt when absent or damaged:
// unreadable, or refused by check_listing (a duplicated or unsafe path). A
// damaged copy only means "list again", never a fetch that fails for good.
// It holds only build/ files since the hub's answer is filtered as it is
// parsed; an older or foreign copy is filtered the same way (its size is
// capped by k_max_listing_bytes).
static std::optional<std::vector<hub::TreeEntry>> kernhub_listing(const cache::RepoCache& cache,
                                                                  const std::string& commit, std::size_t max_bytes) {
    try {
        auto text = cache.read_tree(commit, max_bytes);
        if (!text) return std::nullopt;
        hub::PageFilter filter;
        filter.files_only = true;
        filter.keep_prefix = "build/";
        std::vector<hub::TreeEntry> entries;
        hub::parse_tree_page_into(*text, cache.folder().string(), filter, entries);
        check_listing(entries, "the cached listing");
        return entries;
    } catch (const Error&) {
        return std::nullopt;
    }
}

// huggingface_hub's listing of the commit, used offline only: online the
// hub's own answer wins over a file anyone could have edited. nullopt when
// absent, unreadable or not in a format kernhub understands.
static std::optional<std::vector<hub::TreeEntry>> hf_listing(const cache::RepoCache& cache, const std::string& commit,
                                                             std::size_t max_bytes) {
    try {
        auto text = cache.read_hf_tree(commit, max_bytes);
        if (!text) return std::nullopt;
        auto entries = parse_hf_tree_cache(*text);
        if (entries) check_listing(*entries, "huggingface_hub's cached listing");
        return entries;
    } catch (const Error&) {
        return std::nullopt;
    }
}

// Every path of a listing is a safe relative path, and a path listed twice
// names the same thing both times: one entry is kept. Two different answers
// for one path (pagination that overlaps while a branch moves, or a hostile
// hub) would make which file is verified depend on order, so the listing is
// refused (verification, exit 4), as unsafe names are.
static void check_listing(std::vector<hub::TreeEntry>& entries, const std::string& what) {
    std::unordered_map<std::string, std::size_t> first;
    first.reserve(entries.size());
    std::vector<hub::TreeEntry> unique;
    unique.reserve(entries.size());
    for (auto& entry : entries) {
        cache::check_relative_path(entry.path);
        if (std::string problem = cache::path_name_problem(entry.path); !problem.empty()) {
            throw Error(ErrorCode::verification, what + " names the file " + quoted_name(entry.path) + ", which " +
                                                     problem + "; kernhub does not keep such a name");
        }
        // Ids a blob will be named by: well-formed before anything keeps them.
        if (entry.is_file) cache::check_etag(entry.etag());
        auto [it, inserted] = first.emplace(entry.path, unique.size());
        if (inserted) {
            unique.push_back(std::move(entry));
            continue;
        }
        const hub::TreeEntry& kept = unique[it->second];
        if (kept.is_file != entry.is_file || kept.size != entry.size || kept.oid != entry.oid ||
            kept.lfs_sha256 != entry.lfs_sha256) {
            throw Error(ErrorCode::verification, what + " lists " + entry.path +
                                                     " twice with different contents; the hub's answer is "
                                                     "inconsistent: try again, or report it to the hub");
        }
    }
    entries = std::move(unique);
}

void SideDataMemo::forget_listing(const std::string& key) {
    std::lock_guard<std::mutex> lock(m_mutex);
    m_listings.erase(key);
}

SideDataMemo::Listing SideDataMemo::listing(const std::string& key) const {
    std::lock_guard<std::mutex> lock(m_mutex);
    auto it = m_listings.find(key);
    return it == m_listings.end() ? nullptr : it->second;
}

void SideDataMemo::put_listing(const std::string& key, Listing listing) {
    std::lock_guard<std::mutex> lock(m_mutex);
    if (m_listings.size() < k_max_memo_entries) m_listings.emplace(key, std::move(listing));
}

std::optional<cache::VariantRecord> SideDataMemo::record(const std::string& key) const {
    std::lock_guard<std::mutex> lock(m_mutex);
    auto it = m_records.find(key);
    if (it == m_records.end()) return std::nullopt;
    return it->second;
}

void SideDataMemo::put_record(const std::string& key, const cache::VariantRecord& record) {
    std::lock_guard<std::mutex> lock(m_mutex);
    if (m_records.size() < k_max_memo_entries) m_records.emplace(key, record);
}

std::string SideDataMemo::key(const cache::RepoCache& cache, const std::string& commit) {
    return cache.folder().string() + '\n' + commit;
}

// Order of preference: kernhub's copy of the hub listing, then online the
// hub; offline huggingface_hub's cached tree and as a last resort the
// snapshot links. Only the hub's listing is kept in the memo: the others are
// read again each time, as another tool may complete them.
SideDataMemo::Listing Fetcher::listing(const FetchRequest& request, const std::string& commit) {
    cache::RepoCache cache(m_root, request.repo.type, request.repo.repo_id);
    m_listing_source = ListingSource::hub;
    const std::string key = SideDataMemo::key(cache, commit);
    if (m_memo != nullptr) {
        if (SideDataMemo::Listing kept = m_memo->listing(key)) {
            // The cache may have been wiped since (`kernhub cache prune`
            // removing the snapshot, rm -rf): put the listing back so later
            // processes, offline ones too, find it.
            if (!cache.has_tree(commit)) {
                write_side_data("the listing of " + repo_at(request.repo, commit),
                                [&] { cache.write_tree(commit, hub::tree_to_json(*kept)); });
            }
            return kept;
        }
    }
    // A cached listing is read up to the cap a hub's answer has.
    const std::size_t max_bytes =
        std::max(cache::k_max_listing_bytes, m_client != nullptr ? m_client->limits().max_listing_bytes : 0);
    std::optional<std::vector<hub::TreeEntry>> entries = kernhub_listing(cache, commit, max_bytes);
    bool from_hub = entries.has_value();
    if (!entries && request.offline) {
        entries = hf_listing(cache, commit, max_bytes);
        if (entries) m_listing_source = ListingSource::hf_tree;
    }
    if (!entries && request.offline) {
        entries = listing_from_snapshot(cache, commit);
        if (entries->empty()) {
            throw Error(ErrorCode::offline,
                        repo_at(request.repo, commit) + " has no cached listing under " + m_root.string() +
                            "; offline mode is on: fetch it once while online",
                        hint::action("fetch"));
        }
        m_listing_source = ListingSource::snapshot;
    }
    if (!entries) {
        entries = m_client->list_tree(request.repo, commit, "build");
        check_listing(*entries, "the listing of " + repo_at(request.repo, commit));
        // Nothing of a repo the gate refuses is kept, its listing neither.
        if (request.gate) request.gate->pass();
        write_side_data("the listing of " + repo_at(request.repo, commit),
                        [&] { cache.write_tree(commit, hub::tree_to_json(*entries)); });
        from_hub = true;
    } else {
        check_listing(*entries, "the cached listing of " + repo_at(request.repo, commit));
    }
    auto listing = std::make_shared<const std::vector<hub::TreeEntry>>(std::move(*entries));
    if (from_hub && m_memo != nullptr) m_memo->put_listing(key, listing);
    return listing;
}

}  // namespace kernhub::fetch
