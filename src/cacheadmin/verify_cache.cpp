#include "cacheadmin/verify_cache.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "cache/cache.hpp"
#include "cache/receipts.hpp"
#include "cacheadmin/inventory.hpp"
#include "common/crash_point.hpp"
#include "common/text.hpp"
#include "digest/digest.hpp"
#include "kernhub/error.hpp"

namespace kernhub::cacheadmin {

namespace {

struct BlobState {
    bool ok = false;
    std::uint64_t size = 0;
    std::string sha256;
};

// The digest a blob's name claims (SHA-256 for 64 hex, git blob SHA-1 for
// 40), computed without following a symlink; `sha256` gets the content's
// SHA-256 either way, which variant records name.
std::string name_digest(const fs::path& path, const std::string& etag, std::string& sha256) {
    digest::Hasher sha(digest::Algorithm::sha256);
    std::optional<digest::GitBlobHasher> git;
    digest::read_chunks(
        path,
        [&](std::uint64_t size) {
            if (etag.size() == 40) git.emplace(size);
        },
        [&](const void* data, std::size_t size) {
            sha.update(data, size);
            if (git) git->update(data, size);
        },
        false);
    sha256 = digest::to_hex(sha.finish());
    return git ? git->finish_hex() : sha256;
}

// Removes a file, link or folder below the repo folder without following
// a link anywhere (cache::remove_beneath); a name already gone is fine.
void remove_entry(const fs::path& repo_folder, const fs::path& path) {
    try {
        cache::remove_beneath(repo_folder, path.lexically_relative(repo_folder));
    } catch (const Error& e) {
        throw Error(ErrorCode::internal,
                    "cannot remove the damaged " + path.string() + "; remove it by hand, then fetch again",
                    e.plain_message());
    }
}

std::string read_link_now(const fs::path& path) {
    std::error_code ec;
    fs::path target = fs::read_symlink(path, ec);
    return ec ? std::string() : target.string();
}

class RepoVerifier {
public:
    RepoVerifier(const RepoScan& repo, const VerifyOptions& options, CacheVerifyReport& report)
        : m_repo(repo), m_options(options), m_report(report) {}

    // Everything is judged before anything is removed, and a repair removes
    // the damaged variant records first: a record vouches for its files (a
    // fetch trusts the files it names without hashing them again), so at no
    // instant of a repair, even one killed halfway, does a record still
    // name a damaged file that the next fetch would keep.
    void run() {
        for (const Entry& blob : m_repo.blobs) check_blob(blob);
        for (const Snapshot& snapshot : m_repo.snapshots) check_snapshot(snapshot);
        for (const Record& record : m_repo.records) check_record(record);
        // A load reading the partial area holds its lock shared: what it is
        // making there is judged (and repaired) only once no load is.
        bool loads_reading = false;
        const std::optional<cache::FileLock> partial_guard = guard_partial_areas(loads_reading);
        for (const Snapshot& area : m_repo.partial_areas) {
            if (loads_reading) {
                list_parts(area);
            } else {
                check_partial_area(area);
            }
        }
        for (const Ref& ref : m_repo.refs) {
            if (ref.problem.empty()) continue;
            const fs::path path = m_repo.folder / "refs" / ref.revision;
            report(path, ref.problem, [this, path] { remove_entry(m_repo.folder, path); });
        }
        check_publisher();
        note_receipts();
        repair(m_record_repairs);
        repair(m_repairs);
    }

private:
    // The partial-area lock taken without waiting, when the repo has a
    // partial area and locks work; `busy` when a load holds it. A lock that
    // cannot be used (a cache this process may only read) guards nothing.
    std::optional<cache::FileLock> guard_partial_areas(bool& busy) const {
        busy = false;
        if (m_repo.partial_areas.empty() || !m_options.use_locks) return std::nullopt;
        try {
            std::optional<cache::FileLock> lock =
                cache::RepoCache(m_repo.folder.parent_path(), m_repo.type, m_repo.repo_id).try_lock_partial(false);
            busy = !lock;
            return lock;
        } catch (const Error&) {
            return std::nullopt;
        }
    }

    using Repairs = std::vector<std::pair<std::size_t, std::function<void()>>>;

    void report(const fs::path& path, const std::string& problem, std::function<void()> repair,
                bool is_record = false) {
        m_report.problems.push_back(CacheProblem{printable(path.string()), printable(problem), false});
        if (!m_options.repair) return;
        (is_record ? m_record_repairs : m_repairs).emplace_back(m_report.problems.size() - 1, std::move(repair));
    }

    // Each repair marks its problem repaired once done, so an interrupted
    // run reports what it fixed and what it left.
    void repair(const Repairs& repairs) {
        for (const auto& [problem, action] : repairs) {
            check_cancel();
            action();
            m_report.problems[problem].repaired = true;
            crash_point("repaired");
        }
    }

    // A damaged variant that the Python kernels library holds a receipt
    // for would be loaded by kernels without its hash: its first problem
    // says so, and a repair removes the receipt before anything else (the
    // receipt itself is kernels' data and no damage; docs/cache-format.md,
    // "Other tools' data").
    void note_receipts() {
        const fs::path root = m_repo.folder.parent_path();
        std::vector<std::pair<std::string, std::string>> covered;
        for (const auto& [variant, problem] : m_damaged_variants) {
            if (cache::remove_receipts(root, m_repo.repo_id, variant.first, variant.second, true).empty()) continue;
            m_report.problems[problem].problem +=
                "; the Python kernels library holds a verification receipt for variant " + printable(variant.second) +
                ", so it would load the variant without hashing it";
            covered.push_back(variant);
        }
        if (!m_options.repair || covered.empty()) return;
        for (const auto& [commit, variant] : covered) {
            cache::remove_receipts(root, m_repo.repo_id, commit, variant);
            crash_point("repaired");
        }
    }

    // The variant of a snapshot entry's name ("build/<variant>/..."), as a
    // damaged one, with the first problem found in it.
    void note_damage(const std::string& commit, const std::string& name) {
        const std::string prefix = "build/";
        const std::size_t end = name.find('/', prefix.size());
        if (name.rfind(prefix, 0) != 0 || end == std::string::npos) return;
        m_damaged_variants.emplace(std::make_pair(commit, name.substr(prefix.size(), end - prefix.size())),
                                   m_report.problems.size() - 1);
    }

    void check_cancel() const {
        if (m_options.cancel != nullptr && m_options.cancel->load()) {
            throw Error(ErrorCode::interrupted, "interrupted while verifying " + m_repo.folder.string());
        }
    }

    // The trusted-publisher answer kept with the repo (.kernhub/
    // publisher.json): one that does not read as kernhub writes it is
    // damaged (a fetch would only ask the hub again); a repair removes it.
    void check_publisher() {
        const cache::RepoCache cache(m_repo.folder.parent_path(), m_repo.type, m_repo.repo_id);
        const fs::path side = m_repo.folder / ".kernhub";
        std::error_code ec;
        if (fs::is_symlink(fs::symlink_status(side, ec))) {
            // Whatever it leads to is not this cache's; the link goes, never its target.
            report(side, "is a symbolic link where kernhub's side-data folder belongs",
                   [this, side] { remove_entry(m_repo.folder, side); });
            return;
        }
        const fs::path path = cache.publisher_path();
        if (!fs::exists(fs::symlink_status(path, ec))) return;
        const std::optional<cache::PublisherRecord> record = cache.read_publisher();
        const std::int64_t now =
            std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
                .count();
        if (record && record->checked_at <= now) return;
        report(path,
               record ? "is dated in the future, which no answer kernhub kept can be"
                      : "is not a trusted-publisher record kernhub wrote (a link, too large, or malformed)",
               [this, path] { remove_entry(m_repo.folder, path); });
    }

    // Why the blob is damaged, or empty when its content matches its name.
    std::string blob_damage(const fs::path& path, const std::string& etag, EntryType type, BlobState& state) {
        if (type == EntryType::symlink) return "is a symbolic link where a blob belongs";
        if (type != EntryType::file) return "is not a regular file";
        std::string actual = name_digest(path, etag, state.sha256);
        if (actual == etag) return {};
        return std::string("content does not match its name (its ") +
               (etag.size() == 40 ? "git blob SHA-1" : "SHA-256") + " is " + actual + ")";
    }

    void check_blob(const Entry& blob) {
        check_cancel();
        const fs::path path = m_repo.folder / "blobs" / blob.name;
        BlobState state;
        state.size = blob.size;
        ++m_report.blobs_checked;
        std::string damage = blob_damage(path, blob.name, blob.type, state);
        state.ok = damage.empty();
        if (!state.ok) report(path, damage, [this, etag = blob.name] { remove_blob(etag); });
        m_blobs[blob.name] = state;
    }

    // Under the blob's lock, as fetch replaces a blob; a fetch may have put a
    // good copy in place while it was hashed here, and that one stays.
    void remove_blob(const std::string& etag) {
        cache::RepoCache cache(m_repo.folder.parent_path(), m_repo.type, m_repo.repo_id);
        std::optional<cache::FileLock> lock;
        if (m_options.use_locks) lock.emplace(cache.lock_blob(etag, m_options.cancel));
        const fs::path path = cache.blob_path(etag);
        struct stat st {};
        if (::lstat(path.c_str(), &st) != 0) return;
        BlobState again;
        if (blob_damage(path, etag, entry_type_of(st), again).empty()) return;
        remove_entry(m_repo.folder, path);
    }

    static EntryType entry_type_of(const struct stat& st) {
        if (S_ISREG(st.st_mode)) return EntryType::file;
        if (S_ISLNK(st.st_mode)) return EntryType::symlink;
        return S_ISDIR(st.st_mode) ? EntryType::directory : EntryType::other;
    }

    void check_snapshot(const Snapshot& snapshot) {
        check_cancel();
        const fs::path dir = m_repo.folder / "snapshots" / snapshot.commit;
        if (!snapshot.is_directory) {
            report(dir, "is not a folder (a snapshot is a folder of links)",
                   [this, dir] { remove_entry(m_repo.folder, dir); });
            return;
        }
        for (const Entry& entry : snapshot.entries) {
            const fs::path path = dir / entry.name;
            if (entry.type == EntryType::other) {
                report(path, "is neither a link nor a file", [this, path] { remove_entry(m_repo.folder, path); });
                note_damage(snapshot.commit, entry.name);
            }
            if (entry.type != EntryType::symlink) continue;  // folders; files copied by tools without symlinks
            ++m_report.links_checked;
            std::string damage = link_damage(entry);
            if (damage.empty()) {
                m_linked[snapshot.commit + "/" + entry.name] = linked_etag(entry.name, entry.link);
                continue;
            }
            // Only the link that was judged: fetch may have replaced it since.
            report(path, damage, [this, path, link = entry.link] {
                if (read_link_now(path) == link) remove_entry(m_repo.folder, path);
            });
            note_damage(snapshot.commit, entry.name);
        }
    }

    std::string link_damage(const Entry& entry, cache::LinkArea area = cache::LinkArea::snapshot) {
        if (entry.link.empty()) return "is a link whose target cannot be read or is over k_max_link_bytes";
        const std::string etag = linked_etag(entry.name, entry.link, area);
        if (etag.empty()) return "links '" + entry.link + "', not the relative link into this repo's blobs/";
        const BlobState* blob = blob_now(etag);
        if (blob == nullptr) return "is dangling: blobs/" + etag + " is missing";
        if (!blob->ok) return "links the damaged blob blobs/" + etag;
        return {};
    }

    // What hashing found of blobs/<etag>: the scan lists blobs/ before the
    // links, so a blob a live fetch or load committed since (and linked) is
    // hashed now rather than taken for missing. Null when there is none.
    const BlobState* blob_now(const std::string& etag) {
        auto found = m_blobs.find(etag);
        if (found != m_blobs.end()) return &found->second;
        const fs::path path = m_repo.folder / "blobs" / etag;
        struct stat st {};
        if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return nullptr;
        BlobState state;
        state.size = static_cast<std::uint64_t>(st.st_size);
        state.ok = blob_damage(path, etag, EntryType::file, state).empty();
        ++m_report.blobs_checked;
        return &(m_blobs[etag] = state);
    }

    // The etag a record's file links now, when that link is good: a link a
    // live fetch or load made after the scan is judged as it is now.
    std::optional<std::string> good_link_now(const fs::path& link, const std::string& relpath, cache::LinkArea area) {
        struct stat st {};
        if (::lstat(link.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return std::nullopt;
        Entry entry;
        entry.name = relpath;
        entry.type = EntryType::symlink;
        entry.link = read_link_now(link);
        if (!link_damage(entry, area).empty()) return std::nullopt;
        return linked_etag(entry.name, entry.link, area);
    }

    // .kernhub/partial/<commit>/ (docs/cache-format.md, "Partial variants"):
    // each link as a snapshot's (with the partial area's one more "../"),
    // anything else under build/ is damage (kernhub keeps only links there),
    // and each partial record only against the links of the area. What the
    // variant lacks beyond them is not looked for: a part is no damage.
    void check_partial_area(const Snapshot& area) {
        check_cancel();
        const fs::path dir = m_repo.folder / ".kernhub" / "partial" / area.commit;
        if (!area.is_directory) {
            report(dir, "is not a folder (a partial area is a folder of links and records)",
                   [this, dir] { remove_entry(m_repo.folder, dir); });
            return;
        }
        for (const Entry& entry : area.entries) {
            if (entry.name.rfind("build/", 0) != 0 || entry.type == EntryType::directory) continue;
            const fs::path path = dir / entry.name;
            if (entry.type != EntryType::symlink) {
                report(path, "is not a link (kernhub keeps only links to blobs under .kernhub/partial/)",
                       [this, path] { remove_entry(m_repo.folder, path); });
                continue;
            }
            ++m_report.links_checked;
            std::string damage = link_damage(entry, cache::LinkArea::partial);
            if (damage.empty()) {
                m_partial_linked[area.commit + "/" + entry.name] =
                    linked_etag(entry.name, entry.link, cache::LinkArea::partial);
                continue;
            }
            report(path, damage, [this, path, link = entry.link] {
                if (read_link_now(path) == link) remove_entry(m_repo.folder, path);
            });
        }
        for (const std::string& variant : part_variants(area)) check_partial_record(area.commit, variant);
        list_parts(area);
    }

    void list_parts(const Snapshot& area) {
        for (const std::string& variant : part_variants(area)) {
            m_report.parts.push_back(
                HeldPart{m_repo.repo_id, m_repo.type, area.commit, variant, describe_part(m_repo, area, variant)});
        }
    }

    void check_partial_record(const std::string& commit, const std::string& variant) {
        const fs::path path = m_repo.folder / ".kernhub" / "partial" / commit / (variant + ".json");
        struct stat st {};
        if (::lstat(path.c_str(), &st) != 0) return;  // links alone: the next load hashes them
        ++m_report.records_checked;
        std::optional<cache::VariantRecord> record;
        try {
            record = cache::RepoCache(m_repo.folder.parent_path(), m_repo.type, m_repo.repo_id)
                         .read_variant(commit, variant, cache::LinkArea::partial);
        } catch (const Error&) {
            record.reset();
        }
        std::string damage = record ? "" : "is not a partial variant record kernhub can read";
        for (std::size_t i = 0; record && damage.empty() && i < record->files.size(); ++i) {
            const RecordedFile& file = record->files[i];
            const std::string relpath = "build/" + variant + "/" + file.path;
            const BlobState* blob =
                recorded_blob(m_partial_linked, commit, relpath,
                              m_repo.folder / ".kernhub" / "partial" / commit / relpath, cache::LinkArea::partial);
            if (blob == nullptr || blob->size != file.size || blob->sha256 != file.sha256) {
                damage = "names " + file.path + ", which is missing, damaged or different in the partial area";
            }
        }
        if (damage.empty()) return;
        report(
            path, damage, [this, path] { remove_entry(m_repo.folder, path); }, true);
    }

    void check_record(const Record& record) {
        ++m_report.records_checked;
        std::string damage = record_damage(record);
        if (!damage.empty()) {
            report(
                record.path, damage, [this, path = record.path] { remove_entry(m_repo.folder, path); }, true);
        }
    }

    // The blob a record's file links: from the scan, or, for a link the scan
    // did not find good, as the link is now (a fetch writes its record
    // after its links, possibly after the scan passed them).
    const BlobState* recorded_blob(const std::map<std::string, std::string>& linked, const std::string& commit,
                                   const std::string& relpath, const fs::path& link, cache::LinkArea area) {
        const auto found = linked.find(commit + "/" + relpath);
        if (found != linked.end()) return &m_blobs.at(found->second);
        const std::optional<std::string> etag = good_link_now(link, relpath, area);
        return etag ? blob_now(*etag) : nullptr;
    }

    std::string record_damage(const Record& record) {
        auto files = read_record(m_repo, record.commit, record.variant);
        if (!files) return "is not a variant record kernhub can read";
        for (const RecordedFile& file : *files) {
            const std::string relpath = "build/" + record.variant + "/" + file.path;
            const BlobState* blob =
                recorded_blob(m_linked, record.commit, relpath, m_repo.folder / "snapshots" / record.commit / relpath,
                              cache::LinkArea::snapshot);
            if (blob == nullptr || blob->size != file.size || blob->sha256 != file.sha256) {
                return "names " + file.path + ", which is missing, damaged or different in the snapshot";
            }
        }
        return {};
    }

    const RepoScan& m_repo;
    const VerifyOptions& m_options;
    CacheVerifyReport& m_report;
    std::map<std::string, BlobState> m_blobs;             // etag -> what hashing found
    std::map<std::string, std::string> m_linked;          // "<commit>/<relpath>" -> etag, good links only
    std::map<std::string, std::string> m_partial_linked;  // the same, in the partial areas
    Repairs m_record_repairs;                             // (index in m_report.problems, removal)
    // (commit, variant) -> index in m_report.problems of its first damage
    std::map<std::pair<std::string, std::string>, std::size_t> m_damaged_variants;
    Repairs m_repairs;
};

}  // namespace

CacheVerifyReport verify_cache(const fs::path& root, const VerifyOptions& options) {
    CacheVerifyReport report;
    report.root = root.string();
    try {
        for (const RepoScan& repo : scan_cache(root)) RepoVerifier(repo, options, report).run();
    } catch (const Error& error) {
        // Each problem is in the report once found, and marked repaired once
        // removed, so the report is exactly what was done before the stop.
        if (error.code() != ErrorCode::interrupted) throw;
        report.interrupted = true;
    }
    return report;
}

}  // namespace kernhub::cacheadmin
