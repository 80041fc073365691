// Client::lock and Client::prewarm_lock (docs/ARCHITECTURE.md, "Locks and
// prewarming"): pin a project's kernels to commits and file digests, and
// fill a cache with exactly what a lock pins.
#include <algorithm>
#include <filesystem>
#include <mutex>
#include <set>

#include "api/client_impl.hpp"
#include "cache/cache.hpp"
#include "common/hint.hpp"
#include "common/join.hpp"
#include "digest/digest.hpp"
#include "fetch/parallel.hpp"
#include "lockfile/lockfile.hpp"

namespace kernhub {

namespace fs = std::filesystem;

namespace {

constexpr const char* k_lock_name = "kernhub.lock";

fs::path project_dir(const Options& options) {
    return options.project_dir.empty() ? fs::current_path() : fs::path(options.project_dir);
}

registry::KernelSpec spec_at_commit(const std::string& name, const std::string& repo_id, RepoType type,
                                    const std::string& commit, const std::string& file) {
    registry::KernelSpec spec;
    spec.name = name;
    spec.repo_id = repo_id;
    spec.repo_type = type;
    spec.revision = commit;
    spec.file = file;
    return spec;
}

// The candidates a listing offers, as names, in listing order.
std::vector<std::string> candidate_names(const fetch::VariantChoice& choice) {
    std::vector<std::string> names;
    for (const auto& candidate : choice.candidates) names.push_back(candidate.name);
    return names;
}

bool contains(const std::vector<std::string>& items, const std::string& item) {
    return std::find(items.begin(), items.end(), item) != items.end();
}

}  // namespace

// ---- lock -------------------------------------------------------------------

namespace {

bool signer_accepted(const std::optional<lockfile::LockedSigner>& signer, const SignaturePolicy& policy) {
    return signer && signer->issuer == policy.issuer &&
           std::find(policy.identities.begin(), policy.identities.end(), signer->identity) != policy.identities.end();
}

// The SHA-256 of the cached blob holding a listed plain file, when the
// cache holds it and its content is that file (its git blob id matches);
// empty otherwise.
std::string cached_sha256(const cache::RepoCache& cache, const hub::TreeEntry& entry) {
    const fs::path blob = cache.blob_path(entry.oid);
    std::error_code ec;
    if (!fs::is_regular_file(fs::symlink_status(blob, ec)) || fs::file_size(blob, ec) != entry.size || ec) return {};
    if (digest::git_blob_sha1_file_hex(blob) != entry.oid) return {};
    return digest::sha256_file_hex(blob);
}

// Why a kept pin does not describe the listing of its own commit (what a
// bad merge or a hand edit makes), naming the variant, the file and the
// field; empty when it does. The listing gives every file's size, an LFS
// file's SHA-256 and, through the variant hash, every file's hub hash, so
// a pin from another commit or with a changed field disagrees. A plain
// file's SHA-256 is not in the listing: it is checked against the blob the
// cache holds under the file's git id (locking put it there), without a
// request; with no such blob, prewarm checks it as the file streams.
std::string pin_disagreement(const std::vector<hub::TreeEntry>& listing, const std::string& commit,
                             const std::string& variant, const lockfile::LockedVariant& pin,
                             const cache::RepoCache& cache) {
    const std::string at = " at commit " + commit.substr(0, 12);
    const std::string prefix = "build/" + variant + "/";
    std::size_t listed = 0;
    for (const hub::TreeEntry& entry : listing) {
        if (!entry.is_file || entry.path.rfind(prefix, 0) != 0) continue;
        const std::string relpath = entry.path.substr(prefix.size());
        if (fetch::is_python_bytecode(relpath)) continue;
        ++listed;
        const std::string where = "variant " + variant + ", file " + relpath + ": ";
        const auto file = pin.files.find(relpath);
        if (file == pin.files.end()) return where + "listed" + at + " but not in the lock";
        if (file->second.size != entry.size) {
            return where + "size " + std::to_string(file->second.size) + " in the lock, " + std::to_string(entry.size) +
                   at;
        }
        if (entry.is_lfs() && file->second.sha256 != entry.lfs_sha256) {
            return where + "sha256 " + file->second.sha256 + " in the lock, " + entry.lfs_sha256 + at;
        }
        if (!entry.is_lfs()) {
            const std::string cached = cached_sha256(cache, entry);
            if (!cached.empty() && cached != file->second.sha256) {
                return where + "sha256 " + file->second.sha256 + " in the lock, " + cached + at;
            }
        }
    }
    if (listed == 0) return "variant " + variant + ": not" + at;
    for (const auto& pinned : pin.files) {
        const std::string listed_path = prefix + pinned.first;
        const bool found = std::any_of(listing.begin(), listing.end(), [&](const hub::TreeEntry& entry) {
            return entry.is_file && entry.path == listed_path;
        });
        if (!found) return "variant " + variant + ", file " + pinned.first + ": in the lock but not" + at;
    }
    const std::string hash = fetch::listing_variant_hash(listing, variant);
    if (pin.hash != hash) return "variant " + variant + ": hash " + pin.hash + " in the lock, " + hash + at;
    return {};
}

struct Locker {
    Client::Impl& impl;
    bool check = false;  // --check: a disagreeing pin is reported, not replaced

    // Describes one variant at a commit: every file's size and SHA-256 (LFS
    // files from the listing, plain files fetched through the cache) and
    // the variant hash.
    lockfile::LockedVariant describe(const registry::KernelSpec& spec, const std::string& variant) {
        fetch::FetchRequest request = impl.request_for(spec);
        request.host.targets = {variant};
        request.skip_lfs_downloads = true;
        fetch::Fetcher fetcher(impl.settings.cache_root, impl.hub_client(), impl.options.events);
        fetch::FetchOutcome outcome = fetcher.fetch(request);
        lockfile::LockedVariant locked;
        for (const auto& file : outcome.files) locked.files[file.path] = lockfile::LockedFile{file.size, file.sha256};
        locked.hash = fetch::listing_variant_hash(fetcher.last_listing(), variant);
        if (outcome.signature)
            locked.signer = lockfile::LockedSigner{outcome.signature->identity, outcome.signature->issuer};
        return locked;
    }

    // The variants to lock for one kernel at the chosen commit: the
    // --target list, or re-locking without it, the previous lock's targets
    // (its variants and its missing targets), else this host's choice.
    // Targets the kernel lacks go into `out_missing`.
    std::vector<std::string> wanted_variants(const registry::KernelSpec& spec, const lockfile::LockedKernel* previous,
                                             const fetch::VariantChoice& choice, const fetch::FetchRequest& request,
                                             std::vector<std::string>& out_missing) const {
        std::vector<std::string> wanted;
        std::vector<std::string> targets = impl.settings.targets;
        const bool from_previous = targets.empty() && previous != nullptr && previous->repo_id == spec.repo_id &&
                                   !(previous->variants.empty() && previous->missing_targets.empty());
        if (from_previous) {
            for (const auto& [name, variant] : previous->variants) targets.push_back(name);
            targets.insert(targets.end(), previous->missing_targets.begin(), previous->missing_targets.end());
        }
        if (!targets.empty()) {
            // A --target the kernel has no build for is recorded as missing,
            // so that prewarm --target skips the kernel for it (a kernel
            // with none of them is locked with no variant). A variant the
            // previous lock had that is gone now is not quietly dropped.
            std::vector<std::string> offered = candidate_names(choice);
            for (const auto& target : targets) {
                const bool was_locked = from_previous && previous->variants.count(target) != 0;
                if (!contains(offered, target) && was_locked) {
                    throw Error(ErrorCode::not_found,
                                "kernel '" + spec.name + "' (" + spec.repo_id + "@" + choice.commit.substr(0, 12) +
                                    ") no longer has the variant " + target + " that " + k_lock_name +
                                    " locks; it has " + join(offered) + "; lock again naming the targets to keep",
                                hint::setting("targets"));
                }
                if (!contains(offered, target)) {
                    if (!contains(out_missing, target)) out_missing.push_back(target);
                } else if (!contains(wanted, target)) {
                    wanted.push_back(target);
                }
            }
        } else if (choice.selection.chosen) {
            wanted.push_back(*choice.selection.chosen);
        } else {
            // As for fetch: a variant that only lacks its runtime is a load
            // failure (install the runtime), not a missing variant.
            const bool runtime_missing = !choice.selection.runtime_problem.empty();
            throw Error(runtime_missing ? ErrorCode::load : ErrorCode::not_found,
                        "no build variant of kernel '" + spec.name + "' fits this host (" +
                            select::describe(request.host) + "): " + fetch::describe_rejections(choice.selection) +
                            (choice.selection.runtime_problem.empty() ? std::string()
                                                                      : "; " + choice.selection.runtime_problem) +
                            "; to lock for other machines, name their targets",
                        hint::setting("targets"));
        }
        return wanted;
    }

    // Checks a kept pin against the listing of its commit, which the last
    // choose() read: from the cache when it holds that listing, else from
    // the hub (one request). A listing rebuilt from snapshot links shows
    // only what is cached, so offline without the listing it is exit 6.
    std::string kept_pin_problem(const registry::KernelSpec& spec, const lockfile::LockedKernel& previous,
                                 const fetch::Fetcher& fetcher) const {
        if (fetcher.last_listing_source() == fetch::ListingSource::snapshot) {
            throw Error(ErrorCode::offline,
                        "kernel '" + spec.name + "': the listing of its pinned commit " +
                            previous.commit.substr(0, 12) +
                            " is not in the cache, so its pin cannot be checked; lock once online: offline "
                            "mode is on",
                        hint::setting("offline"));
        }
        const cache::RepoCache cache(impl.settings.cache_root, spec.repo_type, spec.repo_id);
        for (const auto& [variant, pin] : previous.variants) {
            std::string problem = pin_disagreement(fetcher.last_listing(), previous.commit, variant, pin, cache);
            if (!problem.empty()) return problem;
        }
        return {};
    }

    // The commit and the variants to lock for one kernel: this host's
    // choice, the --target list, or (re-locking without --target) the
    // variants the previous lock had.
    lockfile::LockedKernel lock_kernel(const registry::KernelSpec& spec, const lockfile::LockedKernel* previous,
                                       bool& keep_pin, std::vector<std::string>& out_missing,
                                       std::string& out_pin_problem) {
        lockfile::LockedKernel out;
        out.repo_id = spec.repo_id;
        out.repo_type = spec.repo_type;
        out.revision = spec.effective_revision();
        out.symbol = spec.symbol;
        out.file = spec.file;

        fetch::FetchRequest request = impl.request_for(spec);
        if (keep_pin) request.revision = previous->commit;
        // A lock pins what the hub serves now, not what this cache was told
        // up to KERNHUB_REF_TTL seconds ago.
        request.ref_ttl_seconds = 0;
        fetch::Fetcher fetcher(impl.settings.cache_root, impl.hub_client(), impl.options.events);
        fetch::VariantChoice choice;
        bool listed = true;
        try {
            choice = fetcher.choose(request);
        } catch (const Error& error) {
            if (!keep_pin) throw;
            if (error.code() == ErrorCode::offline) {
                throw Error(ErrorCode::offline,
                            "kernel '" + spec.name + "': its pin cannot be checked: " + error.plain_message(),
                            error.hint());
            }
            // A pinned commit the hub does not have is a pin that describes nothing.
            if (error.code() != ErrorCode::not_found) throw;
            out_pin_problem = "commit " + previous->commit + " is not on the hub (" + error.plain_message() + ")";
            listed = false;
        }
        if (keep_pin && listed) out_pin_problem = kept_pin_problem(spec, *previous, fetcher);
        if (keep_pin) {
            if (!out_pin_problem.empty() && check) return *previous;
            if (!out_pin_problem.empty()) {
                // Resolved again from the revision, as --update would.
                keep_pin = false;
                request.revision = impl.request_for(spec).revision;
                choice = fetcher.choose(request);
            }
        }
        out.commit = choice.commit;

        const std::vector<std::string> wanted = wanted_variants(spec, previous, choice, request, out_missing);
        out.missing_targets.insert(out_missing.begin(), out_missing.end());
        registry::KernelSpec at_commit = spec_at_commit(spec.name, spec.repo_id, spec.repo_type, out.commit, spec.file);
        at_commit.signature = spec.signature;
        for (const auto& variant : wanted) {
            const lockfile::LockedVariant* kept = nullptr;
            if (keep_pin && previous->commit == out.commit) {
                auto it = previous->variants.find(variant);
                if (it != previous->variants.end()) kept = &it->second;
            }
            // A kept pin without a signer this policy accepts is described
            // (and its signature verified) again.
            if (kept != nullptr && spec.signature && !signer_accepted(kept->signer, *spec.signature)) kept = nullptr;
            out.variants[variant] = kept != nullptr ? *kept : describe(at_commit, variant);
        }
        return out;
    }
};

}  // namespace

LockReport Client::lock(const LockOptions& options) {
    const fs::path dir = project_dir(m_impl->options);
    const fs::path manifest = dir / "kernhub.json";
    const fs::path lock_path = dir / k_lock_name;
    std::error_code ec;
    if (!fs::is_regular_file(manifest, ec)) {
        throw Error(ErrorCode::not_found,
                    "no kernhub.json in " + dir.string() +
                        "; create one naming the kernels the project uses (the registry format), or name the "
                        "project's folder",
                    hint::setting("project_dir"));
    }
    registry::Registry project;
    project.add_file(manifest);
    const std::vector<registry::KernelSpec> specs = project.entries();

    lockfile::KernhubLock previous;
    const std::optional<std::string> old_text = lockfile::read_lock_file(lock_path);
    if (old_text) {
        lockfile::AnyLock parsed = lockfile::parse_lock(*old_text, lock_path.string());
        if (parsed.format != lockfile::Format::kernhub) {
            throw Error(ErrorCode::usage, lock_path.string() + " is a " + lockfile::describe(parsed.format) +
                                              ", not a kernhub.lock; move it away or name it kernels.lock");
        }
        previous = std::move(parsed.kernhub);
    }
    for (const auto& name : options.update) {
        bool known = std::any_of(specs.begin(), specs.end(), [&](const auto& spec) { return spec.name == name; });
        if (!known) {
            throw Error(ErrorCode::usage, "cannot update " + name + ": no kernel of that name in " + manifest.string(),
                        hint::setting("lock.update"));
        }
    }

    LockReport report;
    report.path = lock_path.string();
    const std::uint64_t requests_before = m_impl->requests();
    Locker locker{*m_impl, options.check};
    lockfile::KernhubLock next;
    // The kernels are locked side by side; the report keeps the manifest's order.
    std::vector<lockfile::LockedKernel> results(specs.size());
    std::vector<std::vector<std::string>> missing(specs.size());
    std::vector<char> kept(specs.size(), 0);
    std::vector<std::string> pin_problems(specs.size());
    fetch::run_parallel(specs.size(), api::parallel_kernels(m_impl->settings), [&](std::size_t i) {
        const registry::KernelSpec& spec = specs[i];
        auto found = previous.kernels.find(spec.name);
        const lockfile::LockedKernel* prior = found == previous.kernels.end() ? nullptr : &found->second;
        // As with cargo and uv, a pin stays until asked to move or until the
        // manifest names something else.
        bool keep_pin = prior != nullptr && !options.update_all && !contains(options.update, spec.name) &&
                        prior->repo_id == spec.repo_id && prior->repo_type == spec.repo_type &&
                        prior->revision == spec.effective_revision();
        results[i] = locker.lock_kernel(spec, prior, keep_pin, missing[i], pin_problems[i]);
        kept[i] = keep_pin ? 1 : 0;
    });
    for (std::size_t i = 0; i < specs.size(); ++i) {
        const registry::KernelSpec& spec = specs[i];
        lockfile::LockedKernel& locked = results[i];
        LockedKernel summary{
            spec.name, locked.repo_id, locked.revision, locked.commit, {}, kept[i] != 0, missing[i], {}, {}};
        for (const auto& [variant, data] : locked.variants) {
            summary.variants.push_back(variant);
            if (data.signer && !summary.signature) {
                summary.signature = SignatureInfo{data.signer->identity, data.signer->issuer, {}, 0, 0};
            }
        }
        summary.pin_problem = pin_problems[i];
        if (!summary.pin_problem.empty() && options.check) report.pins_disagree = true;
        report.kernels.push_back(std::move(summary));
        next.kernels.emplace(spec.name, std::move(locked));
    }
    report.content = lockfile::write_kernhub_lock(next);
    report.changed = !old_text || *old_text != report.content;
    if (report.changed) {
        report.diff = lockfile::line_diff(old_text.value_or(""), report.content, old_text ? k_lock_name : "/dev/null",
                                          std::string(k_lock_name) + " (new)");
        if (!options.check) cache::write_file_atomic(lock_path, report.content);
    }
    report.requests = m_impl->requests() - requests_before;
    return report;
}

// ---- prewarm from a lock ------------------------------------------------------

namespace {

// One kernel of a lock, whatever its format.
struct LockJob {
    std::string name;
    std::string repo_id;
    RepoType repo_type = RepoType::kernel;
    std::string revision;  // the ref to point at the commit; may be empty
    std::string commit;
    std::string file;
    std::optional<std::map<std::string, fetch::VariantPins>> pins;
    // Targets kernhub.lock records the kernel has no build for.
    std::set<std::string> missing_targets;
    // The signers kernhub.lock recorded for the kernel's variants: a prewarm
    // then requires one of them (README, "Signatures").
    std::optional<SignaturePolicy> signers;
};

// One policy from the signers a kernhub.lock records for a kernel's
// variants: their issuer, any of their identities.
std::optional<SignaturePolicy> locked_signers(const std::string& name, const lockfile::LockedKernel& kernel,
                                              const std::string& source) {
    std::optional<SignaturePolicy> policy;
    for (const auto& [variant, locked] : kernel.variants) {
        if (!locked.signer) continue;
        if (!policy) policy = SignaturePolicy{locked.signer->issuer, {}, {}};
        if (policy->issuer != locked.signer->issuer) {
            throw Error(ErrorCode::usage,
                        source + ": kernel '" + name + "' records signers with different issuers; lock it again");
        }
        if (std::find(policy->identities.begin(), policy->identities.end(), locked.signer->identity) ==
            policy->identities.end()) {
            policy->identities.push_back(locked.signer->identity);
        }
    }
    return policy;
}

std::vector<LockJob> jobs_from(const lockfile::AnyLock& parsed, const std::string& source) {
    std::vector<LockJob> jobs;
    if (parsed.format == lockfile::Format::kernhub) {
        for (const auto& [name, kernel] : parsed.kernhub.kernels) {
            LockJob job{name,
                        kernel.repo_id,
                        kernel.repo_type,
                        kernel.revision,
                        kernel.commit,
                        kernel.file,
                        {},
                        kernel.missing_targets,
                        locked_signers(name, kernel, source)};
            job.pins.emplace();
            for (const auto& [variant, locked] : kernel.variants) {
                fetch::VariantPins pins;
                pins.hash = locked.hash;
                pins.files.emplace();
                for (const auto& [path, file] : locked.files)
                    (*pins.files)[path] = fetch::FilePin{file.size, file.sha256};
                job.pins->emplace(variant, std::move(pins));
            }
            jobs.push_back(std::move(job));
        }
        return jobs;
    }
    for (const auto& entry : parsed.kernels) {
        LockJob job{entry.repo_id, entry.repo_id, RepoType::kernel, entry.revision, entry.commit, {}, {}, {}, {}};
        if (parsed.format == lockfile::Format::kernels_legacy) {
            job.pins.emplace();
            for (const auto& [variant, hash] : entry.variant_hashes)
                job.pins->emplace(variant, fetch::VariantPins{hash, {}});
        }
        jobs.push_back(std::move(job));
    }
    return jobs;
}

std::vector<std::string> pinned_names(const LockJob& job) {
    std::vector<std::string> names;
    for (const auto& [name, pins] : *job.pins) names.push_back(name);
    return names;
}

// The lock recorded who signed the kernel: the signature verified now must
// be by one of them.
void check_locked_signer(const LockJob& job, const fetch::FetchOutcome& outcome) {
    if (!job.signers) return;
    const auto& ids = job.signers->identities;
    if (!outcome.signature || outcome.signature->issuer != job.signers->issuer ||
        std::find(ids.begin(), ids.end(), outcome.signature->identity) == ids.end()) {
        throw Error(ErrorCode::verification,
                    "kernel '" + job.name + "' (" + job.repo_id + "@" + job.commit.substr(0, 12) +
                        ") was not signed by the signer its lock records (" + join(ids) + ", " + job.signers->issuer +
                        "); lock it again if the new signer is expected");
    }
}

PrewarmedKernel prewarmed(const LockJob& job, const fetch::FetchOutcome& outcome) {
    PrewarmedKernel done;
    done.name = job.name;
    done.repo_id = job.repo_id;
    done.repo_type = to_string(job.repo_type);
    done.revision = job.revision;
    done.commit = outcome.commit;
    done.variant = outcome.variant;
    done.path = outcome.variant_dir.string();
    done.files = outcome.files.size();
    done.fetched = static_cast<std::size_t>(outcome.files_downloaded);
    done.bytes_downloaded = outcome.bytes_downloaded;
    return done;
}

}  // namespace

PrewarmReport Client::prewarm_lock(const std::string& lock_file) {
    fs::path path = lock_file;
    if (path.empty()) path = project_dir(m_impl->options) / k_lock_name;
    std::optional<std::string> text = lockfile::read_lock_file(path);
    if (!text) {
        if (lock_file.empty()) {
            throw Error(ErrorCode::not_found,
                        "no kernhub.lock in " + path.parent_path().string() +
                            "; name the lock file to prewarm from, or lock the project there first",
                        hint::action("lock"));
        }
        throw Error(ErrorCode::not_found, "lock file " + path.string() + " does not exist");
    }
    lockfile::AnyLock parsed = lockfile::parse_lock(*text, path.string());

    PrewarmReport report;
    report.lock_file = path.string();
    report.lock_format = lockfile::describe(parsed.format);
    const std::uint64_t requests_before = m_impl->requests();
    const std::vector<std::string>& targets = m_impl->settings.targets;
    // Every kernel's fetches are planned first (which variants, the
    // requests), then run side by side; the report keeps the lock's order.
    struct Task {
        const LockJob* job;
        fetch::FetchRequest request;
    };
    std::vector<Task> tasks;
    std::vector<std::string> unmarked;  // kernel (target) pairs with no build and no mark
    const std::vector<LockJob> jobs = jobs_from(parsed, path.string());
    for (const LockJob& job : jobs) {
        registry::KernelSpec spec = spec_at_commit(job.name, job.repo_id, job.repo_type, job.commit, job.file);
        // The registry's policy for the repo (or for the lock's name) holds
        // as for any fetch; the signer the lock recorded must then be the
        // one that signed. Without a registry policy, the recorded signer
        // is the policy.
        const std::optional<SignaturePolicy> policy = registry::registry_policy(m_impl->registry, job.repo_id, job.name);
        spec.signature = policy ? policy : job.signers;
        fetch::FetchRequest base = m_impl->request_for(spec);
        base.pins = job.pins;
        // Which variants to fetch: this host's choice among what the lock
        // allows, or each requested target the kernel offers.
        std::vector<std::vector<std::string>> runs;
        if (targets.empty()) {
            runs.emplace_back();
        } else {
            std::vector<std::string> offered;
            if (job.pins) {
                offered = pinned_names(job);
            } else {
                fetch::Fetcher fetcher(m_impl->settings.cache_root, m_impl->hub_client(), m_impl->options.events);
                offered = candidate_names(fetcher.choose(base));
            }
            // A target the lock marks as having no build is skipped and
            // listed; one it neither locks nor marks is an error, reported
            // for every such kernel at once below.
            for (const auto& target : targets) {
                if (contains(offered, target)) {
                    runs.push_back({target});
                } else if (job.missing_targets.count(target) != 0) {
                    report.missing_targets.push_back(job.name + ": " + target);
                } else {
                    unmarked.push_back("'" + job.name + "' (" + target + ")");
                }
            }
        }
        for (const auto& run : runs) {
            fetch::FetchRequest request = base;
            if (!run.empty()) request.host.targets = run;
            tasks.push_back(Task{&job, std::move(request)});
        }
    }
    if (!unmarked.empty()) {
        throw Error(ErrorCode::not_found,
                    "no build in " + path.string() + " for kernel " + join(unmarked) +
                        (parsed.format == lockfile::Format::kernhub
                             ? "; a lock records a kernel the hub has no build of only for the targets it was "
                               "made for, and prewarming skips it there: lock again naming those targets"
                             : "; a kernels.lock cannot record that a kernel has no build, so name only "
                               "targets each of its kernels has"),
                    hint::setting("targets"));
    }
    std::vector<PrewarmedKernel> done(tasks.size());
    std::mutex refs_mutex;  // two targets of one kernel write the same ref
    fetch::run_parallel(tasks.size(), api::parallel_kernels(m_impl->settings), [&](std::size_t i) {
        const LockJob& job = *tasks[i].job;
        fetch::Fetcher fetcher(m_impl->settings.cache_root, m_impl->hub_client(), m_impl->options.events);
        fetch::FetchOutcome outcome = fetcher.fetch(tasks[i].request);
        check_locked_signer(job, outcome);
        done[i] = prewarmed(job, outcome);
        // Offline consumers (huggingface_hub, the kernels library, kernhub
        // itself) resolve the branch or version through refs/: written as
        // soon as the kernel is in, whatever happens to the others. Flushed,
        // unlike a fetch's refs: a prewarmed cache is for offline use.
        if (!job.revision.empty() && job.revision != job.commit) {
            cache::RepoCache cache(m_impl->settings.cache_root, job.repo_type, job.repo_id);
            std::lock_guard<std::mutex> lock(refs_mutex);
            if (cache.read_ref(job.revision) != job.commit) {
                cache.write_ref(job.revision, job.commit);
                done[i].refs.push_back(job.revision);
            }
        }
    });
    for (PrewarmedKernel& kernel : done) {
        report.bytes_downloaded += kernel.bytes_downloaded;
        report.kernels.push_back(std::move(kernel));
    }
    report.requests = m_impl->requests() - requests_before;
    return report;
}

}  // namespace kernhub
