#include "cache/prune.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <optional>
#include <vector>

#include "common/text.hpp"
#include "kernhub/error.hpp"
#include "store/cache.hpp"

namespace kernhub::cache {

namespace {

constexpr const char* k_fresh = "modified within the last hour (k_prune_grace); a fetch may be using it";
constexpr const char* k_locked = "its blob lock is held: a download of it is in progress";

[[noreturn]] void fail_remove(const fs::path& path, int err) {
    throw Error(ErrorCode::internal,
                "cannot remove " + path.string() + ": " + std::strerror(err) + "; check permissions on the cache");
}

void remove_tree(const fs::path& path) {
    std::error_code ec;
    fs::remove_all(path, ec);  // removes links inside, never their targets
    if (ec) fail_remove(path, ec.value());
}

void remove_file(const fs::path& path) {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) fail_remove(path, errno);
}

bool entry_exists(const fs::path& path) {
    struct stat st {};
    return ::lstat(path.c_str(), &st) == 0;
}

std::optional<Clock::time_point> modified_now(const fs::path& path) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) return std::nullopt;
    auto since_epoch = std::chrono::seconds(st.st_mtim.tv_sec) + std::chrono::nanoseconds(st.st_mtim.tv_nsec);
    return Clock::time_point(std::chrono::duration_cast<Clock::duration>(since_epoch));
}

class RepoPruner {
public:
    RepoPruner(const RepoScan& repo, const PruneRequest& request, PruneReport& report)
        : m_repo(repo),
          m_request(request),
          m_report(report),
          m_cache(repo.folder.parent_path(), repo.type, repo.repo_id) {}

    void run() {
        std::set<std::string> keep;
        if (auto it = m_request.keep.find(m_repo.folder_name); it != m_request.keep.end()) keep = it->second;
        bool refs_readable = true;
        for (const Ref& ref : m_repo.refs) {
            if (ref.commit.empty()) refs_readable = false;
            keep.insert(ref.commit);
        }
        if (!refs_readable) {
            kept(m_repo.folder / "refs",
                 "a ref does not hold a commit id, so every snapshot is kept; run kernhub cache verify --repair");
        }
        std::vector<std::string> staying;
        for (const Snapshot& snapshot : m_repo.snapshots) {
            bool named = !refs_readable || keep.count(snapshot.commit) != 0;
            if (named || !snapshot.is_directory || !prune_snapshot(snapshot.commit)) staying.push_back(snapshot.commit);
        }
        // Walked again after the snapshots were settled, so that a link a
        // fetch made meanwhile still keeps its blob. By the target's file
        // name, whatever its form: a link another tool wrote differently
        // keeps its blob too.
        std::set<std::string> linked;
        for (const std::string& commit : staying) {
            for (const Entry& entry : scan_snapshot(m_repo.folder / "snapshots", commit).entries) {
                if (entry.type == EntryType::symlink) linked.insert(fs::path(entry.link).filename().string());
            }
        }
        for (const Entry& blob : m_repo.blobs) {
            if (linked.count(blob.name) == 0) prune_blob(blob);
        }
        for (const Entry& partial : m_repo.partials) prune_partial(partial);
    }

private:
    bool fresh(Clock::time_point modified) const { return modified > m_request.now - k_prune_grace; }

    void kept(const fs::path& path, const std::string& reason) {
        m_report.kept.push_back(PruneKept{printable(path.string()), reason});
    }

    void removed(const fs::path& path, std::uint64_t bytes) {
        m_report.removed.push_back(printable(path.string()));
        m_report.bytes += bytes;
    }

    // The snapshot is walked again right before it goes, so links a fetch
    // added since the scan keep it. Returns whether it was (or would be)
    // removed.
    bool prune_snapshot(const std::string& commit) {
        const Snapshot now = scan_snapshot(m_repo.folder / "snapshots", commit);
        const fs::path dir = m_repo.folder / "snapshots" / commit;
        if (!now.is_directory) return false;
        if (fresh(now.newest)) {
            kept(dir, k_fresh);
            return false;
        }
        std::uint64_t bytes = 0;
        for (const Entry& entry : now.entries) bytes += entry.type == EntryType::file ? entry.size : 0;
        // The record goes first: a record must never outlive the links it names.
        const fs::path record = m_repo.folder / ".kernhub" / "variants" / commit;
        const fs::path tree = m_repo.folder / ".kernhub" / "trees" / (commit + ".json");
        for (const fs::path& path : {record, dir, tree}) {
            if (!entry_exists(path)) continue;
            if (!m_request.dry_run) remove_tree(path);
            removed(path, path == dir ? bytes : 0);
        }
        return true;
    }

    // Runs `remove` while holding the blob's lock, the one fetch takes to
    // write, continue or replace that blob; keeps `path` when a live process
    // holds it. Where locks do not exclude there is nothing to hold.
    void under_blob_lock(const fs::path& path, const std::string& etag, const std::function<void()>& remove) {
        if (!m_request.use_locks) return remove();
        auto lock = m_cache.try_lock_blob(etag, !m_request.dry_run);
        if (!lock) return kept(path, k_locked);
        remove();
    }

    void prune_blob(const Entry& blob) {
        if (blob.type != EntryType::file && blob.type != EntryType::symlink) return;  // verify reports those
        const fs::path path = m_repo.folder / "blobs" / blob.name;
        if (fresh(blob.modified)) return kept(path, k_fresh);
        under_blob_lock(path, blob.name, [&] {
            auto modified = modified_now(path);
            if (!modified) return;  // gone meanwhile
            if (fresh(*modified)) return kept(path, k_fresh);
            if (!m_request.dry_run) remove_file(path);
            removed(path, blob.type == EntryType::file ? blob.size : 0);
        });
    }

    void prune_partial(const Entry& partial) {
        if (partial.type != EntryType::file) return;
        const fs::path path = m_repo.folder / "blobs" / partial.name;
        if (fresh(partial.modified)) return kept(path, k_fresh);
        if (!m_request.use_locks && partial.modified > m_request.now - store::k_stale_partial_age) {
            return kept(path,
                        "file locks do not work on this cache's filesystem (or KERNHUB_NO_FLOCK is set), so a partial "
                        "download is taken for abandoned only after 24 hours (store::k_stale_partial_age)");
        }
        // A live download holds its blob's lock for as long as it writes.
        under_blob_lock(path, partial.name.substr(0, partial.name.find('.')), [&] {
            if (!entry_exists(path)) return;
            if (!m_request.dry_run) remove_file(path);
            removed(path, partial.size);
        });
    }

    const RepoScan& m_repo;
    const PruneRequest& m_request;
    PruneReport& m_report;
    store::RepoCache m_cache;
};

}  // namespace

PruneReport prune_cache(const fs::path& root, const PruneRequest& request) {
    PruneReport report;
    report.dry_run = request.dry_run;
    for (const RepoScan& repo : scan_cache(root)) RepoPruner(repo, request, report).run();
    return report;
}

}  // namespace kernhub::cache
