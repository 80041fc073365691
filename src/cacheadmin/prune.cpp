#include "cacheadmin/prune.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <optional>
#include <vector>

#include "archive/archive.hpp"
#include "cache/cache.hpp"
#include "cache/receipts.hpp"
#include "common/hint.hpp"
#include "common/text.hpp"
#include "deptree/metadata.hpp"
#include "hub/hub_client.hpp"
#include "kernhub/error.hpp"

namespace kernhub::cacheadmin {

namespace {

constexpr const char* k_fresh = "modified within the last hour (k_prune_grace); a fetch may be using it";
constexpr const char* k_locked = "its blob lock is held: a fetch is downloading or linking it";

// Blob locks held at once while removing blobs, which bounds the descriptors
// prune keeps open; snapshots/ is walked again once per batch.
constexpr std::size_t k_prune_lock_batch = 256;
// Bounds on the walk for commit-pinned dependencies (dependency_pins).
constexpr std::size_t k_max_pinning_repos = 100000;
constexpr std::size_t k_max_pinning_variants = 1000;  // per snapshot

// Removal below the repo folder never follows a link, even one swapped in
// while prune runs (cache::remove_beneath).
void remove_tree(const fs::path& repo_folder, const fs::path& path) {
    cache::remove_beneath(repo_folder, path.lexically_relative(repo_folder));
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

void throw_if_cancelled(const PruneRequest& request, const fs::path& at) {
    if (request.cancel == nullptr || !request.cancel->load()) return;
    throw Error(ErrorCode::interrupted,
                "interrupted while pruning " + printable(at.string()) +
                    "; what was removed is gone and everything else is kept: prune again to finish",
                hint::action("cache.prune"));
}

// A leftover of a killed command: a temp file or an unpack folder below a
// repo's .kernhub/tmp, or an import's unpack folder at the root. A temp
// file has no lock: a process writes it for seconds to minutes, so one
// untouched for cache::k_stale_partial_age was left by a process that
// died. An unpack folder is locked by the process unpacking into it
// (archive::ExtractedTree): one whose lock is held stays, one whose lock is
// free goes after that age, or at once with --partials. Links inside go,
// never their targets; `base` is the folder removal stays below.
void prune_leftover(const fs::path& base, const fs::path& path, const Entry& entry, const PruneRequest& request,
                    PruneReport& report) {
    const auto keep = [&](const char* reason) { report.kept.push_back(PruneKept{printable(path.string()), reason}); };
    if (!entry_exists(path)) return;
    // Only folders archive::extract made carry its lock.
    const bool unpack_folder = entry.type == EntryType::directory && request.use_locks &&
                               path.filename().string().rfind(".kernhub-extract-", 0) == 0;
    int lock_fd = -1;
    if (unpack_folder) {
        // Also in a dry run: taking a folder's lock creates nothing.
        lock_fd = archive::lock_abandoned_unpack_folder(path);
        if (lock_fd < 0) return keep("a running process is unpacking into it (its folder lock is held)");
    }
    struct Closer {
        int fd;
        ~Closer() {
            if (fd >= 0) ::close(fd);
        }
    } closer{lock_fd};
    const bool at_once = request.partials && unpack_folder;
    if (!at_once && entry.modified > request.now - cache::k_stale_partial_age) {
        return keep(
            "a temporary file or unpack folder is taken for abandoned only after 24 hours "
            "(cache::k_stale_partial_age); prune's partials option removes an unpack folder no process holds at once");
    }
    const std::uint64_t bytes = leftover_bytes(path, entry);
    if (!request.dry_run) cache::remove_beneath(base, path.lexically_relative(base));
    report.removed.push_back(printable(path.string()));
    report.bytes += bytes;
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
                 "a ref does not hold a commit id, so every snapshot is kept; verifying the cache with repair removes "
                 "the ref");
        }
        // A dry run removes nothing, so the links of the snapshots it would
        // remove must not keep their blobs.
        std::set<std::string> gone;
        for (const Snapshot& snapshot : m_repo.snapshots) {
            check_cancel();
            bool named = !refs_readable || keep.count(snapshot.commit) != 0;
            if (!named && snapshot.is_directory && prune_snapshot(snapshot.commit) && m_request.dry_run) {
                gone.insert(snapshot.commit);
            }
        }
        // The partial areas next: what they stop linking is pruned below.
        for (const Snapshot& area : m_repo.partial_areas) {
            check_cancel();
            prune_partial_area(area, !refs_readable || keep.count(area.commit) != 0);
        }
        tidy_partial_folder();
        // Walked again after the snapshots were settled, every snapshot folder
        // there is now, so that one a fetch made since the scan counts too.
        // By the target's file name, whatever its form: a link another tool
        // wrote differently keeps its blob too.
        const std::set<std::string> linked = linked_names(gone);
        std::vector<const Entry*> unlinked;
        for (const Entry& blob : m_repo.blobs) {
            if (blob.type != EntryType::file && blob.type != EntryType::symlink) continue;  // verify reports those
            if (linked.count(blob.name) != 0) continue;
            if (fresh(blob.modified)) {
                kept(m_repo.folder / "blobs" / blob.name, k_fresh);
                continue;
            }
            unlinked.push_back(&blob);
        }
        for (std::size_t first = 0; first < unlinked.size(); first += k_prune_lock_batch) {
            check_cancel();
            const std::size_t last = std::min(unlinked.size(), first + k_prune_lock_batch);
            prune_blobs(std::vector<const Entry*>(unlinked.begin() + first, unlinked.begin() + last),
                        m_request.dry_run ? gone : std::set<std::string>{});
        }
        for (const Entry& partial : m_repo.partials) {
            check_cancel();
            prune_partial(partial);
        }
        for (const Entry& temp : m_repo.temps) {
            check_cancel();
            prune_temp(temp);
        }
        prune_publisher();
    }

    void check_cancel() const { throw_if_cancelled(m_request, m_repo.folder); }

private:
    bool fresh(Clock::time_point modified) const { return modified > m_request.now - k_prune_grace; }

    // The blobs a link names, in the snapshots (but those in `gone`) and in
    // the partial area a load links into (.kernhub/partial/<commit>/, the
    // same walk one folder deeper; docs/cache-format.md, "Partial
    // variants"): a blob only a load holds is in use too.
    std::set<std::string> linked_names(const std::set<std::string>& gone) const {
        std::set<std::string> linked = linked_blob_names(m_repo.folder / "snapshots", gone);
        if (is_real_directory(m_repo.folder / ".kernhub")) {
            // A dry run skips the partial links it would have removed.
            const std::set<std::string> partial =
                linked_blob_names(m_repo.folder / ".kernhub" / "partial", m_gone_areas, m_gone_links);
            linked.insert(partial.begin(), partial.end());
        }
        return linked;
    }

    // What prune_partial_area removes from one area: entries (records
    // before the links they name), and the links that stop counting.
    struct PartPlan {
        std::vector<fs::path> removals;
        std::set<std::string> gone_links;  // "<commit>/<relpath>"
        bool whole = false;                // the area of a commit nothing names
        const char* keep = nullptr;        // why nothing goes although it would
        bool tidy = false;                 // only empty folders are left
    };

    // .kernhub/partial/<commit>/ (docs/cache-format.md, "Partial variants").
    // A commit no ref or pin names loses its area once nothing in it is
    // fresh, as a snapshot does; otherwise a variant the snapshot now holds
    // whole loses its part, and so do links to missing blobs and records
    // naming a file that is not linked there to a blob of its size (the
    // record first: it must not outlive its links). Judged on the scan, then
    // done under the partial-area lock held exclusively (a load holds it
    // shared from before it reads a record there until it has opened its
    // files) and judged again on the area read anew under it.
    void prune_partial_area(const Snapshot& scanned, bool named) {
        const fs::path dir = m_repo.folder / ".kernhub" / "partial" / scanned.commit;
        const PartPlan first = plan_part(scanned, named);
        if (first.keep != nullptr) return kept(dir, first.keep);
        if (first.removals.empty() && !first.tidy) return;
        const std::optional<cache::FileLock> guard =
            m_request.use_locks ? m_cache.try_lock_partial(!m_request.dry_run) : std::optional<cache::FileLock>();
        if (m_request.use_locks && !guard) {
            return kept(dir, "a load is reading it (it holds the partial-area lock .locks/" + m_repo.folder_name +
                                 "/kernhub-partial.lock)");
        }
        const Snapshot area = scan_snapshot(dir.parent_path(), scanned.commit);
        if (!area.is_directory) return;
        const PartPlan plan = plan_part(area, named);
        if (plan.keep != nullptr) return kept(dir, plan.keep);
        for (const fs::path& path : plan.removals) remove_partial_entry(path);
        m_gone_links.insert(plan.gone_links.begin(), plan.gone_links.end());
        if (plan.whole) m_gone_areas.insert(area.commit);
        if (m_request.dry_run) return;
        for (const std::string& variant : part_variants(area)) ::rmdir((dir / "build" / variant).c_str());
        m_cache.remove_empty_partial_folders(area.commit);
    }

    PartPlan plan_part(const Snapshot& area, bool named) const {
        const fs::path dir = m_repo.folder / ".kernhub" / "partial" / area.commit;
        PartPlan plan;
        if (!area.is_directory) return plan;  // verify reports it
        const std::vector<std::string> variants = part_variants(area);
        plan.tidy = variants.empty();
        // Where locks do not exclude, a fresh part may be a load at work.
        if ((!named || !m_request.use_locks) && fresh(area.newest) && !variants.empty()) {
            plan.keep = k_fresh;
            return plan;
        }
        if (!named) {
            for (const std::string& variant : variants) plan.removals.push_back(dir / (variant + ".json"));
            plan.removals.push_back(dir);
            plan.whole = true;
            return plan;
        }
        for (const std::string& variant : variants) {
            const std::string prefix = "build/" + variant + "/";
            const bool whole = variant_whole(m_cache, area.commit, variant);
            if (whole || !part_record_holds(area, variant)) plan.removals.push_back(dir / (variant + ".json"));
            if (whole) plan.removals.push_back(dir / "build" / variant);
            for (const Entry& entry : area.entries) {
                if (entry.type != EntryType::symlink || entry.name.rfind(prefix, 0) != 0) continue;
                const std::string etag = linked_etag(entry.name, entry.link, cache::LinkArea::partial);
                const bool dangling = !etag.empty() && !entry_exists(m_cache.blob_path(etag));
                if (dangling && !whole) plan.removals.push_back(dir / entry.name);
                if (dangling || whole) plan.gone_links.insert(area.commit + "/" + entry.name);
            }
        }
        return plan;
    }

    // The partial record of the variant, when there is one, parses and
    // names only files linked in the area, as kernhub links them, to
    // existing blobs of the recorded sizes. True when there is none.
    bool part_record_holds(const Snapshot& area, const std::string& variant) const {
        const fs::path path = m_repo.folder / ".kernhub" / "partial" / area.commit / (variant + ".json");
        if (!entry_exists(path)) return true;
        std::optional<cache::VariantRecord> record;
        try {
            record = m_cache.read_variant(area.commit, variant, cache::LinkArea::partial);
        } catch (const Error&) {
            return false;
        }
        if (!record) return false;
        return std::all_of(record->files.begin(), record->files.end(), [&](const cache::RecordedFile& file) {
            try {
                const std::string relpath = "build/" + variant + "/" + file.path;
                const std::optional<std::string> etag =
                    m_cache.linked_blob(area.commit, relpath, cache::LinkArea::partial);
                return etag &&
                       m_cache.snapshot_links_blob(area.commit, relpath, *etag, file.size, cache::LinkArea::partial);
            } catch (const Error&) {
                return false;  // a path no record kernhub wrote holds
            }
        });
    }

    // Removes (or, in a dry run, reports) an entry of the partial area,
    // never through a link (parents_are_real) and never what a link names.
    void remove_partial_entry(const fs::path& path) {
        if (!entry_exists(path)) return;
        if (!parents_are_real(path)) return kept(path, "lies below a symbolic link; kernhub never removes through one");
        if (!m_request.dry_run) remove_tree(m_repo.folder, path);
        removed(path, 0);
    }

    // .kernhub/partial/ itself, once nothing is left in it.
    void tidy_partial_folder() {
        const fs::path base = m_repo.folder / ".kernhub" / "partial";
        if (m_request.dry_run || !m_repo.partial_areas.empty() || !is_real_directory(base)) return;
        const std::optional<cache::FileLock> guard =
            m_request.use_locks ? m_cache.try_lock_partial() : std::optional<cache::FileLock>();
        if (m_request.use_locks && !guard) return;
        ::rmdir(base.c_str());  // only when empty
    }

    void kept(const fs::path& path, const std::string& reason) {
        m_report.kept.push_back(PruneKept{printable(path.string()), reason});
    }

    void removed(const fs::path& path, std::uint64_t bytes) {
        m_report.removed.push_back(printable(path.string()));
        m_report.bytes += bytes;
    }

    // The trusted-publisher answer kept with the repo goes once it is
    // older than cache::k_publisher_ttl_seconds (a fetch no longer uses
    // it), dated in the future, or unreadable.
    void prune_publisher() {
        const fs::path path = m_cache.publisher_path();
        std::error_code ec;
        const auto status = fs::symlink_status(path, ec);
        if (!fs::exists(status)) return;
        if (!parents_are_real(path)) {
            kept(path, "lies below a symbolic link; kernhub never removes through one");
            return;
        }
        const std::int64_t now =
            std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
                .count();
        const std::optional<cache::PublisherRecord> record = m_cache.read_publisher();
        if (record && record->checked_at <= now && now - record->checked_at < cache::k_publisher_ttl_seconds) return;
        const std::uint64_t bytes = fs::is_regular_file(status) ? fs::file_size(path, ec) : 0;
        if (!m_request.dry_run) remove_tree(m_repo.folder, path);
        removed(path, ec ? 0 : bytes);
    }

    // The snapshot is walked again right before it goes, so links a fetch
    // added since the scan, or a claim (cache::RepoCache::claim_snapshot)
    // made since, keep it. Returns whether it was (or would be) removed.
    bool prune_snapshot(const std::string& commit) {
        // Exclusive against claim_snapshot: a process that marks this
        // snapshot in use (to name it in a ref, or to hand its path to a
        // caller) does so before or after this decision, never inside it.
        // Where locks do not work (use_locks) the claim's fresh time is the
        // guard, as for blobs.
        std::optional<cache::FileLock> guard;
        if (!m_request.dry_run && m_request.use_locks) guard.emplace(m_cache.lock_snapshots(m_request.cancel));
        const Snapshot now = scan_snapshot(m_repo.folder / "snapshots", commit);
        const fs::path dir = m_repo.folder / "snapshots" / commit;
        if (!now.is_directory) return false;
        if (fresh(now.newest)) {
            kept(dir, k_fresh);
            return false;
        }
        std::uint64_t bytes = 0;
        for (const Entry& entry : now.entries) bytes += entry.type == EntryType::file ? entry.size : 0;
        // The kernels library's receipts go before anything of the variants
        // they vouch for, so that kernels never skips its hash over a
        // snapshot half removed (docs/cache-format.md, "Other tools' data").
        for (const Entry& entry : now.entries) {
            const std::string prefix = "build/";
            if (entry.type != EntryType::directory || entry.name.rfind(prefix, 0) != 0 ||
                entry.name.find('/', prefix.size()) != std::string::npos) {
                continue;
            }
            for (const fs::path& receipt :
                 cache::remove_receipts(m_repo.folder.parent_path(), m_repo.repo_id, commit,
                                        entry.name.substr(prefix.size()), m_request.dry_run)) {
                removed(receipt, 0);
            }
        }
        // The record goes first: a record must never outlive the links it names.
        const fs::path record = m_repo.folder / ".kernhub" / "variants" / commit;
        const fs::path tree = m_repo.folder / ".kernhub" / "trees" / (commit + ".json");
        for (const fs::path& path : {record, dir, tree}) {
            if (!entry_exists(path)) continue;
            if (!parents_are_real(path)) {
                kept(path, "lies below a symbolic link; kernhub never removes through one");
                continue;
            }
            if (!m_request.dry_run) remove_tree(m_repo.folder, path);
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

    // Removes unlinked blobs the way a fetch cannot race: a fetch links a
    // blob only while holding its lock (Fetcher::ensure_file), so once this
    // holds the locks of the whole batch, a walk of snapshots/ shows every
    // link that will ever point to them, until the locks are released. A
    // busy blob is kept; so is one linked since the first walk.
    void prune_blobs(const std::vector<const Entry*>& batch, const std::set<std::string>& gone) {
        std::vector<cache::FileLock> locks;
        locks.reserve(batch.size());
        std::vector<const Entry*> held;
        for (const Entry* blob : batch) {
            if (m_request.use_locks) {
                // A dry run creates no lock file; a missing one counts as free.
                auto lock = m_cache.try_lock_blob(blob->name, !m_request.dry_run);
                if (!lock) {
                    kept(m_repo.folder / "blobs" / blob->name, k_locked);
                    continue;
                }
                locks.push_back(std::move(*lock));
            }
            held.push_back(blob);
        }
        if (held.empty()) return;
        const std::set<std::string> linked = linked_names(gone);
        for (const Entry* blob : held) {
            if (linked.count(blob->name) != 0) continue;
            const fs::path path = m_repo.folder / "blobs" / blob->name;
            auto modified = modified_now(path);
            if (!modified) continue;  // gone meanwhile
            if (fresh(*modified)) {
                kept(path, k_fresh);
                continue;
            }
            if (!m_request.dry_run) remove_tree(m_repo.folder, path);
            removed(path, blob->type == EntryType::file ? blob->size : 0);
        }
    }

    void prune_partial(const Entry& partial) {
        if (partial.type != EntryType::file) return;
        const fs::path path = m_repo.folder / "blobs" / partial.name;
        // --partials: the blob lock alone decides (a live download holds it).
        const bool at_once = m_request.partials && m_request.use_locks;
        if (!at_once && fresh(partial.modified)) return kept(path, k_fresh);
        if (!m_request.use_locks && partial.modified > m_request.now - cache::k_stale_partial_age) {
            return kept(path,
                        "file locks do not work on this cache's filesystem (or KERNHUB_NO_FLOCK is set), so a partial "
                        "download is taken for abandoned only after 24 hours (cache::k_stale_partial_age)");
        }
        // A live download holds its blob's lock for as long as it writes.
        under_blob_lock(path, partial.name.substr(0, partial.name.find('.')), [&] {
            if (!entry_exists(path)) return;
            if (!m_request.dry_run) remove_tree(m_repo.folder, path);
            removed(path, partial.size);
        });
    }

    // The folders from the repo folder down to `path`'s parent are real
    // folders, not links that lead elsewhere.
    bool parents_are_real(const fs::path& path) const {
        for (fs::path dir = path.parent_path(); dir != m_repo.folder && dir.has_relative_path();
             dir = dir.parent_path()) {
            if (!is_real_directory(dir)) return false;
        }
        return true;
    }

    void prune_temp(const Entry& temp) {
        const fs::path path = m_repo.folder / ".kernhub" / "tmp" / temp.name;
        if (!parents_are_real(path)) return;
        prune_leftover(m_repo.folder, path, temp, m_request, m_report);
    }

    const RepoScan& m_repo;
    const PruneRequest& m_request;
    PruneReport& m_report;
    cache::RepoCache m_cache;
    // What the partial areas lost (or, in a dry run, would lose): commits
    // whose whole area goes, and links "<commit>/<relpath>".
    std::set<std::string> m_gone_areas;
    std::set<std::string> m_gone_links;
};

// Whether the cache holds the variant a receipt names in full: its folder
// snapshots/<commit>/build/<variant> is a real folder, in the kernels or
// the models folder of the repo, that holds at least one file and no link
// that does not lead to a file (a blob removed from under it), and, where
// the cache has a listing of the commit, every file it lists. nullopt when
// the receipt's location is not one the cache could hold at all (a repo id,
// commit or variant that would not make a safe path): such a receipt is
// left alone.
std::optional<bool> variant_in_full(const fs::path& root, const cache::Receipt& receipt) {
    std::optional<cache::RepoFolder> folder;
    try {
        folder = cache::parse_repo_folder(cache::repo_folder_name(RepoType::kernel, receipt.repo_id));
    } catch (const Error&) {
        return std::nullopt;  // a repo id no cache folder can be named by ("../x")
    }
    if (!folder || folder->repo_id != receipt.repo_id || !is_commit_sha(receipt.commit) ||
        !cache::is_variant_name(receipt.variant)) {
        return std::nullopt;
    }
    for (RepoType type : {RepoType::kernel, RepoType::model}) {
        const fs::path repo = root / cache::repo_folder_name(type, receipt.repo_id);
        const fs::path snapshots = repo / "snapshots";
        if (!is_real_directory(repo) || !is_real_directory(snapshots)) continue;
        const Snapshot snapshot = scan_snapshot(snapshots, receipt.commit);
        if (!snapshot.is_directory || !is_real_directory(snapshots / receipt.commit / "build")) continue;
        const std::string prefix = "build/" + receipt.variant + "/";
        if (!is_real_directory(snapshots / receipt.commit / "build" / receipt.variant)) continue;
        bool any = false;
        bool whole = true;
        for (const Entry& entry : snapshot.entries) {
            // Bytecode Python wrote beside the package is no file of the variant.
            if (entry.name.rfind(prefix, 0) != 0 || cache::is_python_bytecode(entry.name.substr(prefix.size()))) {
                continue;
            }
            if (entry.type == EntryType::symlink) {
                std::error_code ec;
                whole = whole && fs::is_regular_file(snapshots / receipt.commit / entry.name, ec);
            }
            any = any || entry.type == EntryType::file || entry.type == EntryType::symlink;
        }
        if (!any || !whole) continue;
        const cache::RepoCache cache(root, type, receipt.repo_id);
        if (const auto listed = listed_files(cache, receipt.commit, prefix)) {
            whole = std::all_of(listed->begin(), listed->end(), [&](const std::string& path) {
                std::error_code ec;
                return fs::is_regular_file(snapshots / receipt.commit / path, ec);
            });
        }
        if (whole) return true;
    }
    return false;
}

// After every repo: the receipts whose variant the cache no longer holds in
// full (prune removed it above, or it was gone before, or a receipt kernels
// wrote while prune removed its variant). Receipts of live variants, and
// everything else in kernels' stores, stay.
void prune_receipts(const fs::path& root, const PruneRequest& request, PruneReport& report) {
    const cache::ReceiptScan scan = cache::scan_receipts(root);
    for (const std::string& why : scan.over_limit) {
        report.kept.push_back(PruneKept{printable((root / cache::k_receipts_folder).string()), why});
    }
    const std::vector<cache::Receipt>& receipts = scan.receipts;
    std::set<std::string> done;  // a variant has a receipt in each store; both go at once
    for (const cache::Receipt& receipt : receipts) {
        throw_if_cancelled(request, root);
        if (!done.insert(receipt.path.filename().string()).second) continue;
        const std::optional<bool> live = variant_in_full(root, receipt);
        if (!live || *live) continue;
        for (const fs::path& path :
             cache::remove_receipts(root, receipt.repo_id, receipt.commit, receipt.variant, request.dry_run)) {
            report.removed.push_back(printable(path.string()));
            report.bytes += path == receipt.path ? receipt.size : 0;
        }
    }
}

}  // namespace

KeptCommits dependency_pins(const fs::path& root) {
    KeptCommits pins;
    std::error_code ec;
    std::size_t repos = 0;
    for (fs::directory_iterator repo(root, ec), end; !ec && repo != end; repo.increment(ec)) {
        if (++repos > k_max_pinning_repos) break;
        if (!cache::parse_repo_folder(repo->path().filename().string())) continue;
        std::error_code snap_ec;
        for (fs::directory_iterator snapshot(repo->path() / "snapshots", snap_ec), snap_end;
             !snap_ec && snapshot != snap_end; snapshot.increment(snap_ec)) {
            std::error_code build_ec;
            std::size_t variants = 0;
            for (fs::directory_iterator variant(snapshot->path() / "build", build_ec), variant_end;
                 !build_ec && variant != variant_end && ++variants <= k_max_pinning_variants;
                 variant.increment(build_ec)) {
                std::string text;
                const cache::ReadStatus status =
                    cache::read_file_into(variant->path() / "metadata.json", text, deptree::k_max_metadata_bytes + 1);
                if (status.error != 0) continue;
                try {
                    for (const deptree::KernelDependency& dep :
                         deptree::parse_variant_metadata(text, repo->path().filename().string()).depends) {
                        if (!is_commit_sha(dep.revision)) continue;
                        pins[cache::repo_folder_name(RepoType::kernel, dep.repo_id)].insert(dep.revision);
                    }
                } catch (const Error&) {
                    // Malformed metadata pins nothing; a fetch refuses it anyway.
                }
            }
        }
    }
    return pins;
}

PruneReport prune_cache(const fs::path& root, const PruneRequest& given) {
    PruneReport report;
    report.dry_run = given.dry_run;
    // A dependency pinned by commit id has no ref of its own: what the
    // cached variants pin is kept as a ref's commit is.
    PruneRequest request = given;
    for (auto& [folder, commits] : dependency_pins(root)) request.keep[folder].insert(commits.begin(), commits.end());
    try {
        throw_if_cancelled(request, root);
        visit_repos(root, [&](const RepoScan& repo) {
            throw_if_cancelled(request, repo.folder);
            RepoPruner(repo, request, report).run();
        });
        for (const Entry& entry : root_leftovers(root)) {
            throw_if_cancelled(request, root);
            prune_leftover(root, root / entry.name, entry, request, report);
        }
        prune_receipts(root, request, report);
    } catch (const Error& error) {
        // Every entry is reported once it is gone, so what the report holds
        // is exactly what was removed before the stop.
        if (error.code() != ErrorCode::interrupted) throw;
        report.interrupted = true;
    }
    return report;
}

PruneReport prune_scanned(const std::vector<RepoScan>& repos, const PruneRequest& request) {
    PruneReport report;
    report.dry_run = request.dry_run;
    for (const RepoScan& repo : repos) {
        throw_if_cancelled(request, repo.folder);
        RepoPruner(repo, request, report).run();
    }
    return report;
}

}  // namespace kernhub::cacheadmin
