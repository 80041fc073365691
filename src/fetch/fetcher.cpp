#include "fetch/fetcher.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "cache/cache.hpp"
#include "cache/receipts.hpp"
#include "common/crash_point.hpp"
#include "common/hint.hpp"
#include "common/text.hpp"
#include "deptree/metadata.hpp"
#include "fetch/stream_check.hpp"
#include "kernhub/error.hpp"
#include "lockfile/lockfile.hpp"

namespace kernhub::fetch {

namespace {

constexpr const char* k_metadata = "metadata.json";

std::string variant_prefix(const std::string& variant) {
    return "build/" + variant + "/";
}

// Groups the files under build/<variant>/ into candidates, in listing order.
std::vector<select::Candidate> candidates_from(const std::vector<hub::TreeEntry>& listing) {
    std::vector<select::Candidate> out;
    std::map<std::string, std::size_t> index;
    for (const auto& entry : listing) {
        if (!entry.is_file || entry.path.rfind("build/", 0) != 0) continue;
        std::string rest = entry.path.substr(6);
        auto slash = rest.find('/');
        if (slash == std::string::npos || slash == 0) continue;
        std::string name = rest.substr(0, slash);
        if (is_python_bytecode(rest.substr(slash + 1))) continue;
        auto [it, inserted] = index.emplace(name, out.size());
        if (inserted) out.push_back(select::Candidate{name, {}});
        out[it->second].files.push_back(rest.substr(slash + 1));
    }
    return out;
}

std::vector<const hub::TreeEntry*> variant_entries(const std::vector<hub::TreeEntry>& listing,
                                                   const std::string& variant) {
    std::vector<const hub::TreeEntry*> out;
    const std::string prefix = variant_prefix(variant);
    for (const auto& entry : listing) {
        if (entry.is_file && entry.path.rfind(prefix, 0) == 0 &&
            !is_python_bytecode(entry.path.substr(prefix.size()))) {
            out.push_back(&entry);
        }
    }
    // metadata.json first: its digests check the files that follow.
    std::stable_sort(out.begin(), out.end(), [&](const hub::TreeEntry* a, const hub::TreeEntry* b) {
        return (a->path == prefix + k_metadata) > (b->path == prefix + k_metadata);
    });
    return out;
}

// The files this cache's own record of the variant names; nullopt when
// there is no usable record. A damaged or unreadable record only means
// "fetch again", never a failure.
std::optional<cache::VariantRecord> read_record(const cache::RepoCache& cache, const std::string& commit,
                                                const std::string& variant) {
    try {
        return cache.read_variant(commit, variant);
    } catch (const Error&) {
        return std::nullopt;  // verify everything instead
    }
}

// The variant as the record describes it, when every file the listing has
// is recorded with the listed size and still linked in the snapshot, and
// every file unpacked from one of its archives is still linked to the blob
// its recorded SHA-256 names (docs/cache-format.md, "Archive variants").
std::optional<FetchOutcome> outcome_from_record(const cache::RepoCache& cache, const std::string& commit,
                                                const std::string& variant, const std::vector<FetchedFile>& recorded,
                                                const std::vector<const hub::TreeEntry*>& entries) {
    const std::string prefix = variant_prefix(variant);
    // Keyed by path: a variant may list many files, and each is looked up once.
    std::unordered_map<std::string, const FetchedFile*> by_path;
    for (const FetchedFile& file : recorded) {
        if (file.archive.empty()) by_path.emplace(prefix + file.path, &file);
    }
    const auto listed =
        std::count_if(recorded.begin(), recorded.end(), [](const FetchedFile& f) { return f.archive.empty(); });
    if (static_cast<std::size_t>(listed) != entries.size()) return std::nullopt;
    std::unordered_set<std::string> listed_paths;
    for (const hub::TreeEntry* entry : entries) {
        listed_paths.insert(entry->path);
        // An LFS file's recorded SHA-256 is the listed one: a record that
        // disagrees is not trusted (the variant is verified again).
        const auto it = by_path.find(entry->path);
        const bool found = it != by_path.end() && it->second->size == entry->size &&
                           (!entry->is_lfs() || it->second->sha256 == entry->lfs_sha256);
        if (!found || !cache.snapshot_links_blob(commit, entry->path, entry->etag(), entry->size)) return std::nullopt;
    }
    for (const FetchedFile& file : recorded) {
        if (file.archive.empty()) continue;
        const bool from_listed_archive =
            select::is_variant_archive(file.archive) && listed_paths.count(prefix + file.archive) != 0;
        if (!from_listed_archive || file.sha256.size() != 64 || !cache::is_etag(file.sha256)) return std::nullopt;
        try {
            cache::check_relative_path(file.path);
            if (!cache.snapshot_links_blob(commit, prefix + file.path, file.sha256, file.size)) return std::nullopt;
        } catch (const Error&) {
            return std::nullopt;  // a record kernhub did not write: fetch again
        }
    }
    FetchOutcome outcome;
    outcome.commit = commit;
    outcome.variant = variant;
    outcome.variant_dir = cache.snapshot_dir(commit) / "build" / variant;
    outcome.files = recorded;
    return outcome;
}

// The part of the variant a load needs, as the partial record describes
// it, when every needed file is recorded with its listed size (and an LFS
// file with its listed SHA-256) and still linked in the partial area to
// its blob (docs/cache-format.md, "Partial variants"); else nullopt.
std::optional<FetchOutcome> part_from_record(const cache::RepoCache& cache, const std::string& commit,
                                             const std::string& variant, const std::vector<FetchedFile>& recorded,
                                             const std::vector<const hub::TreeEntry*>& part) {
    const std::string prefix = variant_prefix(variant);
    std::unordered_map<std::string, const FetchedFile*> by_path;
    for (const FetchedFile& file : recorded) {
        if (file.archive.empty()) by_path.emplace(prefix + file.path, &file);
    }
    FetchOutcome outcome;
    for (const hub::TreeEntry* entry : part) {
        const auto it = by_path.find(entry->path);
        const bool found = it != by_path.end() && it->second->size == entry->size &&
                           (!entry->is_lfs() || it->second->sha256 == entry->lfs_sha256);
        if (!found ||
            !cache.snapshot_links_blob(commit, entry->path, entry->etag(), entry->size, cache::LinkArea::partial)) {
            return std::nullopt;
        }
        outcome.files.push_back(*it->second);
    }
    outcome.commit = commit;
    outcome.variant = variant;
    outcome.variant_dir = cache.partial_dir(commit) / "build" / variant;
    outcome.partial = true;
    return outcome;
}

// The recorded files of `recorded` that the listing still agrees on
// (the size, and an LFS file's SHA-256), by repo path.
std::map<std::string, const FetchedFile*> agreeing_files(const std::string& variant,
                                                         const std::vector<FetchedFile>& recorded,
                                                         const std::vector<const hub::TreeEntry*>& entries) {
    std::unordered_map<std::string, const hub::TreeEntry*> listed;
    for (const hub::TreeEntry* e : entries) listed.emplace(e->path, e);
    std::map<std::string, const FetchedFile*> out;
    for (const FetchedFile& file : recorded) {
        if (!file.archive.empty()) continue;
        const std::string path = variant_prefix(variant) + file.path;
        const auto it = listed.find(path);
        const bool agrees = it != listed.end() && it->second->size == file.size &&
                            (!it->second->is_lfs() || it->second->lfs_sha256 == file.sha256);
        if (agrees) out.emplace(path, &file);
    }
    return out;
}

// A recorded signature vouches for the variant under `check` when it was
// verified against the same trusted root and policy.
bool signature_satisfies(const std::optional<cache::RecordedSignature>& recorded, const SignatureCheck& check) {
    return recorded && recorded->root_sha256 == check.root_sha256 &&
           recorded->policy_digest == policy_digest(check.policy);
}

}  // namespace

std::string repo_at(const hub::RepoRef& repo, const std::string& revision) {
    return repo.repo_id + "@" + revision;
}

// refs/<revision> follows the hub; rewritten only when it moved, so a warm
// fetch with no TTL does no write. With a TTL, every answer from the hub
// also records when it was asked for, after the ref (the record counts only
// while the ref holds its commit). A fetch that took the commit from a
// fresh record writes nothing: the record keeps the time of the question.
void Fetcher::update_ref(const cache::RepoCache& cache, const FetchRequest& request, const std::string& commit) {
    if (request.offline || is_commit_sha(request.revision)) return;
    // Not flushed: a ref lost to a power loss is resolved again.
    if (cache.read_ref(request.revision) != commit) {
        cache.write_ref(request.revision, commit, cache::Durability::rename_only);
    }
    if (request.ref_ttl_seconds > 0 && m_resolved_at) {
        write_side_data(
            "when " + repo_at(request.repo, request.revision) + " was resolved",
            [&] {
                cache.write_ref_resolution(request.revision, cache::RefResolution{commit, *m_resolved_at});
            },
            "the next run asks the hub for the commit again");
    }
}

void Fetcher::write_side_data(const std::string& what, const std::function<void()>& write, const std::string& cost) {
    try {
        write();
    } catch (const Error& e) {
        if (e.code() != ErrorCode::internal) throw;
        emit(Event::Kind::info, "could not record " + what + " in the cache (" + e.plain_message() + "); " + cost);
    }
}

std::string describe_rejections(const select::Selection& selection) {
    std::string out;
    for (const auto& rejection : selection.rejected) {
        out += (out.empty() ? "" : "; ") + rejection.variant + ": " + rejection.reason;
    }
    return out.empty() ? "the repo has no build variants" : out;
}

Fetcher::Fetcher(std::filesystem::path cache_root, hub::HubClient* client, EventSink* events)
    : m_root(std::move(cache_root)), m_client(client), m_events(events) {}

void Fetcher::emit(Event::Kind kind, const std::string& text, const std::string& path, std::uint64_t done,
                   std::uint64_t total, const std::string& repo) {
    if (m_events == nullptr) return;
    Event event;
    event.kind = kind;
    event.text = printable(text);
    event.path = printable(path);
    event.repo = printable(repo);
    event.done = done;
    event.total = total;
    m_events->on_event(event);
}

namespace {

std::int64_t unix_seconds(std::chrono::system_clock::time_point when) {
    return std::chrono::duration_cast<std::chrono::seconds>(when.time_since_epoch()).count();
}

}  // namespace

// Both times are whole seconds, rounded down: an age below the TTL in whole
// seconds is an age below the TTL, so a record is never used late. A time
// ahead of this clock (skew between hosts sharing the cache, or a file
// written to be trusted for ever) is not used at all.
std::optional<std::string> Fetcher::recently_resolved(const FetchRequest& request) const {
    cache::RepoCache cache(m_root, request.repo.type, request.repo.repo_id);
    std::optional<std::string> ref = cache.read_ref(request.revision);
    if (!ref) return std::nullopt;
    std::optional<cache::RefResolution> resolution = cache.read_ref_resolution(request.revision);
    // Another tool (huggingface_hub, a second kernhub) may have moved the
    // ref since: the time then says nothing about what the ref holds.
    if (!resolution || resolution->commit != *ref) return std::nullopt;
    const std::int64_t now = unix_seconds(m_client->clock().wall_now());
    if (resolution->resolved_at > now || now - resolution->resolved_at >= request.ref_ttl_seconds) return std::nullopt;
    return ref;
}

std::string Fetcher::resolve_commit(const FetchRequest& request) {
    m_resolved_at.reset();
    if (is_commit_sha(request.revision)) return request.revision;
    if (!request.commit.empty()) return request.commit;
    if (!request.offline) {
        if (request.ref_ttl_seconds > 0) {
            if (std::optional<std::string> commit = recently_resolved(request)) return *commit;
        }
        // Taken before the question: the answer is at least this fresh.
        const std::int64_t asked_at = unix_seconds(m_client->clock().wall_now());
        std::string commit = m_client->resolve_revision(request.repo, request.revision);
        m_resolved_at = asked_at;
        return commit;
    }
    cache::RepoCache cache(m_root, request.repo.type, request.repo.repo_id);
    if (auto commit = cache.read_ref(request.revision); commit && is_commit_sha(*commit)) return *commit;
    throw Error(ErrorCode::offline,
                repo_at(request.repo, request.revision) + " is not in the cache at " + m_root.string() +
                    "; offline mode is on: fetch it once while online",
                hint::action("fetch"));
}

std::optional<cache::VariantRecord> Fetcher::recorded_variant(const cache::RepoCache& cache, const std::string& commit,
                                                              const std::string& variant) {
    const std::string key = SideDataMemo::key(cache, commit) + '\n' + variant;
    if (m_memo != nullptr) {
        if (auto kept = m_memo->record(key)) return kept;
    }
    auto record = read_record(cache, commit, variant);
    if (record && m_memo != nullptr) m_memo->put_record(key, *record);
    return record;
}

VariantChoice Fetcher::choose(const FetchRequest& request) {
    // Nothing kernhub writes below (listing, ref, record) goes through a link.
    cache::RepoCache(m_root, request.repo.type, request.repo.repo_id).unlink_linked_folders();
    VariantChoice choice;
    try {
        choice.commit = resolve_commit(request);
        m_last_listing = listing(request, choice.commit);
    } catch (...) {
        // The gate's refusal says more than a listing that failed meanwhile.
        if (request.gate) request.gate->pass();
        throw;
    }
    if (request.gate) request.gate->pass();
    choice.candidates = candidates_from(*m_last_listing);
    std::optional<std::string> required;
    if (!request.required_file.empty()) required = request.required_file;
    if (!request.pins) {
        choice.selection = select::select_variant(request.host, choice.candidates, required);
        return choice;
    }
    // A lock decides which variants exist for this fetch.
    std::vector<select::Candidate> locked;
    std::vector<select::Rejection> unlocked;
    for (const auto& candidate : choice.candidates) {
        if (request.pins->count(candidate.name) != 0) {
            locked.push_back(candidate);
        } else {
            unlocked.push_back(select::Rejection{candidate.name, "not in the lock file"});
        }
    }
    choice.selection = select::select_variant(request.host, locked, required);
    for (auto& rejection : unlocked) choice.selection.rejected.push_back(std::move(rejection));
    return choice;
}

std::string listing_variant_hash(const std::vector<hub::TreeEntry>& listing, const std::string& variant) {
    const std::string prefix = variant_prefix(variant);
    std::vector<std::pair<std::string, digest::Bytes>> files;
    for (const auto& entry : listing) {
        if (!entry.is_file || entry.path.rfind(prefix, 0) != 0) continue;
        if (is_python_bytecode(entry.path.substr(prefix.size()))) continue;
        auto raw = digest::from_hex(entry.etag());
        if (!raw) throw Error(ErrorCode::verification, "the listing of " + entry.path + " has no usable hash");
        files.emplace_back(entry.path.substr(prefix.size()), std::move(*raw));
    }
    return lockfile::variant_hash(std::move(files));
}

// Before any byte is used, the listing must be what the lock pinned: the
// same files with the same sizes (and, for LFS files, the same SHA-256),
// or the same variant hash. Plain files are checked against their SHA-256
// pins while they stream.
static void check_listing_against_pins(const std::vector<hub::TreeEntry>& listing, const std::string& variant,
                                       const VariantPins& pins, const std::string& where, bool from_links) {
    const std::string prefix = variant_prefix(variant);
    auto fail = [&](const std::string& problem) {
        throw Error(ErrorCode::verification, where + " variant " + variant + ": " + problem +
                                                 "; the hub no longer serves what was locked (lock again only if the "
                                                 "change is expected)");
    };
    // A lock with per-file pins names the file that changed (plain files
    // while they stream); the variant hash, which cannot, is the check for
    // locks that have nothing else (kernels.lock up to 0.16).
    if (!pins.files) {
        std::string actual = pins.hash.empty() ? pins.hash : listing_variant_hash(listing, variant);
        if (actual != pins.hash) fail("the variant hash is " + actual + ", the lock file has " + pins.hash);
        return;
    }
    std::size_t listed = 0;
    for (const auto& entry : listing) {
        if (!entry.is_file || entry.path.rfind(prefix, 0) != 0) continue;
        const std::string relpath = entry.path.substr(prefix.size());
        if (is_python_bytecode(relpath)) continue;
        ++listed;
        auto pin = pins.files->find(relpath);
        if (pin == pins.files->end()) fail(relpath + " is on the hub but not in the lock file");
        if (pin->second.size != entry.size) {
            fail(relpath + " has " + std::to_string(entry.size) + " bytes, the lock file pins " +
                 std::to_string(pin->second.size));
        }
        if (entry.is_lfs() && entry.lfs_sha256 != pin->second.sha256) {
            fail(relpath + " has sha256 " + entry.lfs_sha256 + ", the lock file pins " + pin->second.sha256);
        }
    }
    if (listed != pins.files->size()) {
        std::unordered_set<std::string> listed_files;
        for (const hub::TreeEntry& e : listing) {
            if (e.is_file) listed_files.insert(e.path);
        }
        for (const auto& [relpath, pin] : *pins.files) {
            (void)pin;
            const bool found = listed_files.count(prefix + relpath) != 0;
            if (!found && from_links) {
                // Offline over links alone, a pinned file that is not
                // linked is simply not in the cache.
                throw Error(ErrorCode::offline, where + " variant " + variant + ": " + relpath +
                                                    " is not in the cache; prewarm once while online (offline "
                                                    "mode is on)");
            }
            if (!found) fail(relpath + " is in the lock file but not on the hub");
        }
    }
}

namespace {

// Why no variant was chosen, as the error for the case: a runtime to
// install, an offline cache without one, or no variant for this host.
[[noreturn]] void refuse_unchosen(const FetchRequest& request, const VariantChoice& choice, bool from_links) {
    // A variant that fits but whose runtime is missing is a load failure to
    // fix by installing the runtime, online or not.
    const bool runtime_missing =
        std::any_of(choice.selection.rejected.begin(), choice.selection.rejected.end(),
                    [](const select::Rejection& rejection) { return rejection.missing_runtime; });
    if (runtime_missing) {
        throw Error(ErrorCode::load,
                    "no build variant of " + repo_at(request.repo, request.revision) + " fits this host (" +
                        select::describe(request.host) + "): " + describe_rejections(choice.selection) + "; " +
                        choice.selection.runtime_problem +
                        "; or name a variant as the target to fetch it without the runtime",
                    hint::setting("targets"));
    }
    if (from_links) {
        throw Error(ErrorCode::offline,
                    "no cached build variant of " + repo_at(request.repo, request.revision) + " fits: " +
                        describe_rejections(choice.selection) + "; offline mode is on: fetch it once while online",
                    hint::action("fetch"));
    }
    std::string scope =
        request.host.targets.empty() ? "this host (" + select::describe(request.host) + ")" : "the requested targets";
    throw Error(ErrorCode::not_found,
                "no build variant of " + repo_at(request.repo, request.revision) + " fits " + scope + ": " +
                    describe_rejections(choice.selection) + "; name one of them as the target",
                hint::setting("targets"));
}

}  // namespace

FetchOutcome Fetcher::fetch(const FetchRequest& request) {
    VariantChoice choice = choose(request);
    if (!choice.selection.chosen) refuse_unchosen(request, choice, m_listing_source == ListingSource::snapshot);
    const std::string variant = *choice.selection.chosen;
    const std::string& commit = choice.commit;
    cache::RepoCache cache(m_root, request.repo.type, request.repo.repo_id);
    // Before anything here trusts the cached snapshot or names it in a ref:
    // a prune running meanwhile then keeps it, or has removed it already and
    // the checks below find it missing.
    cache.claim_snapshot(commit, request.cancel);
    auto entries = variant_entries(*m_last_listing, variant);
    const VariantPins* pins = request.pins ? &request.pins->at(variant) : nullptr;
    if (pins != nullptr) {
        check_listing_against_pins(*m_last_listing, variant, *pins, repo_at(request.repo, commit),
                                   m_listing_source == ListingSource::snapshot);
    }
    std::set<std::string> trusted;
    // With a lock, every byte is checked against it: the cache's own record
    // is not enough (it says what was verified, not what is on disk now), so
    // cached blobs are hashed again, as `prewarm --offline` promises.
    if (pins == nullptr && !request.reverify) {
        if (auto found = held_warm_or_part(request, cache, commit, variant, entries, trusted)) return *found;
    }
    // The whole variant goes into the snapshot.
    // A receipt of the kernels library goes before the first change and
    // again after the last one, so none covers files changing or a variant
    // held in part (ensure_file and unpacking drop it, too, before they
    // replace a damaged blob or link an unpacked file).
    const bool relinks = !variant_in_place(request, cache, commit, entries);
    if (relinks) drop_receipts(request, commit, variant);
    FetchOutcome outcome = download_and_unpack(request, cache, commit, variant, entries, trusted);
    if (relinks || outcome.files_downloaded > 0 || outcome.files_changed) drop_receipts(request, commit, variant);
    if (!request.required_file.empty() && !request.skip_lfs_downloads &&
        std::none_of(outcome.files.begin(), outcome.files.end(),
                     [&](const FetchedFile& f) { return f.path == request.required_file; })) {
        // Only an archive variant gets here: selection checked listed files.
        throw Error(ErrorCode::not_found, "variant " + variant + " of " + repo_at(request.repo, commit) +
                                              " has no file " + quoted_name(request.required_file) +
                                              ", listed or in its archives; check the registry's \"file\"");
    }
    // Links alone do not show whether a file is missing: such a variant is
    // returned but not recorded as complete; nor is one whose LFS files were
    // only described.
    // A lock that pins every file is a full listing of its own: the links
    // then do show that nothing is missing.
    const bool complete = m_listing_source != ListingSource::snapshot || (pins != nullptr && pins->files);
    if (complete && !request.skip_lfs_downloads) {
        write_side_data("variant " + variant + " of " + repo_at(request.repo, commit),
                        [&] { cache.write_variant_files(commit, variant, outcome.files, outcome.signature); });
        crash_point("recorded");
        clear_partial(request, cache, commit, variant);
    }
    update_ref(cache, request, commit);
    return outcome;
}

namespace {

// Whether .kernhub/partial/<commit>/ holds anything of the variant.
bool holds_part(const cache::RepoCache& cache, const std::string& commit, const std::string& variant) {
    const std::filesystem::path part = cache.partial_dir(commit);
    struct stat st {};
    return ::lstat((part / (variant + ".json")).c_str(), &st) == 0 ||
           ::lstat((part / "build" / variant).c_str(), &st) == 0;
}

}  // namespace

std::optional<FetchOutcome> Fetcher::held_warm_or_part(const FetchRequest& request, const cache::RepoCache& cache,
                                                       const std::string& commit, const std::string& variant,
                                                       const std::vector<const hub::TreeEntry*>& entries,
                                                       std::set<std::string>& trusted) {
    // A load of a variant the complete record vouches for reads the
    // snapshot, which no fetch removes: no partial-area lock to take.
    if (request.files_to_read) {
        if (auto warm = warm_outcome(request, cache, commit, variant, entries, trusted)) return warm;
    }
    // A load's, before it reads the complete record (again): a fetch
    // completing the variant removed the area before (its record is read
    // below) or waits.
    std::shared_ptr<cache::FileLock> hold = hold_partial(request, cache);
    std::optional<FetchOutcome> found = warm_or_part(request, cache, commit, variant, entries, trusted);
    if (found && found->partial) found->hold = std::move(hold);
    return found;
}

std::optional<FetchOutcome> Fetcher::warm_or_part(const FetchRequest& request, const cache::RepoCache& cache,
                                                  const std::string& commit, const std::string& variant,
                                                  const std::vector<const hub::TreeEntry*>& entries,
                                                  std::set<std::string>& trusted) {
    if (auto warm = warm_outcome(request, cache, commit, variant, entries, trusted)) {
        // A part that a fetch had to leave (a load held it) goes now.
        if (!request.files_to_read && holds_part(cache, commit, variant))
            clear_partial(request, cache, commit, variant);
        return warm;
    }
    // A load's part stays out of the snapshot, where the kernels library
    // would take it for a damaged variant (cache-format.md, "Partial variants").
    if (std::optional<std::set<std::string>> needed = part_to_fetch(request, variant, entries)) {
        return fetch_part(request, cache, commit, variant, entries, *needed, trusted);
    }
    // What a load verified earlier counts as the complete record does.
    trust_partial_record(cache, commit, variant, entries, trusted);
    return std::nullopt;
}

void Fetcher::drop_receipts(const FetchRequest& request, const std::string& commit, const std::string& variant) {
    for (const std::filesystem::path& path : cache::remove_receipts(m_root, request.repo.repo_id, commit, variant)) {
        emit(Event::Kind::info, "removed the kernels library's verification receipt " + path.string() + " of " +
                                    request.repo.repo_id + " variant " + variant +
                                    ": kernhub is changing the variant's files, so kernels hashes them again");
    }
}

bool Fetcher::variant_in_place(const FetchRequest& request, const cache::RepoCache& cache, const std::string& commit,
                               const std::vector<const hub::TreeEntry*>& entries) {
    return std::all_of(entries.begin(), entries.end(), [&](const hub::TreeEntry* entry) {
        return (request.skip_lfs_downloads && entry->is_lfs()) ||
               cache.snapshot_links_blob(commit, entry->path, entry->etag(), entry->size);
    });
}

// The variant from this cache's record when the record vouches for all of
// it (and for its signature under the request's policy); else nullopt, with
// `trusted` holding the recorded paths the listing still agrees on.
std::optional<FetchOutcome> Fetcher::warm_outcome(const FetchRequest& request, const cache::RepoCache& cache,
                                                  const std::string& commit, const std::string& variant,
                                                  const std::vector<const hub::TreeEntry*>& entries,
                                                  std::set<std::string>& trusted) {
    std::optional<cache::VariantRecord> recorded = recorded_variant(cache, commit, variant);
    if (!recorded) return std::nullopt;
    // With a policy, the record vouches for the variant only when it
    // holds a signature verified under this policy and trusted root;
    // otherwise the signature is verified again before any file is used.
    const bool signature_recorded = !request.signature || signature_satisfies(recorded->signature, *request.signature);
    if (signature_recorded) {
        if (auto warm = outcome_from_record(cache, commit, variant, recorded->files, entries)) {
            warm->signature = request.signature ? recorded->signature : std::nullopt;
            update_ref(cache, request, commit);
            return warm;
        }
    }
    // Trust a recorded path only where the listing still agrees on it.
    std::unordered_map<std::string, const hub::TreeEntry*> listed;
    for (const hub::TreeEntry* e : entries) listed.emplace(e->path, e);
    for (const auto& file : recorded->files) {
        const std::string path = variant_prefix(variant) + file.path;
        const auto it = listed.find(path);
        const bool agrees = it != listed.end() && it->second->size == file.size &&
                            (!it->second->is_lfs() || it->second->lfs_sha256 == file.sha256);
        if (agrees) trusted.insert(path);
    }
    return std::nullopt;
}

FetchOutcome Fetcher::download_and_unpack(const FetchRequest& request, const cache::RepoCache& cache,
                                          const std::string& commit, const std::string& variant,
                                          const std::vector<const hub::TreeEntry*>& entries,
                                          const std::set<std::string>& trusted, cache::LinkArea area) {
    try {
        FetchOutcome outcome = download_variant(request, commit, variant, entries, trusted, area);
        unpack_archives(request, entries, outcome);
        return outcome;
    } catch (const Error& e) {
        // A file that does not match the listing, or that the hub does not
        // have, may mean the listing was wrong (a hostile answer kept
        // earlier): forget it, so the next fetch asks the hub again instead
        // of failing the same way for good. A network error says nothing
        // about the listing.
        const bool listing_suspect = e.code() == ErrorCode::verification || e.code() == ErrorCode::not_found;
        if (listing_suspect && m_listing_source == ListingSource::hub) {
            if (m_memo != nullptr) m_memo->forget_listing(SideDataMemo::key(cache, commit));
            try {
                cache.remove_tree(commit);
            } catch (const Error&) {
                // A read-only cache keeps it; the error below is the news.
            }
        }
        throw;
    }
}

// Only after the complete record: a crash between the two leaves a whole
// variant and a stale partial area, never a part alone.
void Fetcher::clear_partial(const FetchRequest& request, const cache::RepoCache& cache, const std::string& commit,
                            const std::string& variant) {
    const std::string what =
        "the part of variant " + variant + " of " + repo_at(request.repo, commit) + " held for loads";
    write_side_data(
        "that " + what + " is done",
        [&] {
            if (!request.use_locks || !cache::flock_excludes(m_root))
                return cache.remove_partial_variant(commit, variant);
            const auto deadline =
                std::chrono::steady_clock::now() +
                (request.files_to_read ? std::chrono::seconds(0) : std::chrono::seconds(k_partial_clear_wait));
            for (bool said = false;; said = true) {
                if (const std::optional<cache::FileLock> lock = cache.try_lock_partial()) {
                    return cache.remove_partial_variant(commit, variant);
                }
                if (request.cancel != nullptr && request.cancel->load()) {
                    // The variant is complete and recorded: its ref is
                    // still written, and the part is left, not the fetch.
                    emit(Event::Kind::info, "interrupted while waiting for the loads reading " + what +
                                                "; its links under .kernhub/partial/ stay until a later fetch or "
                                                "cache prune removes them");
                    return;
                }
                if (std::chrono::steady_clock::now() >= deadline) {
                    emit(Event::Kind::info, "a load is still reading " + what +
                                                ", so its links under .kernhub/partial/ stay until a later "
                                                "fetch or cache prune removes them");
                    return;
                }
                if (!said) emit(Event::Kind::info, "waiting for the loads reading " + what + " to finish");
                std::this_thread::sleep_for(std::chrono::milliseconds(5));
            }
        },
        "its links under .kernhub/partial/ stay until a later fetch or cache prune removes them");
}

std::shared_ptr<cache::FileLock> Fetcher::hold_partial(const FetchRequest& request,
                                                       const cache::RepoCache& cache) const {
    if (!request.files_to_read || !request.use_locks || !cache::flock_excludes(m_root)) return nullptr;
    std::optional<cache::FileLock> held = cache.hold_partial(request.cancel);
    if (!held) return nullptr;
    return std::make_shared<cache::FileLock>(std::move(*held));
}

std::vector<const hub::TreeEntry*> Fetcher::listed_entries(const std::string& variant) const {
    return variant_entries(*m_last_listing, variant);
}

std::optional<std::set<std::string>> Fetcher::part_to_fetch(const FetchRequest& request, const std::string& variant,
                                                            const std::vector<const hub::TreeEntry*>& entries) const {
    // Links alone do not say what else the variant holds; a lock only
    // describes LFS files.
    if (!request.files_to_read || request.skip_lfs_downloads || m_listing_source == ListingSource::snapshot) {
        return std::nullopt;
    }
    const std::string prefix = variant_prefix(variant);
    std::vector<std::string> files;
    for (const hub::TreeEntry* entry : entries) {
        files.push_back(entry->path.substr(prefix.size()));
        // What a kind loads may come out of an archive, which only
        // unpacking shows.
        if (select::is_variant_archive(files.back())) return std::nullopt;
    }
    std::optional<std::set<std::string>> asked = request.files_to_read(variant, files);
    if (!asked) return std::nullopt;
    // metadata.json checks every other file through its digest, and under a
    // policy its signature comes first (docs/trust.md, "Signatures").
    asked->insert(k_metadata);
    if (request.signature) asked->insert(std::string(k_metadata) + ".sigstore");
    std::set<std::string> needed;
    for (const std::string& file : files) {
        if (asked->count(file) != 0) needed.insert(file);
    }
    if (needed.size() == files.size()) return std::nullopt;  // the whole variant: the snapshot takes it
    return needed;
}

void Fetcher::trust_partial_record(const cache::RepoCache& cache, const std::string& commit, const std::string& variant,
                                   const std::vector<const hub::TreeEntry*>& entries, std::set<std::string>& trusted) {
    std::optional<cache::VariantRecord> held;
    try {
        held = cache.read_variant(commit, variant, cache::LinkArea::partial);
    } catch (const Error&) {
        return;  // an unreadable record vouches for nothing
    }
    if (!held) return;
    for (const auto& [path, file] : agreeing_files(variant, held->files, entries)) {
        (void)file;
        trusted.insert(path);
    }
}

FetchOutcome Fetcher::fetch_part(const FetchRequest& request, const cache::RepoCache& cache, const std::string& commit,
                                 const std::string& variant, const std::vector<const hub::TreeEntry*>& entries,
                                 const std::set<std::string>& needed, std::set<std::string> trusted) {
    const std::string prefix = variant_prefix(variant);
    std::vector<const hub::TreeEntry*> part;
    for (const hub::TreeEntry* entry : entries) {
        if (needed.count(entry->path.substr(prefix.size())) != 0) part.push_back(entry);
    }
    std::optional<cache::VariantRecord> held;
    try {
        held = cache.read_variant(commit, variant, cache::LinkArea::partial);
    } catch (const Error&) {
        held.reset();  // unreadable: every needed file is verified again
    }
    std::map<std::string, const FetchedFile*> agreeing;
    if (held) {
        const bool signature_recorded = !request.signature || signature_satisfies(held->signature, *request.signature);
        if (signature_recorded) {
            if (auto warm = part_from_record(cache, commit, variant, held->files, part)) {
                warm->signature = request.signature ? held->signature : std::nullopt;
                update_ref(cache, request, commit);
                return *warm;
            }
        }
        agreeing = agreeing_files(variant, held->files, entries);
        for (const auto& [path, file] : agreeing) {
            (void)file;
            trusted.insert(path);
        }
    }
    FetchOutcome outcome =
        download_and_unpack(request, cache, commit, variant, part, trusted, cache::LinkArea::partial);
    // The record lists everything the area holds: these files, and those
    // an earlier load left that are still linked and agree with the listing.
    std::vector<FetchedFile> files = outcome.files;
    std::unordered_map<std::string, const hub::TreeEntry*> listed;
    for (const hub::TreeEntry* e : entries) listed.emplace(e->path, e);
    for (const auto& [path, file] : agreeing) {
        if (needed.count(file->path) != 0) continue;
        const hub::TreeEntry* entry = listed.at(path);
        if (cache.snapshot_links_blob(commit, path, entry->etag(), entry->size, cache::LinkArea::partial)) {
            files.push_back(*file);
        }
    }
    write_side_data("the part of variant " + variant + " of " + repo_at(request.repo, commit) + " a load fetched", [&] {
        cache.write_variant_files(commit, variant, files, outcome.signature, cache::LinkArea::partial);
    });
    crash_point("part-recorded");
    update_ref(cache, request, commit);
    return outcome;
}

cache::RecordedSignature Fetcher::signature_of(const FetchRequest& request, const VariantChoice& choice) {
    const std::string& variant = *choice.selection.chosen;
    cache::RepoCache cache(m_root, request.repo.type, request.repo.repo_id);
    if (auto recorded = recorded_variant(cache, choice.commit, variant)) {
        if (signature_satisfies(recorded->signature, *request.signature)) return *recorded->signature;
    }
    return verify_signature(request, choice.commit, variant, variant_entries(*m_last_listing, variant)).signature;
}

std::optional<std::string> Fetcher::metadata_of(const FetchRequest& request, const VariantChoice& choice) {
    const std::string& variant = *choice.selection.chosen;
    const std::vector<const hub::TreeEntry*> entries = variant_entries(*m_last_listing, variant);
    const std::string path = variant_prefix(variant) + k_metadata;
    auto it = std::find_if(entries.begin(), entries.end(), [&](const hub::TreeEntry* e) { return e->path == path; });
    if (it == entries.end()) return std::nullopt;
    const std::string where = "variant " + variant + " of " + request.repo.repo_id + "@" + choice.commit.substr(0, 12);
    std::set<std::string> damaged;
    try {
        return signed_file_bytes(request, choice.commit, where, **it, deptree::k_max_metadata_bytes,
                                 "k_max_metadata_bytes", damaged);
    } catch (const Error& e) {
        if (e.code() == ErrorCode::offline) return std::nullopt;
        throw;
    }
}

}  // namespace kernhub::fetch
