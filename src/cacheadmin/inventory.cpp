// The bounded, symlink-safe scan of a cache root, and `cache ls` over it.
#include "cacheadmin/inventory.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "cache/cache.hpp"
#include "common/crash_point.hpp"
#include "hub/hub_client.hpp"
#include "kernhub/error.hpp"

namespace kernhub::cacheadmin {

namespace {

Clock::time_point modified_time(const struct stat& st) {
    auto since_epoch = std::chrono::seconds(st.st_mtim.tv_sec) + std::chrono::nanoseconds(st.st_mtim.tv_nsec);
    return Clock::time_point(std::chrono::duration_cast<Clock::duration>(since_epoch));
}

EntryType entry_type(mode_t mode) {
    if (S_ISREG(mode)) return EntryType::file;
    if (S_ISDIR(mode)) return EntryType::directory;
    if (S_ISLNK(mode)) return EntryType::symlink;
    return EntryType::other;
}

// Reads directories below the root through descriptors opened with
// O_NOFOLLOW and entries through fstatat/readlinkat relative to them, so a
// symlink is only ever read as a link, never entered. Counts every entry
// against k_max_cache_entries.
class Walker {
public:
    explicit Walker(fs::path root) : m_root(std::move(root)) {}

    // The entries of `dir`, sorted by name; nullopt when it is missing or not
    // a folder (a symlink to one included). follow: the root itself, which a
    // user may well have made a symlink.
    std::optional<std::vector<Entry>> list(const fs::path& dir, bool follow = false) {
        const int flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW);
        int fd = ::open(dir.c_str(), flags);
        if (fd < 0 && (errno == ENOENT || errno == ENOTDIR || errno == ELOOP)) return std::nullopt;
        if (fd < 0) fail(dir, errno);
        DIR* stream = ::fdopendir(fd);
        if (stream == nullptr) {
            int err = errno;
            ::close(fd);
            fail(dir, err);
        }
        std::vector<Entry> out;
        errno = 0;
        while (const dirent* item = ::readdir(stream)) {
            std::string name = item->d_name;
            if (name == "." || name == "..") continue;
            take();
            struct stat st {};
            if (::fstatat(fd, item->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;  // gone meanwhile
            Entry entry{name, entry_type(st.st_mode), static_cast<std::uint64_t>(st.st_size), modified_time(st), {}};
            if (entry.type == EntryType::symlink) entry.link = read_link(fd, item->d_name);
            out.push_back(std::move(entry));
        }
        ::closedir(stream);
        std::sort(out.begin(), out.end(), [](const Entry& a, const Entry& b) { return a.name < b.name; });
        return out;
    }

    // Everything below `dir`, depth first, names relative to it.
    std::vector<Entry> walk(const fs::path& dir) {
        std::vector<Entry> out;
        walk_into(dir, "", 0, out);
        return out;
    }

private:
    void walk_into(const fs::path& dir, const std::string& prefix, std::size_t depth, std::vector<Entry>& out) {
        if (depth > k_max_cache_depth) {
            throw Error(ErrorCode::verification, dir.string() + " is nested deeper than the " +
                                                     std::to_string(k_max_cache_depth) +
                                                     " folders k_max_cache_depth allows in a cache; remove it");
        }
        auto entries = list(dir);
        if (!entries) return;
        for (auto& entry : *entries) {
            const std::string name = entry.name;
            entry.name = prefix + name;
            const bool descend = entry.type == EntryType::directory;
            out.push_back(std::move(entry));
            if (descend) walk_into(dir / name, prefix + name + "/", depth + 1, out);
        }
    }

    std::string read_link(int dir_fd, const char* name) {
        std::string target(k_max_link_bytes + 1, '\0');
        ssize_t n = ::readlinkat(dir_fd, name, target.data(), target.size());
        if (n < 0 || static_cast<std::size_t>(n) > k_max_link_bytes) return {};
        target.resize(static_cast<std::size_t>(n));
        return target;
    }

    void take() {
        if (++m_seen > k_max_cache_entries) {
            throw Error(ErrorCode::verification, "the cache at " + m_root.string() + " holds more than " +
                                                     std::to_string(k_max_cache_entries) +
                                                     " entries (k_max_cache_entries); prune it or split it");
        }
    }

    [[noreturn]] static void fail(const fs::path& dir, int err) {
        throw Error(ErrorCode::internal, "cannot read the folder " + dir.string() + ": " + std::strerror(err) + "; " +
                                             cache::refusal_advice(dir, err, "check permissions"));
    }

    fs::path m_root;
    std::size_t m_seen = 0;
};

bool ends_with(const std::string& text, const std::string& tail) {
    return text.size() >= tail.size() && text.compare(text.size() - tail.size(), tail.size(), tail) == 0;
}

// "<etag>.<anything>.incomplete", as kernhub and huggingface_hub name partials.
bool is_partial_name(const std::string& name) {
    const std::string suffix = ".incomplete";
    auto dot = name.find('.');
    return dot != std::string::npos && cache::is_etag(name.substr(0, dot)) && ends_with(name, suffix) &&
           name.size() > dot + 1 + suffix.size();
}

void read_refs(Walker& walker, RepoScan& repo) {
    const fs::path refs = repo.folder / "refs";
    for (const Entry& entry : walker.walk(refs)) {
        if (entry.type == EntryType::directory) continue;
        Ref ref{entry.name, {}, {}};
        try {
            auto text = cache::read_cache_file(refs / entry.name, cache::k_max_ref_bytes, "a ref");
            std::string value = text.value_or("");
            value.erase(value.find_last_not_of(" \t\r\n") + 1);
            if (is_commit_sha(value)) {
                ref.commit = value;
            } else {
                ref.problem = "does not hold a commit id";
            }
        } catch (const Error& e) {
            if (e.code() != ErrorCode::verification) throw;
            ref.problem = entry.type == EntryType::symlink ? "is a symbolic link, not a ref" : "is not a ref file";
        }
        repo.refs.push_back(std::move(ref));
    }
}

void read_records(Walker& walker, RepoScan& repo) {
    const fs::path variants = repo.folder / ".kernhub" / "variants";
    for (const Entry& commit : walker.list(variants).value_or(std::vector<Entry>{})) {
        if (commit.type != EntryType::directory || !is_commit_sha(commit.name)) continue;
        for (const Entry& file : walker.list(variants / commit.name).value_or(std::vector<Entry>{})) {
            if (!ends_with(file.name, ".json") || file.name.size() == 5) continue;
            std::string variant = file.name.substr(0, file.name.size() - 5);
            repo.records.push_back(Record{commit.name, variant, variants / commit.name / file.name});
        }
    }
}

// .kernhub/partial/<commit>/, each read as a snapshot folder is.
void read_partial_areas(Walker& walker, RepoScan& repo) {
    const fs::path partial = repo.folder / ".kernhub" / "partial";
    for (const Entry& entry : walker.list(partial).value_or(std::vector<Entry>{})) {
        if (!is_commit_sha(entry.name)) continue;  // no folder kernhub writes
        Snapshot area{entry.name, entry.type == EntryType::directory, {}, entry.modified};
        if (area.is_directory) area.entries = walker.walk(partial / entry.name);
        for (const Entry& inner : area.entries) area.newest = std::max(area.newest, inner.modified);
        repo.partial_areas.push_back(std::move(area));
    }
}

}  // namespace

bool is_real_directory(const fs::path& path) {
    struct stat st {};
    return ::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

namespace {

RepoScan scan_repo(Walker& walker, const fs::path& folder, RepoType type, const std::string& repo_id) {
    RepoScan repo;
    repo.folder = folder;
    repo.folder_name = folder.filename().string();
    repo.type = type;
    repo.repo_id = repo_id;
    for (Entry& entry : walker.list(folder / "blobs").value_or(std::vector<Entry>{})) {
        if (cache::is_etag(entry.name)) {
            repo.blobs.push_back(std::move(entry));
        } else if (is_partial_name(entry.name)) {
            repo.partials.push_back(std::move(entry));
        }
    }
    // A test can pause here: the links walked next may be newer than the
    // blobs listed (cache verify judges those as they are then).
    crash_point("blobs-listed");
    for (const Entry& entry : walker.list(folder / "snapshots").value_or(std::vector<Entry>{})) {
        if (!is_commit_sha(entry.name)) continue;  // not a snapshot any tool writes
        Snapshot snapshot{entry.name, entry.type == EntryType::directory, {}, entry.modified};
        if (snapshot.is_directory) snapshot.entries = walker.walk(folder / "snapshots" / entry.name);
        for (const Entry& inner : snapshot.entries) snapshot.newest = std::max(snapshot.newest, inner.modified);
        repo.snapshots.push_back(std::move(snapshot));
    }
    read_refs(walker, repo);
    // kernhub's side data is read (and pruned) only through a real folder:
    // a .kernhub link would lead prune out of the cache.
    if (is_real_directory(folder / ".kernhub")) {
        repo.temps = walker.list(folder / ".kernhub" / "tmp").value_or(std::vector<Entry>{});
        read_records(walker, repo);
        read_partial_areas(walker, repo);
    }
    return repo;
}

}  // namespace

std::string linked_etag(const std::string& relpath, const std::string& target, cache::LinkArea area) {
    auto slash = target.rfind('/');
    std::string etag = slash == std::string::npos ? target : target.substr(slash + 1);
    if (!cache::is_etag(etag) || target != cache::link_target(area, relpath, etag)) return {};
    return etag;
}

void visit_repos(const fs::path& root, const std::function<void(RepoScan)>& visit) {
    Walker walker(root);
    for (const Entry& entry : walker.list(root, true).value_or(std::vector<Entry>{})) {
        if (entry.type != EntryType::directory) continue;
        if (auto repo = cache::parse_repo_folder(entry.name)) {
            visit(scan_repo(walker, root / entry.name, repo->type, repo->repo_id));
        }
    }
}

std::vector<Entry> root_leftovers(const fs::path& root) {
    Walker walker(root);
    std::vector<Entry> found;
    for (Entry& entry : walker.list(root, true).value_or(std::vector<Entry>{})) {
        if (entry.name.rfind(".kernhub-extract-", 0) == 0) found.push_back(std::move(entry));
    }
    return found;
}

std::uint64_t leftover_bytes(const fs::path& path, const Entry& entry) {
    if (entry.type == EntryType::file) return entry.size;
    if (entry.type != EntryType::directory) return 0;
    std::uint64_t bytes = 0;
    std::error_code ec;
    std::size_t seen = 0;
    for (auto it = fs::recursive_directory_iterator(path, ec);
         !ec && it != fs::recursive_directory_iterator() && ++seen <= k_max_leftover_walk; it.increment(ec)) {
        if (it->is_regular_file(ec) && !it->is_symlink(ec)) bytes += it->file_size(ec);
    }
    return bytes;
}

std::vector<RepoScan> scan_cache(const fs::path& root) {
    std::vector<RepoScan> repos;
    visit_repos(root, [&](RepoScan repo) { repos.push_back(std::move(repo)); });
    return repos;
}

Snapshot scan_snapshot(const fs::path& snapshots_dir, const std::string& commit) {
    Walker walker(snapshots_dir);
    Snapshot snapshot{commit, false, {}, {}};
    struct stat st {};
    if (::lstat((snapshots_dir / commit).c_str(), &st) != 0) return snapshot;
    snapshot.is_directory = S_ISDIR(st.st_mode);
    snapshot.newest = modified_time(st);
    if (snapshot.is_directory) snapshot.entries = walker.walk(snapshots_dir / commit);
    for (const Entry& inner : snapshot.entries) snapshot.newest = std::max(snapshot.newest, inner.modified);
    return snapshot;
}

std::set<std::string> linked_blob_names(const fs::path& snapshots_dir, const std::set<std::string>& skip,
                                        const std::set<std::string>& skip_links) {
    Walker walker(snapshots_dir);
    std::set<std::string> out;
    for (const Entry& commit : walker.list(snapshots_dir).value_or(std::vector<Entry>{})) {
        if (commit.type != EntryType::directory || skip.count(commit.name) != 0) continue;
        for (const Entry& entry : walker.walk(snapshots_dir / commit.name)) {
            if (entry.type != EntryType::symlink || skip_links.count(commit.name + "/" + entry.name) != 0) continue;
            out.insert(fs::path(entry.link).filename().string());
        }
    }
    return out;
}

std::vector<std::string> part_variants(const Snapshot& area) {
    std::set<std::string> names;
    const std::string build = "build/";
    for (const Entry& entry : area.entries) {
        if (entry.type == EntryType::directory && entry.name.rfind(build, 0) == 0 &&
            entry.name.find('/', build.size()) == std::string::npos) {
            names.insert(entry.name.substr(build.size()));
        } else if (entry.type == EntryType::file && entry.name.find('/') == std::string::npos &&
                   entry.name.size() > 5 && entry.name.compare(entry.name.size() - 5, 5, ".json") == 0) {
            names.insert(entry.name.substr(0, entry.name.size() - 5));
        }
    }
    std::vector<std::string> out;
    for (const std::string& name : names) {
        if (cache::is_variant_name(name)) out.push_back(name);
    }
    return out;
}

namespace {

// The size of the blob a partial link names, when it is kernhub's link to
// a blob that is a regular file.
std::optional<std::uint64_t> partial_link_bytes(const Entry& entry, const std::map<std::string, const Entry*>& blobs) {
    if (entry.type != EntryType::symlink) return std::nullopt;
    const auto it = blobs.find(linked_etag(entry.name, entry.link, cache::LinkArea::partial));
    if (it == blobs.end() || it->second->type != EntryType::file) return std::nullopt;
    return it->second->size;
}

// The partial record of the variant parses and names only files linked in
// `area` to blobs of the recorded sizes.
bool part_recorded(const RepoScan& repo, const Snapshot& area, const std::string& variant,
                   const std::map<std::string, const Entry*>& blobs) {
    std::optional<cache::VariantRecord> record;
    try {
        record = cache::RepoCache(repo.folder.parent_path(), repo.type, repo.repo_id)
                     .read_variant(area.commit, variant, cache::LinkArea::partial);
    } catch (const Error&) {
        return false;
    }
    if (!record) return false;
    std::map<std::string, const Entry*> by_name;
    for (const Entry& entry : area.entries) by_name.emplace(entry.name, &entry);
    for (const RecordedFile& file : record->files) {
        const auto it = by_name.find("build/" + variant + "/" + file.path);
        if (it == by_name.end() || partial_link_bytes(*it->second, blobs) != file.size) return false;
    }
    return true;
}

}  // namespace

CachedPart describe_part(const RepoScan& repo, const Snapshot& area, const std::string& variant) {
    std::map<std::string, const Entry*> blobs;
    for (const Entry& blob : repo.blobs) blobs.emplace(blob.name, &blob);
    CachedPart part;
    part.folder = (repo.folder / ".kernhub" / "partial" / area.commit / "build" / variant).string();
    const std::string prefix = "build/" + variant + "/";
    for (const Entry& entry : area.entries) {
        if (entry.name.rfind(prefix, 0) != 0 || entry.type == EntryType::directory) continue;
        part.files.push_back(entry.name.substr(prefix.size()));
        part.size += partial_link_bytes(entry, blobs).value_or(0);
    }
    std::sort(part.files.begin(), part.files.end());
    part.recorded = part_recorded(repo, area, variant, blobs);
    const cache::RepoCache cache(repo.folder.parent_path(), repo.type, repo.repo_id);
    if (const auto listed = listed_files(cache, area.commit, prefix)) {
        part.listed =
            static_cast<std::size_t>(std::count_if(listed->begin(), listed->end(), [&](const std::string& path) {
                return !cache::is_python_bytecode(path.substr(prefix.size()));
            }));
    }
    part.stale = variant_whole(cache, area.commit, variant);
    return part;
}

bool variant_whole(const cache::RepoCache& cache, const std::string& commit, const std::string& variant) {
    std::optional<std::vector<RecordedFile>> recorded;
    try {
        recorded = cache.read_variant_files(commit, variant);
    } catch (const Error&) {
        return false;
    }
    if (!recorded || recorded->empty()) return false;
    return std::all_of(recorded->begin(), recorded->end(), [&](const RecordedFile& file) {
        try {
            const std::optional<std::string> etag = cache.linked_blob(commit, "build/" + variant + "/" + file.path);
            struct stat st {};
            return etag && ::lstat(cache.blob_path(*etag).c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
                   static_cast<std::uint64_t>(st.st_size) == file.size;
        } catch (const Error&) {
            return false;  // a path no record kernhub wrote holds
        }
    });
}

// The files of build/<variant>/ that the cache's listing of the commit
// names: kernhub's copy of the hub's listing, else huggingface_hub's
// trees/<commit>.json; nullopt when neither is there and readable.
std::optional<std::vector<std::string>> listed_files(const cache::RepoCache& cache, const std::string& commit,
                                                     const std::string& prefix) {
    std::vector<std::string> paths;
    try {
        if (const auto tree = cache.read_tree(commit)) {
            for (const hub::TreeEntry& entry : hub::parse_tree_page(*tree, "the cached listing")) {
                if (entry.is_file && entry.path.rfind(prefix, 0) == 0) paths.push_back(entry.path);
            }
            return paths;
        }
        if (const auto hf = cache.read_hf_tree(commit)) {
            const cache::HfTree listing = cache::parse_hf_tree(*hf, prefix);
            if (listing.status != cache::HfTree::Status::ok) return std::nullopt;
            for (const cache::HfTreeFile& file : listing.files) paths.push_back(file.path);
            return paths;
        }
    } catch (const Error&) {
        // An unreadable or malformed listing says nothing: the links decide.
    }
    return std::nullopt;
}

std::optional<std::vector<RecordedFile>> read_record(const RepoScan& repo, const std::string& commit,
                                                     const std::string& variant) {
    return cache::RepoCache(repo.folder.parent_path(), repo.type, repo.repo_id).read_variant_files(commit, variant);
}

}  // namespace kernhub::cacheadmin
