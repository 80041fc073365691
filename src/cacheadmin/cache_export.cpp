// Cache export (docs/cache-format.md, "Cache archives"): walks the cache
// without following a link and hands the archive module a list of entries.
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

#include "cache/cache.hpp"
#include "common/hint.hpp"
#include "common/text.hpp"
#include "digest/digest.hpp"
#include "kernhub/error.hpp"

namespace kernhub::cacheadmin {

namespace {

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
        // Bytecode Python wrote beside a package it imported from the
        // snapshot (the kernels library does): not the hub's, not exported.
        if (cache::is_python_bytecode(it->path().lexically_relative(base).generic_string())) {
            if (S_ISDIR(st.st_mode)) it.disable_recursion_pending();
            continue;
        }
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

}  // namespace

ExportStats export_cache(const fs::path& root, const std::vector<ExportSelection>& selections, const fs::path& file,
                         const std::atomic<bool>* cancel) {
    std::error_code ec;
    if (!fs::is_directory(root, ec)) {  // the root itself may be a link to where the cache lives
        throw Error(ErrorCode::not_found,
                    "the cache " + printable(root.string()) +
                        " does not exist; check KERNHUB_CACHE, or the cache directory given",
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

}  // namespace kernhub::cacheadmin
