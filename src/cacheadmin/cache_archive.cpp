// Cache export and import (docs/ARCHITECTURE.md, "Cache archives"). Export
// walks the cache without following a link and hands the archive module a
// list of entries; import extracts under a policy that admits only the cache
// layout, checks what it extracted, and only then moves it into the cache.
#include "cacheadmin/cache_archive.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "cache/cache.hpp"
#include "common/hint.hpp"
#include "common/text.hpp"
#include "digest/digest.hpp"
#include "kernhub/error.hpp"

namespace kernhub::cacheadmin {

namespace {

// ---- the layout ---------------------------------------------------------------

// "<stem>.json" -> stem; "" for any other name.
std::string json_stem(const std::string& name) {
    const std::string suffix = ".json";
    if (name.size() <= suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
        return {};
    }
    return name.substr(0, name.size() - suffix.size());
}

std::vector<std::string> split_path(const std::string& path) {
    std::vector<std::string> parts;
    std::size_t start = 0;
    for (;;) {
        std::size_t slash = path.find('/', start);
        parts.push_back(path.substr(start, slash == std::string::npos ? std::string::npos : slash - start));
        if (slash == std::string::npos) return parts;
        start = slash + 1;
    }
}

std::string join_from(const std::vector<std::string>& parts, std::size_t first) {
    std::string out;
    for (std::size_t i = first; i < parts.size(); ++i) out += (out.empty() ? "" : "/") + parts[i];
    return out;
}

std::string bytes_text(std::uint64_t bytes) {
    return bytes % 1024 == 0 && bytes >= 1024 ? std::to_string(bytes >> 10) + " KiB" : std::to_string(bytes) + " bytes";
}

enum class Kind { cachedir_tag, directory, blob, link, ref, hf_tree, kernhub_tree, variant_record };

// Where an archive entry sits in the cache layout. `problem` is empty when
// the entry belongs there; the other fields then say what it is.
struct Placement {
    Kind kind = Kind::directory;
    std::string folder;
    std::string commit;
    std::string name;  // blob: etag; link: path in the snapshot; ref: revision; record: variant
    std::string problem;
};

std::string size_problem(const archive::Entry& entry, std::uint64_t limit, const char* limit_name) {
    if (entry.size <= limit) return {};
    return "is " + std::to_string(entry.size) + " bytes, over the " + limit_name + " limit of " + bytes_text(limit);
}

// The layout below one repo folder: parts[0] is the folder.
Placement place_in_repo(const archive::Entry& entry, const std::vector<std::string>& parts) {
    Placement at;
    at.folder = parts[0];
    const std::size_t n = parts.size();
    const bool dir = entry.type == archive::EntryType::directory;
    const bool file = entry.type == archive::EntryType::file;
    const std::string section = n > 1 ? parts[1] : "";
    auto expect = [&](bool ok, Kind kind, const std::string& why) {
        at.kind = kind;
        if (!ok) at.problem = why;
        return at;
    };
    if (n == 1) return expect(dir, Kind::directory, "must be a directory (a repo folder)");
    if (n == 2 && (section == "blobs" || section == "snapshots" || section == "refs" || section == "trees" ||
                   section == ".kernhub")) {
        return expect(dir, Kind::directory, "must be a directory");
    }
    if (section == "blobs" && n == 3) {
        at.name = parts[2];
        return expect(file && cache::is_etag(at.name), Kind::blob,
                      "must be a regular file named by a 40- or 64-character lowercase hex digest");
    }
    if (section == "snapshots") {
        at.commit = parts[2];
        if (!is_commit_sha(at.commit)) return expect(false, Kind::directory, "is not under a 40-hex commit folder");
        if (n == 3 || dir) return expect(dir, Kind::directory, "must be a directory (a snapshot)");
        at.name = join_from(parts, 3);
        return expect(entry.type == archive::EntryType::symlink, Kind::link,
                      "is a " + std::string(archive::to_string(entry.type)) +
                          " under snapshots/; a snapshot holds only links into blobs/");
    }
    if (section == "refs") {
        at.name = join_from(parts, 2);
        if (dir) return expect(true, Kind::directory, "");
        std::string why = revision_problem(at.name);
        if (why.empty()) why = size_problem(entry, cache::k_max_ref_bytes, "max_ref_bytes");
        return expect(file && why.empty(), Kind::ref, why.empty() ? "must be a regular file (a ref)" : why);
    }
    if (section == "trees" && n == 3) {
        at.commit = json_stem(parts[2]);
        std::string why = size_problem(entry, cache::k_max_listing_bytes, "max_listing_bytes");
        return expect(file && is_commit_sha(at.commit) && why.empty(), Kind::hf_tree,
                      why.empty() ? "must be a regular file named <commit>.json" : why);
    }
    if (section == ".kernhub" && n >= 3 && (parts[2] == "trees" || parts[2] == "variants")) {
        const bool trees = parts[2] == "trees";
        if (n == 3) return expect(dir, Kind::directory, "must be a directory");
        if (trees && n == 4) {
            at.commit = json_stem(parts[3]);
            std::string why = size_problem(entry, cache::k_max_listing_bytes, "max_listing_bytes");
            return expect(file && is_commit_sha(at.commit) && why.empty(), Kind::kernhub_tree,
                          why.empty() ? "must be a regular file named <commit>.json" : why);
        }
        if (!trees && n == 4) {
            at.commit = parts[3];
            return expect(dir && is_commit_sha(at.commit), Kind::directory, "must be a directory named by a commit");
        }
        if (!trees && n == 5) {
            at.commit = parts[3];
            at.name = json_stem(parts[4]);
            std::string why = size_problem(entry, cache::k_max_record_bytes, "max_record_bytes");
            return expect(file && is_commit_sha(at.commit) && cache::is_variant_name(at.name) && why.empty(),
                          Kind::variant_record, why.empty() ? "must be a regular file named <variant>.json" : why);
        }
    }
    return expect(false, Kind::directory,
                  "is not part of the cache layout: a repo folder holds blobs/, snapshots/, refs/, trees/, "
                  ".kernhub/trees/ and .kernhub/variants/");
}

Placement place(const archive::Entry& entry) {
    const std::vector<std::string> parts = split_path(entry.path);
    if (parts.size() == 1 && parts[0] == "CACHEDIR.TAG") {
        Placement at;
        at.kind = Kind::cachedir_tag;
        if (entry.type != archive::EntryType::file) at.problem = "must be a regular file";
        if (at.problem.empty()) at.problem = size_problem(entry, k_import_max_cachedir_tag_bytes, "max_tag_bytes");
        return at;
    }
    if (!cache::parse_repo_folder(parts[0])) {
        Placement at;
        at.problem =
            "is outside any repo folder; the top of a cache archive holds only kernels--ORG--NAME and "
            "models--ORG--NAME folders (and CACHEDIR.TAG)";
        return at;
    }
    return place_in_repo(entry, parts);
}

// The one kind of link a cache holds: from snapshots/<commit>/<path> into
// blobs/ of the same repo folder.
std::string snapshot_link_problem(const archive::Entry& entry) {
    const std::vector<std::string> parts = split_path(entry.path);
    if (parts.size() < 4 || !cache::parse_repo_folder(parts[0]) || parts[1] != "snapshots" ||
        !is_commit_sha(parts[2])) {
        return "is a symbolic link; links are allowed only under snapshots/<commit>/ of a repo folder";
    }
    const std::string blobs = parts[0] + "/blobs/";
    std::optional<std::string> resolved = archive::resolve_link(entry.path, entry.link_target);
    if (resolved && resolved->rfind(blobs, 0) == 0 && cache::is_etag(resolved->substr(blobs.size()))) return {};
    return "is a link to '" + printable(entry.link_target) +
           "', which does not lead into blobs/ of its own repo folder";
}

// ---- export -------------------------------------------------------------------

bool lstat_is(const fs::path& path, mode_t type, struct stat* out = nullptr) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0 || (st.st_mode & S_IFMT) != type) return false;
    if (out != nullptr) *out = st;
    return true;
}

[[noreturn]] void broken_snapshot(const fs::path& path, const std::string& why) {
    throw Error(ErrorCode::verification, "cannot export " + printable(path.string()) + ": it " + why +
                                             "; fetch that kernel again to repair the snapshot, then export");
}

class ExportPlan {
public:
    explicit ExportPlan(fs::path root) : m_root(std::move(root)) {}

    // Adds the folder's snapshots (one commit, or all), what they link to
    // and what describes them. Returns false when nothing was there to add.
    bool add_folder(const std::string& folder, const std::optional<std::string>& commit);
    std::vector<archive::WriteEntry> take() {
        std::vector<archive::WriteEntry> out;
        for (auto& [path, entry] : m_entries) out.push_back(std::move(entry));
        return out;
    }

private:
    void add(archive::WriteEntry entry) {
        for (std::size_t slash = entry.path.find('/'); slash != std::string::npos;
             slash = entry.path.find('/', slash + 1)) {
            archive::WriteEntry dir;
            dir.path = entry.path.substr(0, slash);
            dir.type = archive::EntryType::directory;
            m_entries.emplace(dir.path, std::move(dir));
        }
        std::string path = entry.path;
        m_entries.emplace(std::move(path), std::move(entry));
    }
    void add_file(const std::string& path, bool read_only) {
        archive::WriteEntry entry;
        entry.path = path;
        entry.source = m_root / path;
        entry.read_only = read_only;
        add(std::move(entry));
    }
    // A side file goes along when it is a regular file within its limit;
    // anything else there is not worth carrying (kernhub would not read it).
    void add_side_file(const std::string& path, std::uint64_t limit) {
        struct stat st {};
        if (lstat_is(m_root / path, S_IFREG, &st) && static_cast<std::uint64_t>(st.st_size) <= limit) {
            add_file(path, false);
        }
    }
    void add_snapshot(const std::string& folder, const std::string& commit);
    void add_link(const std::string& folder, const std::string& path);
    void add_refs(const std::string& folder, const std::set<std::string>& commits);

    fs::path m_root;
    std::map<std::string, archive::WriteEntry> m_entries;
};

bool ExportPlan::add_folder(const std::string& folder, const std::optional<std::string>& commit) {
    // A repo folder that is a link leads out of the cache: never exported.
    if (!lstat_is(m_root / folder, S_IFDIR) || !lstat_is(m_root / folder / "snapshots", S_IFDIR)) return false;
    std::set<std::string> commits;
    if (commit) {
        commits.insert(*commit);
    } else {
        std::error_code ec;
        for (fs::directory_iterator it(m_root / folder / "snapshots", ec), end; !ec && it != end; it.increment(ec)) {
            const std::string name = it->path().filename().string();
            if (is_commit_sha(name) && lstat_is(it->path(), S_IFDIR)) commits.insert(name);
        }
    }
    for (const auto& sha : commits) {
        add_snapshot(folder, sha);
        add_side_file(folder + "/trees/" + sha + ".json", cache::k_max_listing_bytes);
        // kernhub's side data stays out: import would not take it.
    }
    add_refs(folder, commits);
    return !commits.empty();
}

void ExportPlan::add_snapshot(const std::string& folder, const std::string& commit) {
    const fs::path base = m_root / folder / "snapshots" / commit;
    if (!lstat_is(base, S_IFDIR)) {
        throw Error(ErrorCode::offline, "cannot export " + printable(base.string()) +
                                            ": the snapshot is not in the cache; fetch or prewarm it first");
    }
    std::error_code ec;
    fs::recursive_directory_iterator it(base, ec), end;  // never follows links
    for (; !ec && it != end; it.increment(ec)) {
        const std::string path = it->path().lexically_relative(m_root).generic_string();
        struct stat st {};
        if (::lstat(it->path().c_str(), &st) != 0) broken_snapshot(it->path(), "cannot be read");
        if (S_ISDIR(st.st_mode)) {
            archive::WriteEntry dir;
            dir.path = path;
            dir.type = archive::EntryType::directory;
            add(std::move(dir));
        } else if (S_ISLNK(st.st_mode)) {
            add_link(folder, path);
        } else {
            broken_snapshot(it->path(), "is not a link into blobs/ (kernhub exports caches in the symlink layout)");
        }
    }
    if (ec) {
        throw Error(ErrorCode::internal,
                    "cannot read " + printable(base.string()) + ": " + ec.message() + "; check permissions");
    }
}

void ExportPlan::add_link(const std::string& folder, const std::string& path) {
    std::error_code ec;
    const std::string target = fs::read_symlink(m_root / path, ec).string();
    const std::string blobs = folder + "/blobs/";
    std::optional<std::string> resolved = archive::resolve_link(path, target);
    if (ec || !resolved || resolved->rfind(blobs, 0) != 0 || !cache::is_etag(resolved->substr(blobs.size()))) {
        broken_snapshot(m_root / path, "is a link to '" + printable(target) + "', not into blobs/ of its repo folder");
    }
    if (!lstat_is(m_root / *resolved, S_IFREG)) {
        broken_snapshot(m_root / path, "links to the missing blob " + resolved->substr(blobs.size()));
    }
    add_file(*resolved, true);
    archive::WriteEntry link;
    link.path = path;
    link.type = archive::EntryType::symlink;
    link.link_target = target;
    add(std::move(link));
}

// Refs that name one of the exported commits; a ref holding no commit id
// counts as absent, as it does for a fetch.
void ExportPlan::add_refs(const std::string& folder, const std::set<std::string>& commits) {
    const fs::path refs = m_root / folder / "refs";
    std::error_code ec;
    for (fs::recursive_directory_iterator it(refs, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string revision = it->path().lexically_relative(refs).generic_string();
        struct stat st {};
        if (!lstat_is(it->path(), S_IFREG, &st) || !revision_problem(revision).empty() ||
            static_cast<std::uint64_t>(st.st_size) > cache::k_max_ref_bytes) {
            continue;
        }
        std::optional<std::string> content = cache::read_cache_file(it->path(), cache::k_max_ref_bytes, "a ref");
        if (content && commits.count(trim(*content)) != 0) add_file(folder + "/refs/" + revision, false);
    }
}

// ---- import -------------------------------------------------------------------

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

// Checks every extracted entry and lists what goes where. Any problem is a
// refusal; nothing has touched the cache yet.
StagedCache stage(const fs::path& root, const fs::path& archive_file, const archive::ExtractedTree& tree,
                  const std::atomic<bool>* cancel) {
    StagedCache staged;
    for (const auto& entry : tree.entries()) {
        check_cancel(cancel);
        const Placement at = place(entry);
        const fs::path file = tree.root() / entry.path;
        if (at.kind == Kind::cachedir_tag || at.kind == Kind::directory) continue;
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
                if (!is_commit_sha(commit))
                    throw archive::refusal(archive_file, entry.path, "does not hold a commit id");
                repo.refs[at.name] = commit;
                break;
            }
            case Kind::variant_record:
            case Kind::kernhub_tree:
                // kernhub's side data is this cache's own trust: its copy of
                // the hub's listing (used online in place of asking the hub)
                // and its record of what it verified. Never taken from an
                // archive (docs/ARCHITECTURE.md, "Cache archives").
                break;
            default: {
                std::string content =
                    read_staged(archive_file, entry, file, cache::k_max_listing_bytes, "a tree listing");
                if (!nlohmann::json::accept(content)) throw archive::refusal(archive_file, entry.path, "is not JSON");
                repo.side_files.push_back(StagedSideFile{at.kind, at.commit, at.name, std::move(content)});
            }
        }
    }
    // A link needs its blob from the archive or from the cache it joins,
    // and a ref a snapshot of its commit.
    for (auto& [folder, repo] : staged) {
        cache::RepoCache cache(root, repo.repo.type, repo.repo.repo_id);
        for (const auto& [revision, commit] : repo.refs) {
            // An init-capture: C++17 lambdas cannot capture a structured binding (clang refuses it).
            const bool in_archive =
                std::any_of(repo.links.begin(), repo.links.end(),
                            [&wanted = commit](const StagedLink& link) { return link.commit == wanted; });
            if (!in_archive && !lstat_is(cache.snapshot_dir(commit), S_IFDIR)) {
                throw archive::refusal(archive_file, folder + "/refs/" + revision,
                                       "names commit " + commit + ", which neither the archive nor the cache holds");
            }
        }
        for (auto& link : repo.links) {
            auto found = repo.blobs.find(link.etag);
            struct stat st {};
            if (found != repo.blobs.end()) {
                link.size = found->second.size;
            } else if (lstat_is(cache.blob_path(link.etag), S_IFREG, &st)) {
                link.size = static_cast<std::uint64_t>(st.st_size);
            } else {
                throw archive::refusal(
                    archive_file, folder + "/snapshots/" + link.commit + "/" + link.path,
                    "links to blob " + link.etag + ", which neither the archive nor the cache holds");
            }
            // A commit's content never changes: an archive that disagrees
            // with what the cache holds for it is wrong (or hostile), and
            // must not replace a file kernhub verified.
            std::error_code ec;
            const fs::path existing = cache.snapshot_path(link.commit, link.path);
            if (fs::symlink_status(existing, ec).type() != fs::file_type::not_found &&
                (!fs::is_symlink(existing, ec) ||
                 fs::read_symlink(existing, ec) != cache::snapshot_link_target(link.path, link.etag))) {
                throw archive::refusal(archive_file, folder + "/snapshots/" + link.commit + "/" + link.path,
                                       "differs from the file the cache already holds for that commit");
            }
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

ExportStats export_cache(const fs::path& root, const std::vector<ExportSelection>& selections, const fs::path& file,
                         const std::atomic<bool>* cancel) {
    std::error_code ec;
    if (!fs::is_directory(root, ec)) {  // the root itself may be a link to where the cache lives
        throw Error(ErrorCode::not_found,
                    "the cache " + printable(root.string()) +
                        " does not exist; check KERNHUB_CACHE, or the cache "
                        "directory given",
                    hint::setting("cache_dir"));
    }
    ExportPlan plan(root);
    std::set<std::string> repos;
    if (selections.empty()) {
        for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
            const std::string name = it->path().filename().string();
            if (cache::parse_repo_folder(name) && lstat_is(it->path(), S_IFDIR) &&
                plan.add_folder(name, std::nullopt)) {
                repos.insert(name);
            }
        }
    }
    for (const auto& selection : selections) {
        const std::string folder = cache::repo_folder_name(selection.type, selection.repo_id);
        if (plan.add_folder(folder, selection.commit)) repos.insert(folder);
    }
    std::vector<archive::WriteEntry> entries = plan.take();
    if (entries.empty()) {
        throw Error(ErrorCode::not_found, "the cache " + printable(root.string()) +
                                              " holds no snapshots to export; fetch or prewarm kernels first");
    }
    // What import would refuse is not worth writing.
    if (entries.size() > k_import_max_entries) {
        throw Error(ErrorCode::usage, "the export would hold " + std::to_string(entries.size()) +
                                          " entries, over the max_entries limit of " +
                                          std::to_string(k_import_max_entries) +
                                          " that import keeps; export fewer kernels");
    }
    for (const auto& entry : entries) {
        if (entry.path.size() > k_import_max_path_bytes) {
            throw Error(ErrorCode::usage, "cannot export " + printable(entry.path) + ": its path is over the " +
                                              "max_path_bytes limit of " + std::to_string(k_import_max_path_bytes) +
                                              " that import keeps");
        }
    }
    archive::WriteStats written = archive::write_archive(file, std::move(entries), cancel);
    ExportStats stats;
    stats.entries = written.entries;
    stats.bytes = written.bytes;
    stats.compression = written.compression;
    stats.repos.assign(repos.begin(), repos.end());
    return stats;
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
