// Cache import (docs/cache-format.md, "Cache archives"): extracts under a
// policy that admits only the cache layout, checks what it extracted, and
// only then moves it into the cache.
#include "cacheadmin/archive_layout.hpp"
#include "cacheadmin/cache_archive.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "cache/cache.hpp"
#include "cache/receipts.hpp"
#include "common/text.hpp"
#include "digest/digest.hpp"
#include "kernhub/error.hpp"

namespace kernhub::cacheadmin {

namespace {

struct StagedBlob {
    fs::path staged;
    std::uint64_t size = 0;
};

struct StagedLink {
    std::string commit;
    std::string path;
    std::string etag;
    std::uint64_t size = 0;
};

struct StagedSideFile {
    Kind kind = Kind::hf_tree;
    std::string commit;
    std::string variant;
    std::string content;
};

// What an import puts into one repo folder, checked and ready to move.
struct StagedRepo {
    cache::RepoFolder repo;
    std::map<std::string, StagedBlob> blobs;
    std::vector<StagedLink> links;
    std::vector<StagedSideFile> side_files;
    std::map<std::string, std::string> refs;  // revision -> commit
};

using StagedCache = std::map<std::string, StagedRepo>;

void verify_blob(const fs::path& archive_file, const archive::Entry& entry, const fs::path& staged,
                 const std::string& etag) {
    // The name is the content's identity: SHA-256 for LFS files, git's blob
    // id ("blob <size>\0" + content, SHA-1) for the others.
    const std::string actual =
        etag.size() == 64 ? digest::sha256_file_hex(staged) : digest::git_blob_sha1_file_hex(staged);
    if (actual != etag) {
        throw archive::refusal(archive_file, entry.path, "does not match its name: its content hashes to " + actual);
    }
}

std::string read_staged(const fs::path& archive_file, const archive::Entry& entry, const fs::path& staged,
                        std::size_t limit, const char* what) {
    std::optional<std::string> content = cache::read_cache_file(staged, limit, what);
    if (!content) throw archive::refusal(archive_file, entry.path, "vanished while it was checked");
    return *content;
}

void check_cancel(const std::atomic<bool>* cancel) {
    if (cancel != nullptr && cancel->load()) throw Error(ErrorCode::interrupted, "the import was cancelled");
}

// One extracted entry checked and listed in its repo's part of `staged`.
void stage_entry(const fs::path& archive_file, const archive::ExtractedTree& tree, const archive::Entry& entry,
                 StagedCache& staged) {
    const Placement at = place(entry);
    const fs::path file = tree.root() / entry.path;
    if (at.kind == Kind::cachedir_tag || at.kind == Kind::directory) return;
    StagedRepo& repo = staged[at.folder];
    repo.repo = *cache::parse_repo_folder(at.folder);
    switch (at.kind) {
        case Kind::blob:
            verify_blob(archive_file, entry, file, at.name);
            repo.blobs[at.name] = StagedBlob{file, fs::file_size(file)};
            break;
        case Kind::link: {
            const std::string target = *archive::resolve_link(entry.path, entry.link_target);
            repo.links.push_back(StagedLink{at.commit, at.name, target.substr(target.rfind('/') + 1), 0});
            break;
        }
        case Kind::ref: {
            std::string commit = trim(read_staged(archive_file, entry, file, cache::k_max_ref_bytes, "a ref"));
            if (!is_commit_sha(commit)) throw archive::refusal(archive_file, entry.path, "does not hold a commit id");
            repo.refs[at.name] = commit;
            break;
        }
        case Kind::variant_record:
        case Kind::kernhub_tree:
            // kernhub's side data is this cache's own trust: its copy of
            // the hub's listing (used online in place of asking the hub)
            // and its record of what it verified. Never taken from an
            // archive (docs/cache-format.md, "Cache archives").
            break;
        default: {
            std::string content = read_staged(archive_file, entry, file, cache::k_max_listing_bytes, "a tree listing");
            if (!nlohmann::json::accept(content)) throw archive::refusal(archive_file, entry.path, "is not JSON");
            repo.side_files.push_back(StagedSideFile{at.kind, at.commit, at.name, std::move(content)});
        }
    }
}

// A link needs its blob from the archive or from the cache it joins, and
// may not contradict a link the cache holds for the same commit.
void check_link(const fs::path& archive_file, const std::string& folder, const StagedRepo& repo,
                const cache::RepoCache& cache, StagedLink& link) {
    auto found = repo.blobs.find(link.etag);
    struct stat st {};
    if (found != repo.blobs.end()) {
        link.size = found->second.size;
    } else if (lstat_is(cache.blob_path(link.etag), S_IFREG, &st)) {
        link.size = static_cast<std::uint64_t>(st.st_size);
    } else {
        throw archive::refusal(archive_file, folder + "/snapshots/" + link.commit + "/" + link.path,
                               "links to blob " + link.etag + ", which neither the archive nor the cache holds");
    }
    // A commit's content never changes: an archive that disagrees with what
    // the cache holds for it is wrong (or hostile), and must not replace a
    // file kernhub verified.
    std::error_code ec;
    const fs::path existing = cache.snapshot_path(link.commit, link.path);
    if (fs::symlink_status(existing, ec).type() != fs::file_type::not_found &&
        (!fs::is_symlink(existing, ec) ||
         fs::read_symlink(existing, ec) != cache::snapshot_link_target(link.path, link.etag))) {
        throw archive::refusal(archive_file, folder + "/snapshots/" + link.commit + "/" + link.path,
                               "differs from the file the cache already holds for that commit");
    }
}

// huggingface_hub's listing of a commit must describe the commit's snapshot
// as the import leaves it (the archive's links and the cache's): every link is listed with its blob and size, and a
// variant folder the snapshot holds lacks none of the files listed in it
// (other variants may be absent: a fetch takes one). A malformed one is
// refused; JSON of another format is kept as it is (huggingface_hub
// ignores it too).
void check_hf_tree(const fs::path& archive_file, const std::string& folder, const StagedRepo& repo,
                   const cache::RepoCache& cache, const StagedSideFile& side) {
    const std::string where = folder + "/trees/" + side.commit + ".json";
    const cache::HfTree tree = cache::parse_hf_tree(side.content, "");
    if (tree.status == cache::HfTree::Status::malformed) {
        throw archive::refusal(archive_file, where,
                               "is not a listing kernhub can read (a key twice, or a format_version 1 listing out of "
                               "shape), and huggingface_hub would take it for the commit's files");
    }
    if (tree.status == cache::HfTree::Status::other_format) return;
    std::unordered_map<std::string, const cache::HfTreeFile*> listed;
    for (const cache::HfTreeFile& file : tree.files) listed.emplace(file.path, &file);
    // The snapshot of the commit once the import is done: the archive's
    // links, and the links the cache already holds (which an archive cannot
    // replace, check_link).
    std::unordered_map<std::string, std::pair<std::string, std::uint64_t>> snapshot;
    for (const StagedLink& link : repo.links) {
        if (link.commit == side.commit) snapshot[link.path] = {link.etag, link.size};
    }
    for (const auto& file : cache.list_snapshot(side.commit, "")) {
        if (!file.etag.empty()) snapshot.emplace(file.relpath, std::make_pair(file.etag, file.size));
    }
    std::unordered_set<std::string> variants;
    for (const auto& [path, blob] : snapshot) {
        if (path.rfind("build/", 0) == 0) variants.insert(path.substr(0, path.find('/', 6) + 1));
        const auto it = listed.find(path);
        if (it == listed.end()) {
            throw archive::refusal(archive_file, where, "does not list " + path + ", which the snapshot holds");
        }
        const cache::HfTreeFile& file = *it->second;
        const std::string& etag = file.lfs_sha256.empty() ? file.blob_id : file.lfs_sha256;
        if (etag != blob.first || file.size != blob.second) {
            throw archive::refusal(archive_file, where,
                                   "lists " + path + " as blob " + quoted_name(etag) + " of " +
                                       std::to_string(file.size) + " bytes, and the snapshot links it to blob " +
                                       blob.first + " of " + std::to_string(blob.second) + " bytes");
        }
    }
    for (const cache::HfTreeFile& file : tree.files) {
        const std::size_t slash = file.path.find('/', 6);
        if (file.path.rfind("build/", 0) != 0 || slash == std::string::npos ||
            variants.count(file.path.substr(0, slash + 1)) == 0 || snapshot.count(file.path) != 0) {
            continue;
        }
        throw archive::refusal(archive_file, where,
                               "lists " + file.path + ", which the snapshot of that variant lacks");
    }
}

// Checks every extracted entry and lists what goes where. Any problem is a
// refusal; nothing has touched the cache yet.
StagedCache stage(const fs::path& root, const fs::path& archive_file, const archive::ExtractedTree& tree,
                  const std::atomic<bool>* cancel) {
    StagedCache staged;
    for (const auto& entry : tree.entries()) {
        check_cancel(cancel);
        stage_entry(archive_file, tree, entry, staged);
    }
    // A ref needs a snapshot of its commit, from the archive or the cache.
    for (auto& [folder, repo] : staged) {
        cache::RepoCache cache(root, repo.repo.type, repo.repo.repo_id);
        std::unordered_set<std::string> linked_commits;
        for (const StagedLink& link : repo.links) linked_commits.insert(link.commit);
        for (const auto& [revision, commit] : repo.refs) {
            const bool in_archive = linked_commits.count(commit) != 0;
            if (!in_archive && !lstat_is(cache.snapshot_dir(commit), S_IFDIR)) {
                throw archive::refusal(archive_file, folder + "/refs/" + revision,
                                       "names commit " + commit + ", which neither the archive nor the cache holds");
            }
        }
        for (auto& link : repo.links) check_link(archive_file, folder, repo, cache, link);
        for (const StagedSideFile& side : repo.side_files) {
            if (side.kind == Kind::hf_tree) check_hf_tree(archive_file, folder, repo, cache, side);
        }
    }
    return staged;
}

// Writes a side file unless the cache already holds the same bytes. A file
// there that kernhub cannot read (a link, too large) is simply replaced.
bool place_side_file(const cache::RepoCache& cache, const StagedSideFile& side) {
    std::optional<std::string> existing;
    try {
        if (side.kind == Kind::hf_tree) existing = cache.read_hf_tree(side.commit);
        if (side.kind == Kind::kernhub_tree) existing = cache.read_tree(side.commit);
        if (side.kind == Kind::variant_record) existing = cache.read_variant_record(side.commit, side.variant);
    } catch (const Error& error) {
        if (error.code() != ErrorCode::verification) throw;
    }
    if (existing == side.content) return false;
    if (side.kind == Kind::hf_tree) {
        cache::write_file_atomic(cache.folder() / "trees" / (side.commit + ".json"), side.content, cache.staging_dir());
    } else if (side.kind == Kind::kernhub_tree) {
        cache.write_tree(side.commit, side.content);
    } else {
        cache.write_variant_record(side.commit, side.variant, side.content);
    }
    return true;
}

// Moves checked content in, in the order that keeps the cache valid at every
// step: blobs, the links to them, the side data describing them, and refs
// last, so a reader resolving a ref finds everything it names.
void move_in(const fs::path& root, const StagedCache& staged, ImportStats& stats, const std::atomic<bool>* cancel) {
    for (const auto& [folder, repo] : staged) {
        cache::RepoCache cache(root, repo.repo.type, repo.repo.repo_id);
        // Every snapshot this import links into or names in a ref is marked
        // in use first, so a prune running meanwhile keeps it (links that
        // already exist are skipped below and would keep their old times).
        std::set<std::string> commits;
        for (const auto& link : repo.links) commits.insert(link.commit);
        for (const auto& [revision, commit] : repo.refs) commits.insert(commit);
        for (const auto& commit : commits) cache.claim_snapshot(commit, cancel);
        // The kernels library's receipts of every variant this import adds a
        // link to go before the first link and again after the last one: a
        // receipt must never cover files kernels did not hash itself.
        std::set<std::pair<std::string, std::string>> changed;
        for (const auto& link : repo.links) {
            const std::string prefix = "build/";
            const std::size_t end = link.path.find('/', prefix.size());
            if (link.path.rfind(prefix, 0) != 0 || end == std::string::npos) continue;
            if (cache.snapshot_links_blob(link.commit, link.path, link.etag, link.size)) continue;
            changed.emplace(link.commit, link.path.substr(prefix.size(), end - prefix.size()));
        }
        // (A structured binding cannot be captured in C++17: the id is named.)
        const auto drop_receipts = [&changed, &root, repo_id = repo.repo.repo_id] {
            for (const auto& [commit, variant] : changed) cache::remove_receipts(root, repo_id, commit, variant);
        };
        drop_receipts();
        for (const auto& [etag, blob] : repo.blobs) {
            cache::FileLock lock = cache.lock_blob(etag, cancel);  // a fetch may be placing it too
            ++(cache.adopt_blob(etag, blob.staged) ? stats.blobs : stats.skipped);
        }
        for (const auto& link : repo.links) {
            // Linked under the blob's lock, as a fetch links: prune decides
            // a blob's fate under the same lock.
            cache::FileLock lock = cache.lock_blob(link.etag, cancel);
            if (cache.snapshot_links_blob(link.commit, link.path, link.etag, link.size)) {
                ++stats.skipped;
                continue;
            }
            cache.link_snapshot(link.commit, link.path, link.etag);
            ++stats.links;
        }
        drop_receipts();
        for (const auto& side : repo.side_files) ++(place_side_file(cache, side) ? stats.side_files : stats.skipped);
        for (const auto& [revision, commit] : repo.refs) {
            if (cache.read_ref(revision) == commit) {
                ++stats.skipped;
                continue;
            }
            cache.write_ref(revision, commit);
            ++stats.refs;
        }
        stats.repos.push_back(folder);
    }
}

}  // namespace

archive::ExtractionPolicy import_policy() {
    archive::ExtractionPolicy policy;
    policy.allow_symlinks = true;
    policy.symlink_rule = snapshot_link_problem;
    policy.entry_rule = [](const archive::Entry& entry) { return place(entry).problem; };
    policy.max_entries = k_import_max_entries;
    policy.max_entry_bytes = k_import_max_blob_bytes;
    policy.max_total_bytes = k_import_max_total_bytes;
    policy.max_path_bytes = k_import_max_path_bytes;
    return policy;
}

namespace {

// The archive unpacked into a folder inside the root. A root this user may
// not write (another user's cache) gets the owner and the chown that fixes
// it, as every other refused write into the cache does.
archive::ExtractedTree extract_into(const fs::path& root, const fs::path& file, const std::atomic<bool>* cancel) {
    try {
        return archive::extract(file, root, import_policy(), cancel);
    } catch (const Error& e) {
        if (e.code() != ErrorCode::internal || ::access(root.c_str(), W_OK) == 0) throw;
        const int err = errno;
        throw Error(ErrorCode::internal, "cannot unpack " + printable(file.string()) + " into the cache " +
                                             printable(root.string()) + ": " + std::strerror(err) + "; " +
                                             cache::refusal_advice(root, err, "check permissions"));
    }
}

}  // namespace

ImportStats import_cache(const fs::path& root, const fs::path& file, const std::atomic<bool>* cancel) {
    // The extraction goes inside the root, on the cache's filesystem, so
    // blobs are renamed in rather than copied.
    std::error_code ec;
    const bool created = !fs::exists(fs::symlink_status(root, ec));
    if (created && !fs::create_directories(root, ec) && ec) {
        throw Error(ErrorCode::internal, "cannot create the cache " + printable(root.string()) + ": " + ec.message() +
                                             "; check permissions");
    }
    try {
        archive::ExtractedTree tree = extract_into(root, file, cancel);
        StagedCache staged = stage(root, file, tree, cancel);
        ImportStats stats;
        stats.entries = tree.entries().size();
        move_in(root, staged, stats, cancel);
        return stats;
    } catch (...) {
        if (created) fs::remove(root, ec);  // only when still empty
        throw;
    }
}

}  // namespace kernhub::cacheadmin
