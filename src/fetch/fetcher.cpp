#include "fetch/fetcher.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <unordered_map>

#include "cache/cache.hpp"
#include "common/crash_point.hpp"
#include "common/hint.hpp"
#include "common/text.hpp"
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

std::string repo_at(const hub::RepoRef& repo, const std::string& revision) {
    return repo.repo_id + "@" + revision;
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
// its recorded SHA-256 names (docs/ARCHITECTURE.md, "Archive variants").
std::optional<FetchOutcome> outcome_from_record(const cache::RepoCache& cache, const std::string& commit,
                                                const std::string& variant, const std::vector<FetchedFile>& recorded,
                                                const std::vector<const hub::TreeEntry*>& entries) {
    const std::string prefix = variant_prefix(variant);
    const auto listed =
        std::count_if(recorded.begin(), recorded.end(), [](const FetchedFile& f) { return f.archive.empty(); });
    if (static_cast<std::size_t>(listed) != entries.size()) return std::nullopt;
    for (const hub::TreeEntry* entry : entries) {
        // An LFS file's recorded SHA-256 is the listed one: a record that
        // disagrees is not trusted (the variant is verified again).
        bool found = std::any_of(recorded.begin(), recorded.end(), [&](const FetchedFile& f) {
            return f.archive.empty() && prefix + f.path == entry->path && f.size == entry->size &&
                   (!entry->is_lfs() || f.sha256 == entry->lfs_sha256);
        });
        if (!found || !cache.snapshot_links_blob(commit, entry->path, entry->etag(), entry->size)) return std::nullopt;
    }
    for (const FetchedFile& file : recorded) {
        if (file.archive.empty()) continue;
        const bool from_listed_archive = select::is_variant_archive(file.archive) &&
                                         std::any_of(entries.begin(), entries.end(), [&](const hub::TreeEntry* e) {
                                             return e->path == prefix + file.archive;
                                         });
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

// A recorded signature vouches for the variant under `check` when it was
// verified against the same trusted root and policy.
bool signature_satisfies(const std::optional<cache::RecordedSignature>& recorded, const SignatureCheck& check) {
    return recorded && recorded->root_sha256 == check.root_sha256 &&
           recorded->policy_digest == policy_digest(check.policy);
}

}  // namespace

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

// Without any listing, a snapshot another tool filled is described by its
// links. The blob name is the hub's hash, so the files can still be verified,
// but nothing shows which files are missing.
static std::vector<hub::TreeEntry> listing_from_snapshot(const cache::RepoCache& cache, const std::string& commit) {
    std::vector<hub::TreeEntry> entries;
    for (const auto& file : cache.list_snapshot(commit, "build")) {
        hub::TreeEntry entry;
        entry.path = file.relpath;
        entry.is_file = true;
        entry.size = file.size;
        if (file.etag.size() == 64) {
            entry.lfs_sha256 = file.etag;
        } else if (file.etag.size() == 40) {
            entry.oid = file.etag;
        } else {
            continue;  // not a link into blobs/: cannot be verified
        }
        entries.push_back(std::move(entry));
    }
    return entries;
}

static void check_listing(std::vector<hub::TreeEntry>& entries, const std::string& what);

// kernhub's copy of the hub's listing; nullopt when absent or damaged:
// unreadable, or refused by check_listing (a duplicated or unsafe path). A
// damaged copy only means "list again", never a fetch that fails for good.
// It holds only build/ files since the hub's answer is filtered as it is
// parsed; an older or foreign copy is filtered the same way (its size is
// capped by k_max_listing_bytes).
static std::optional<std::vector<hub::TreeEntry>> kernhub_listing(const cache::RepoCache& cache,
                                                                  const std::string& commit, std::size_t max_bytes) {
    try {
        auto text = cache.read_tree(commit, max_bytes);
        if (!text) return std::nullopt;
        hub::PageFilter filter;
        filter.files_only = true;
        filter.keep_prefix = "build/";
        std::vector<hub::TreeEntry> entries;
        hub::parse_tree_page_into(*text, cache.folder().string(), filter, entries);
        check_listing(entries, "the cached listing");
        return entries;
    } catch (const Error&) {
        return std::nullopt;
    }
}

// huggingface_hub's listing of the commit, used offline only: online the
// hub's own answer wins over a file anyone could have edited. nullopt when
// absent, unreadable or not in a format kernhub understands.
static std::optional<std::vector<hub::TreeEntry>> hf_listing(const cache::RepoCache& cache, const std::string& commit,
                                                             std::size_t max_bytes) {
    try {
        auto text = cache.read_hf_tree(commit, max_bytes);
        if (!text) return std::nullopt;
        auto entries = parse_hf_tree_cache(*text);
        if (entries) check_listing(*entries, "huggingface_hub's cached listing");
        return entries;
    } catch (const Error&) {
        return std::nullopt;
    }
}

// Every path of a listing is a safe relative path, and a path listed twice
// names the same thing both times: one entry is kept. Two different answers
// for one path (pagination that overlaps while a branch moves, or a hostile
// hub) would make which file is verified depend on order, so the listing is
// refused (verification, exit 4), as unsafe names are.
static void check_listing(std::vector<hub::TreeEntry>& entries, const std::string& what) {
    std::unordered_map<std::string, std::size_t> first;
    first.reserve(entries.size());
    std::vector<hub::TreeEntry> unique;
    unique.reserve(entries.size());
    for (auto& entry : entries) {
        cache::check_relative_path(entry.path);
        if (std::string problem = cache::path_name_problem(entry.path); !problem.empty()) {
            throw Error(ErrorCode::verification, what + " names the file " + quoted_name(entry.path) + ", which " +
                                                     problem + "; kernhub does not keep such a name");
        }
        // Ids a blob will be named by: well-formed before anything keeps them.
        if (entry.is_file) cache::check_etag(entry.etag());
        auto [it, inserted] = first.emplace(entry.path, unique.size());
        if (inserted) {
            unique.push_back(std::move(entry));
            continue;
        }
        const hub::TreeEntry& kept = unique[it->second];
        if (kept.is_file != entry.is_file || kept.size != entry.size || kept.oid != entry.oid ||
            kept.lfs_sha256 != entry.lfs_sha256) {
            throw Error(ErrorCode::verification, what + " lists " + entry.path +
                                                     " twice with different contents; the hub's answer is "
                                                     "inconsistent: try again, or report it to the hub");
        }
    }
    entries = std::move(unique);
}

void SideDataMemo::forget_listing(const std::string& key) {
    std::lock_guard<std::mutex> lock(m_mutex);
    m_listings.erase(key);
}

SideDataMemo::Listing SideDataMemo::listing(const std::string& key) const {
    std::lock_guard<std::mutex> lock(m_mutex);
    auto it = m_listings.find(key);
    return it == m_listings.end() ? nullptr : it->second;
}

void SideDataMemo::put_listing(const std::string& key, Listing listing) {
    std::lock_guard<std::mutex> lock(m_mutex);
    if (m_listings.size() < k_max_memo_entries) m_listings.emplace(key, std::move(listing));
}

std::optional<cache::VariantRecord> SideDataMemo::record(const std::string& key) const {
    std::lock_guard<std::mutex> lock(m_mutex);
    auto it = m_records.find(key);
    if (it == m_records.end()) return std::nullopt;
    return it->second;
}

void SideDataMemo::put_record(const std::string& key, const cache::VariantRecord& record) {
    std::lock_guard<std::mutex> lock(m_mutex);
    if (m_records.size() < k_max_memo_entries) m_records.emplace(key, record);
}

namespace {

// The memo key of a commit of one repo in one cache.
std::string memo_key(const cache::RepoCache& cache, const std::string& commit) {
    return cache.folder().string() + '\n' + commit;
}

}  // namespace

// Order of preference: kernhub's copy of the hub listing, then online the
// hub; offline huggingface_hub's cached tree and as a last resort the
// snapshot links. Only the hub's listing is kept in the memo: the others are
// read again each time, as another tool may complete them.
SideDataMemo::Listing Fetcher::listing(const FetchRequest& request, const std::string& commit) {
    cache::RepoCache cache(m_root, request.repo.type, request.repo.repo_id);
    m_listing_source = ListingSource::hub;
    const std::string key = memo_key(cache, commit);
    if (m_memo != nullptr) {
        if (SideDataMemo::Listing kept = m_memo->listing(key)) {
            // The cache may have been wiped since (`kernhub cache clean`,
            // rm -rf): put the listing back so later processes, offline
            // ones too, find it.
            if (!cache.has_tree(commit)) {
                write_side_data("the listing of " + repo_at(request.repo, commit),
                                [&] { cache.write_tree(commit, hub::tree_to_json(*kept)); });
            }
            return kept;
        }
    }
    // A cached listing is read up to the cap a hub's answer has.
    const std::size_t max_bytes =
        std::max(cache::k_max_listing_bytes, m_client != nullptr ? m_client->limits().max_listing_bytes : 0);
    std::optional<std::vector<hub::TreeEntry>> entries = kernhub_listing(cache, commit, max_bytes);
    bool from_hub = entries.has_value();
    if (!entries && request.offline) {
        entries = hf_listing(cache, commit, max_bytes);
        if (entries) m_listing_source = ListingSource::hf_tree;
    }
    if (!entries && request.offline) {
        entries = listing_from_snapshot(cache, commit);
        if (entries->empty()) {
            throw Error(ErrorCode::offline,
                        repo_at(request.repo, commit) + " has no cached listing under " + m_root.string() +
                            "; offline mode is on: fetch it once while online",
                        hint::action("fetch"));
        }
        m_listing_source = ListingSource::snapshot;
    }
    if (!entries) {
        entries = m_client->list_tree(request.repo, commit, "build");
        check_listing(*entries, "the listing of " + repo_at(request.repo, commit));
        write_side_data("the listing of " + repo_at(request.repo, commit),
                        [&] { cache.write_tree(commit, hub::tree_to_json(*entries)); });
        from_hub = true;
    } else {
        check_listing(*entries, "the cached listing of " + repo_at(request.repo, commit));
    }
    auto listing = std::make_shared<const std::vector<hub::TreeEntry>>(std::move(*entries));
    if (from_hub && m_memo != nullptr) m_memo->put_listing(key, listing);
    return listing;
}

std::optional<cache::VariantRecord> Fetcher::recorded_variant(const cache::RepoCache& cache, const std::string& commit,
                                                              const std::string& variant) {
    const std::string key = memo_key(cache, commit) + '\n' + variant;
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
    choice.commit = resolve_commit(request);
    m_last_listing = listing(request, choice.commit);
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
        for (const auto& [relpath, pin] : *pins.files) {
            (void)pin;
            const std::string wanted = prefix + relpath;
            bool found = std::any_of(listing.begin(), listing.end(),
                                     [&](const hub::TreeEntry& e) { return e.is_file && e.path == wanted; });
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

FetchOutcome Fetcher::fetch(const FetchRequest& request) {
    VariantChoice choice = choose(request);
    // A variant that fits but whose runtime is missing is a load failure to
    // fix by installing the runtime, online or not.
    const bool runtime_missing =
        std::any_of(choice.selection.rejected.begin(), choice.selection.rejected.end(),
                    [](const select::Rejection& rejection) { return rejection.missing_runtime; });
    if (!choice.selection.chosen && runtime_missing) {
        throw Error(ErrorCode::load,
                    "no build variant of " + repo_at(request.repo, request.revision) + " fits this host (" +
                        select::describe(request.host) + "): " + describe_rejections(choice.selection) + "; " +
                        choice.selection.runtime_problem +
                        "; or name a variant as the target to fetch it without the runtime",
                    hint::setting("targets"));
    }
    if (!choice.selection.chosen && m_listing_source == ListingSource::snapshot) {
        throw Error(ErrorCode::offline,
                    "no cached build variant of " + repo_at(request.repo, request.revision) + " fits: " +
                        describe_rejections(choice.selection) + "; offline mode is on: fetch it once while online",
                    hint::action("fetch"));
    }
    if (!choice.selection.chosen) {
        std::string scope = request.host.targets.empty() ? "this host (" + select::describe(request.host) + ")"
                                                         : "the requested targets";
        throw Error(ErrorCode::not_found,
                    "no build variant of " + repo_at(request.repo, request.revision) + " fits " + scope + ": " +
                        describe_rejections(choice.selection) + "; name one of them as the target",
                    hint::setting("targets"));
    }
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
    std::optional<cache::VariantRecord> recorded;
    if (pins == nullptr && !request.reverify) recorded = recorded_variant(cache, commit, variant);
    if (recorded) {
        // With a policy, the record vouches for the variant only when it
        // holds a signature verified under this policy and trusted root;
        // otherwise the signature is verified again before any file is used.
        const bool signature_recorded =
            !request.signature || signature_satisfies(recorded->signature, *request.signature);
        if (signature_recorded) {
            if (auto warm = outcome_from_record(cache, commit, variant, recorded->files, entries)) {
                warm->signature = request.signature ? recorded->signature : std::nullopt;
                update_ref(cache, request, commit);
                return *warm;
            }
        }
        // Trust a recorded path only where the listing still agrees on it.
        for (const auto& file : recorded->files) {
            const std::string path = variant_prefix(variant) + file.path;
            bool agrees = std::any_of(entries.begin(), entries.end(), [&](const hub::TreeEntry* e) {
                return e->path == path && e->size == file.size && (!e->is_lfs() || e->lfs_sha256 == file.sha256);
            });
            if (agrees) trusted.insert(path);
        }
    }
    FetchOutcome outcome;
    try {
        outcome = download_variant(request, commit, variant, entries, trusted);
        unpack_archives(request, entries, outcome);
    } catch (const Error& e) {
        // A file that does not match the listing, or that the hub does not
        // have, may mean the listing was wrong (a hostile answer kept
        // earlier): forget it, so the next fetch asks the hub again instead
        // of failing the same way for good. A network error says nothing
        // about the listing.
        const bool listing_suspect = e.code() == ErrorCode::verification || e.code() == ErrorCode::not_found;
        if (listing_suspect && m_listing_source == ListingSource::hub) {
            if (m_memo != nullptr) m_memo->forget_listing(memo_key(cache, commit));
            try {
                cache.remove_tree(commit);
            } catch (const Error&) {
                // A read-only cache keeps it; the error below is the news.
            }
        }
        throw;
    }
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
    }
    update_ref(cache, request, commit);
    return outcome;
}

}  // namespace kernhub::fetch

namespace kernhub::fetch {

cache::RecordedSignature Fetcher::signature_of(const FetchRequest& request, const VariantChoice& choice) {
    const std::string& variant = *choice.selection.chosen;
    cache::RepoCache cache(m_root, request.repo.type, request.repo.repo_id);
    if (auto recorded = recorded_variant(cache, choice.commit, variant)) {
        if (signature_satisfies(recorded->signature, *request.signature)) return *recorded->signature;
    }
    return verify_signature(request, choice.commit, variant, variant_entries(*m_last_listing, variant)).signature;
}

}  // namespace kernhub::fetch
