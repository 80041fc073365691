// Archive variants (docs/cache-format.md, "Archive variants"): a variant's
// .tar.gz/.tgz/.tar.zst/.tar.xz files, verified like any file, are unpacked
// next to the variant's other files. Each unpacked file becomes a blob named
// by its SHA-256 with a snapshot link, so the snapshot keeps the layout that
// huggingface_hub and `cache verify` expect and nothing unverified is ever
// visible.
#include <filesystem>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "archive/archive.hpp"
#include "cache/cache.hpp"
#include "common/text.hpp"
#include "digest/digest.hpp"
#include "fetch/fetcher.hpp"
#include "kernhub/error.hpp"
#include "select/variant.hpp"

namespace kernhub::fetch {

namespace fs = std::filesystem;

namespace {

// "lib/" for "lib/x.tar.gz", "" at the variant's top: an archive unpacks
// into the folder it sits in.
std::string folder_of(const std::string& relpath) {
    const auto slash = relpath.rfind('/');
    return slash == std::string::npos ? std::string() : relpath.substr(0, slash + 1);
}

// Every folder `path` lies in: "a", "a/b" for "a/b/c".
std::vector<std::string> parents_of(const std::string& path) {
    std::vector<std::string> out;
    for (auto slash = path.find('/'); slash != std::string::npos; slash = path.find('/', slash + 1)) {
        out.push_back(path.substr(0, slash));
    }
    return out;
}

archive::ExtractionPolicy policy_for(const ArchiveLimits& limits) {
    archive::ExtractionPolicy policy;
    policy.allow_symlinks = false;  // hardlinks, devices and FIFOs are never extracted
    policy.max_entries = limits.max_entries;
    policy.max_path_bytes = limits.max_path_bytes;
    if (limits.max_bytes != 0) {
        // One cap replaces the ratio rule.
        policy.max_total_bytes = limits.max_bytes;
        policy.max_entry_bytes = limits.max_bytes;
        policy.max_ratio = 0;
        policy.ratio_floor_bytes = limits.max_bytes;
    }
    return policy;
}

// The archive module's refusal in the words of a fetch: the archive named by
// its place in the repo rather than its blob, and an exceeded cap by the
// setting that raises it.
Error reworded(const Error& e, const fs::path& blob, const std::string& label) {
    std::string text = e.plain_message();
    const std::string blob_text = printable(blob.string());
    if (auto at = text.find(blob_text); at != std::string::npos) text.replace(at, blob_text.size(), label);
    static const std::pair<const char*, const char*> k_settings[] = {
        {"max_entries limit", "KERNHUB_ARCHIVE_MAX_ENTRIES"},   {"max_total_bytes limit", "KERNHUB_ARCHIVE_MAX_BYTES"},
        {"max_entry_bytes limit", "KERNHUB_ARCHIVE_MAX_BYTES"}, {"max_ratio limit", "KERNHUB_ARCHIVE_MAX_BYTES"},
        {"max_path_bytes limit", "KERNHUB_ARCHIVE_MAX_PATH"},
    };
    for (const auto& [limit, setting] : k_settings) {
        if (text.find(limit) == std::string::npos) continue;
        const std::string hint = " (" + std::string(setting) + " raises it for an archive you trust)";
        const auto tail = text.find("; nothing from it was kept");
        text.insert(tail == std::string::npos ? text.size() : tail, hint);
        break;
    }
    return Error(e.code(), text, e.hint());
}

// Names the variant already uses: its files and the folders they sit in.
struct TakenNames {
    std::set<std::string> files;
    std::set<std::string> folders;

    void add_file(const std::string& path) {
        files.insert(path);
        for (auto& parent : parents_of(path)) folders.insert(std::move(parent));
    }
    void add_folder(const std::string& path) {
        folders.insert(path);
        for (auto& parent : parents_of(path)) folders.insert(std::move(parent));
    }
    // Why an unpacked entry at `path` would collide; "" when it would not.
    std::string collision(const std::string& path, bool is_file) const {
        if (files.count(path) != 0) return "has the name of the variant's file " + quoted_name(path);
        if (is_file && folders.count(path) != 0)
            return "is a file where the variant has the folder " + quoted_name(path);
        for (const auto& parent : parents_of(path)) {
            if (files.count(parent) != 0) return "would lie under the variant's file " + quoted_name(parent);
        }
        return {};
    }
};

// Makes blobs/<sha256> hold `source` (moved there), or keeps the blob
// already there once it is shown to hold those bytes. Called under the
// blob's lock where locks work.
// `before_change` runs before a damaged blob is replaced.
void place_blob(const cache::RepoCache& cache, const std::string& sha256, const fs::path& source, bool locking,
                const std::function<void()>& before_change) {
    if (cache.adopt_blob(sha256, source)) return;
    std::error_code ec;
    const fs::path blob = cache.blob_path(sha256);
    if (fs::is_regular_file(fs::symlink_status(blob, ec)) && digest::sha256_file_hex(blob) == sha256) return;
    // A damaged blob under this name: replaced while holding its lock;
    // without one the rename of a good copy by another process wins.
    if (!locking) {
        throw Error(ErrorCode::verification,
                    "the cached blob " + blob.string() + " does not match its name; remove it and fetch again");
    }
    before_change();
    cache.remove_blob(sha256);
    if (!cache.adopt_blob(sha256, source)) {
        throw Error(ErrorCode::internal, "could not place " + blob.string() + "; check the cache's permissions");
    }
}

// An archive unpacked into its private temp folder, checked, not yet visible.
struct Unpacked {
    std::string archive;  // relative to the variant directory
    std::string base;     // the folder it unpacks into
    archive::ExtractedTree tree;
};

fs::path make_staging(const cache::RepoCache& cache) {
    fs::path staging = cache.staging_dir();
    std::error_code ec;
    fs::create_directories(staging, ec);
    if (ec) {
        throw Error(ErrorCode::internal, "cannot create " + staging.string() + ": " + ec.message() + "; " +
                                             cache::refusal_advice(staging, ec.value(), "check permissions"));
    }
    return staging;
}

// Blobs first, then links, then (in fetch) the record: a crash leaves
// verified blobs and links, and no record, so the next fetch unpacks
// again and finds them in place. `before_change` runs before the first
// blob or link of the variant changes (it removes the kernels library's
// receipts of the variant).
void place_unpacked(const FetchRequest& request, const cache::RepoCache& cache, bool locking,
                    const std::vector<Unpacked>& unpacked, FetchOutcome& outcome,
                    const std::function<void()>& before_change) {
    const auto changing = [&] {
        if (!outcome.files_changed) before_change();
        outcome.files_changed = true;
    };
    const std::string prefix = "build/" + outcome.variant + "/";
    for (const auto& part : unpacked) {
        for (const auto& item : part.tree.entries()) {
            if (item.type != archive::EntryType::file) continue;  // folders come with the links
            // Each file costs fsyncs; a Ctrl-C must not wait for them all.
            if (request.cancel != nullptr && request.cancel->load()) {
                throw Error(ErrorCode::interrupted,
                            "interrupted while placing the files of " + part.archive + "; run the command again");
            }
            const fs::path source = part.tree.root() / item.path;
            const std::string sha256 = digest::sha256_file_hex(source);
            const std::uint64_t size = fs::file_size(source);
            const std::string path = part.base + item.path;
            std::optional<cache::FileLock> lock;
            if (locking) lock.emplace(cache.lock_blob(sha256, request.cancel));
            if (!cache.snapshot_links_blob(outcome.commit, prefix + path, sha256, size)) changing();
            place_blob(cache, sha256, source, locking, changing);
            cache.link_snapshot(outcome.commit, prefix + path, sha256);
            outcome.files.push_back(FetchedFile{path, size, sha256, part.archive});
        }
    }
}

}  // namespace

void Fetcher::unpack_archives(const FetchRequest& request, const std::vector<const hub::TreeEntry*>& entries,
                              FetchOutcome& outcome) {
    // `lock` only describes LFS files: an archive may not be on disk.
    if (request.skip_lfs_downloads) return;
    const std::string prefix = "build/" + outcome.variant + "/";
    std::vector<const hub::TreeEntry*> archives;
    for (const hub::TreeEntry* entry : entries) {
        if (select::is_variant_archive(entry->path.substr(prefix.size()))) archives.push_back(entry);
    }
    if (archives.empty()) return;
    cache::RepoCache cache(m_root, request.repo.type, request.repo.repo_id);
    TakenNames taken;
    for (const auto& file : outcome.files) taken.add_file(file.path);
    const fs::path staging = make_staging(cache);
    // Every archive is unpacked and checked before any of it becomes
    // visible: a refusal leaves only the private temp folders, which the
    // trees remove.
    std::vector<Unpacked> unpacked;
    unpacked.reserve(archives.size());
    for (const hub::TreeEntry* entry : archives) {
        const std::string relpath = entry->path.substr(prefix.size());
        const std::string base = folder_of(relpath);
        const std::string label = request.repo.repo_id + "@" + outcome.commit.substr(0, 12) + ":" + entry->path;
        emit(Event::Kind::info, "unpacking " + label);
        archive::ExtractionPolicy policy = policy_for(request.archive_limits);
        policy.entry_rule = [&](const archive::Entry& item) {
            const std::string path = prefix + base + item.path;
            if (std::string problem = cache::path_name_problem(path); !problem.empty()) {
                return "unpacks to " + quoted_name(path) + ", which " + problem;
            }
            return taken.collision(base + item.path, item.type == archive::EntryType::file);
        };
        const fs::path blob = cache.blob_path(entry->etag());
        try {
            unpacked.push_back(Unpacked{relpath, base, archive::extract(blob, staging, policy, request.cancel)});
        } catch (const Error& e) {
            if (e.code() == ErrorCode::verification) throw reworded(e, blob, label);
            throw;
        }
        for (const auto& item : unpacked.back().tree.entries()) {
            if (item.type == archive::EntryType::file) {
                taken.add_file(base + item.path);
            } else {
                taken.add_folder(base + item.path);
            }
        }
    }
    place_unpacked(request, cache, request.use_locks && cache::flock_excludes(m_root), unpacked, outcome,
                   [&] { drop_receipts(request, outcome.commit, outcome.variant); });
}

}  // namespace kernhub::fetch
