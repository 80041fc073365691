// `kernhub cache ls` over the scan: per repo its refs, commits, variants and
// sizes. Reads only; sizes come from lstat of the blobs the links name.
#include <algorithm>
#include <map>
#include <unordered_map>

#include "cacheadmin/inventory.hpp"

namespace kernhub::cacheadmin {

namespace {

using BlobIndex = std::map<std::string, const Entry*>;

// The bytes a snapshot entry stands for: the blob a link names, or a plain
// file's own size (tools without symlinks copy files into snapshots).
std::optional<std::uint64_t> entry_bytes(const Entry& entry, const BlobIndex& blobs) {
    if (entry.type == EntryType::file) return entry.size;
    if (entry.type != EntryType::symlink) return std::nullopt;
    auto it = blobs.find(linked_etag(entry.name, entry.link));
    if (it == blobs.end() || it->second->type != EntryType::file) return std::nullopt;
    return it->second->size;
}

// kernhub's record of the variant exists and every file it names is linked
// to a blob of the recorded size.
bool record_matches(const RepoScan& repo, const Snapshot& snapshot, const std::string& variant,
                    const BlobIndex& blobs) {
    auto recorded = read_record(repo, snapshot.commit, variant);
    if (!recorded) return false;
    std::unordered_map<std::string, const Entry*> by_name;
    for (const Entry& e : snapshot.entries) by_name.emplace(e.name, &e);
    for (const RecordedFile& file : *recorded) {
        const auto entry = by_name.find("build/" + variant + "/" + file.path);
        if (entry == by_name.end() || entry->second->type != EntryType::symlink) return false;
        if (entry_bytes(*entry->second, blobs) != file.size) return false;
    }
    return true;
}

CachedCommit list_commit(const RepoScan& repo, const Snapshot& snapshot, const BlobIndex& blobs) {
    CachedCommit commit;
    commit.commit = snapshot.commit;
    for (const Ref& ref : repo.refs) {
        if (ref.commit == snapshot.commit) commit.refs.push_back(ref.revision);
    }
    std::map<std::string, CachedVariant> variants;
    for (const Entry& entry : snapshot.entries) {
        const bool in_build = entry.name.rfind("build/", 0) == 0;
        const std::string rest = in_build ? entry.name.substr(6) : std::string();
        const auto slash = rest.find('/');
        if (entry.type == EntryType::directory) {
            if (in_build && slash == std::string::npos) variants[rest].name = rest;
            continue;
        }
        const std::uint64_t bytes = entry_bytes(entry, blobs).value_or(0);
        ++commit.files;
        commit.size += bytes;
        if (in_build && slash != std::string::npos) {
            CachedVariant& variant = variants[rest.substr(0, slash)];
            ++variant.files;
            variant.size += bytes;
        }
    }
    for (auto& [name, variant] : variants) {
        variant.name = name;
        variant.recorded = record_matches(repo, snapshot, name, blobs);
        commit.variants.push_back(variant);
    }
    return commit;
}

// The variants loads hold in part (.kernhub/partial/<commit>/), each on its
// commit's entry, which is made (with `snapshot` false) where the commit
// has no snapshot.
void add_parts(const RepoScan& repo, CachedRepo& out) {
    for (const Snapshot& area : repo.partial_areas) {
        const std::vector<std::string> variants = area.is_directory ? part_variants(area) : std::vector<std::string>{};
        if (variants.empty()) continue;
        auto commit = std::find_if(out.commits.begin(), out.commits.end(),
                                   [&](const CachedCommit& c) { return c.commit == area.commit; });
        if (commit == out.commits.end()) {
            CachedCommit made;
            made.commit = area.commit;
            made.snapshot = false;
            for (const Ref& ref : repo.refs) {
                if (ref.commit == area.commit) made.refs.push_back(ref.revision);
            }
            commit = out.commits.insert(out.commits.end(), std::move(made));
        }
        for (const std::string& name : variants) {
            auto variant = std::find_if(commit->variants.begin(), commit->variants.end(),
                                        [&](const CachedVariant& v) { return v.name == name; });
            if (variant == commit->variants.end()) {
                CachedVariant made;
                made.name = name;
                variant = commit->variants.insert(commit->variants.end(), std::move(made));
            }
            variant->part = describe_part(repo, area, name);
        }
        std::sort(commit->variants.begin(), commit->variants.end(),
                  [](const CachedVariant& a, const CachedVariant& b) { return a.name < b.name; });
    }
    std::sort(out.commits.begin(), out.commits.end(),
              [](const CachedCommit& a, const CachedCommit& b) { return a.commit < b.commit; });
}

CachedRepo list_repo(const RepoScan& repo) {
    CachedRepo out;
    out.repo_id = repo.repo_id;
    out.repo_type = repo.type;
    out.folder = repo.folder.string();
    BlobIndex blobs;
    for (const Entry& blob : repo.blobs) {
        blobs.emplace(blob.name, &blob);
        if (blob.type != EntryType::file) continue;
        ++out.blobs;
        out.size += blob.size;
    }
    for (const Entry& partial : repo.partials) {
        if (partial.type != EntryType::file) continue;
        ++out.partials;
        out.size += partial.size;
    }
    for (const Ref& ref : repo.refs) {
        if (!ref.commit.empty()) out.refs[ref.revision] = ref.commit;
    }
    for (const Snapshot& snapshot : repo.snapshots) {
        if (snapshot.is_directory) out.commits.push_back(list_commit(repo, snapshot, blobs));
    }
    add_parts(repo, out);
    return out;
}

}  // namespace

CacheListing list_cache(const fs::path& root) {
    CacheListing listing;
    listing.root = root.string();
    for (const RepoScan& repo : scan_cache(root)) {
        listing.repos.push_back(list_repo(repo));
        listing.size += listing.repos.back().size;
        for (const Entry& temp : repo.temps) {
            ++listing.leftovers;
            listing.leftover_bytes += leftover_bytes(repo.folder / ".kernhub" / "tmp" / temp.name, temp);
        }
    }
    for (const Entry& entry : root_leftovers(root)) {
        ++listing.leftovers;
        listing.leftover_bytes += leftover_bytes(root / entry.name, entry);
    }
    return listing;
}

}  // namespace kernhub::cacheadmin
