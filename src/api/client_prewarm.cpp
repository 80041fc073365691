// Client::prewarm (docs/ci-images.md, "Locks and prewarming"):
// fill a cache with exactly what a lock pins.
#include <algorithm>
#include <filesystem>
#include <mutex>

#include "api/client_impl.hpp"
#include "cache/cache.hpp"
#include "common/hint.hpp"
#include "common/join.hpp"
#include "fetch/parallel.hpp"
#include "lockfile/lockfile.hpp"

namespace kernhub {

namespace fs = std::filesystem;

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
    // then requires one of them (docs/trust.md, "Signatures").
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
    if (parsed.format == lockfile::Format::kernhub_lock) {
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
        if (parsed.format == lockfile::Format::kernels_lock_0_16) {
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
    done.repo_type = job.repo_type;
    done.revision = job.revision;
    done.commit = outcome.commit;
    done.variant = outcome.variant;
    done.path = outcome.variant_dir.string();
    done.files = outcome.files.size();
    done.fetched = static_cast<std::size_t>(outcome.files_downloaded);
    done.bytes_downloaded = outcome.bytes_downloaded;
    return done;
}

// One fetch a prewarm runs: a kernel of the lock, for this host's choice or
// one target.
struct Task {
    const LockJob* job;
    fetch::FetchRequest request;
};

// The lock file named, else the project's kernhub.lock, read and parsed.
std::pair<fs::path, lockfile::AnyLock> read_lock(const std::string& lock_file, const Options& options) {
    fs::path path = lock_file;
    if (path.empty()) path = api::project_dir(options) / api::k_lock_name;
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
    lockfile::AnyLock parsed = lockfile::parse_lock(*text, path.string(), options.cancel);
    return {path, std::move(parsed)};
}

// Which variants to fetch for one kernel: this host's choice among what the
// lock allows (one run with no targets), or each requested target the
// kernel offers. A target the lock marks as having no build is skipped and
// listed; one it neither locks nor marks goes into `unmarked`.
std::vector<std::vector<std::string>> variant_runs(ClientImpl& impl, const LockJob& job,
                                                   const fetch::FetchRequest& base, PrewarmReport& report,
                                                   std::vector<std::string>& unmarked) {
    const std::vector<std::string>& targets = impl.settings.targets;
    std::vector<std::vector<std::string>> runs;
    if (targets.empty()) {
        runs.emplace_back();
        return runs;
    }
    std::vector<std::string> offered;
    if (job.pins) {
        offered = pinned_names(job);
    } else {
        fetch::Fetcher fetcher(impl.settings.cache_root, impl.hub_client(), impl.options.events);
        offered = api::candidate_names(fetcher.choose(base));
    }
    for (const auto& target : targets) {
        if (api::contains(offered, target)) {
            runs.push_back({target});
        } else if (job.missing_targets.count(target) != 0) {
            report.missing_targets.push_back(job.name + ": " + target);
        } else {
            unmarked.push_back("'" + job.name + "' (" + target + ")");
        }
    }
    return runs;
}

// Every kernel's fetches, planned before any runs (which variants, the
// requests); an unmarked target of any kernel fails them all at once.
std::vector<Task> plan_tasks(ClientImpl& impl, const std::vector<LockJob>& jobs, const fs::path& path,
                             const lockfile::AnyLock& parsed, PrewarmReport& report) {
    std::vector<Task> tasks;
    std::vector<std::string> unmarked;  // kernel (target) pairs with no build and no mark
    for (const LockJob& job : jobs) {
        registry::KernelSpec spec = api::spec_at_commit(job.name, job.repo_id, job.repo_type, job.commit, job.file);
        // The registry's policy for the repo (or for the lock's name) holds
        // as for any fetch; the signer the lock recorded must then be the
        // one that signed. Without a registry policy, the recorded signer
        // is the policy.
        const std::optional<SignaturePolicy> policy = registry::registry_policy(impl.registry, job.repo_id, job.name);
        spec.signature = policy ? policy : job.signers;
        // kernhub.lock's pins were checked when it was made; a kernels.lock
        // may come from anywhere, so its repos get the trusted-publisher
        // check as kernels' own get_locked_kernel gives them online.
        spec.registry_named =
            parsed.format == lockfile::Format::kernhub_lock || registry::names_repo(impl.registry, job.repo_id);
        fetch::FetchRequest base = impl.request_for(spec);
        base.pins = job.pins;
        for (const auto& run : variant_runs(impl, job, base, report, unmarked)) {
            fetch::FetchRequest request = base;
            if (!run.empty()) request.host.targets = run;
            tasks.push_back(Task{&job, std::move(request)});
        }
    }
    if (!unmarked.empty()) {
        throw Error(ErrorCode::not_found,
                    "no build in " + path.string() + " for kernel " + join(unmarked) +
                        (parsed.format == lockfile::Format::kernhub_lock
                             ? "; a lock records a kernel the hub has no build of only for the targets it was "
                               "made for, and prewarming skips it there: lock again naming those targets"
                             : "; a kernels.lock cannot record that a kernel has no build, so name only "
                               "targets each of its kernels has"),
                    hint::setting("targets"));
    }
    return tasks;
}

// One task fetched and checked. Offline consumers (huggingface_hub, the
// kernels library, kernhub itself) resolve the branch or version through
// refs/: written as soon as the kernel is in, whatever happens to the
// others. Flushed, unlike a fetch's refs: a prewarmed cache is for offline
// use.
PrewarmedKernel run_task(ClientImpl& impl, const Task& task, std::mutex& refs_mutex) {
    const LockJob& job = *task.job;
    fetch::Fetcher fetcher(impl.settings.cache_root, impl.hub_client(), impl.options.events);
    fetch::FetchRequest request = task.request;
    std::optional<deptree::VariantMetadata> metadata;  // parsed by the hook, on a fetch that downloads
    request.check_metadata = [&](const std::string& variant, const std::string& text) {
        // For this machine, a variant that needs a newer kernels is refused
        // before its other files download.
        metadata = deptree::parse_variant_metadata(text, job.repo_id + " variant " + variant);
        if (!impl.selecting_elsewhere()) impl.check_minver(*metadata, job.repo_id, variant);
    };
    fetch::FetchOutcome outcome = fetcher.fetch(request);
    if (!metadata) metadata = api::variant_metadata(outcome.variant_dir, job.repo_id + " variant " + outcome.variant);
    impl.check_minver(*metadata, job.repo_id, outcome.variant);
    check_locked_signer(job, outcome);
    PrewarmedKernel done = prewarmed(job, outcome);
    if (!job.revision.empty() && job.revision != job.commit) {
        cache::RepoCache cache(impl.settings.cache_root, job.repo_type, job.repo_id);
        std::lock_guard<std::mutex> lock(refs_mutex);
        if (cache.read_ref(job.revision) != job.commit) {
            cache.write_ref(job.revision, job.commit);
            done.refs.push_back(job.revision);
        }
    }
    return done;
}

}  // namespace

PrewarmReport Client::prewarm(const std::string& lock_file) {
    m_impl->refuse_all_latest("prewarm");
    const auto [path, parsed] = read_lock(lock_file, m_impl->options);
    PrewarmReport report;
    report.lock_file = path.string();
    report.lock_format = parsed.format;
    const std::uint64_t requests_before = m_impl->requests();
    // The report keeps the lock's order; the fetches run side by side.
    const std::vector<LockJob> jobs = jobs_from(parsed, path.string());
    const std::vector<Task> tasks = plan_tasks(*m_impl, jobs, path, parsed, report);
    std::vector<PrewarmedKernel> done(tasks.size());
    std::mutex refs_mutex;  // two targets of one kernel write the same ref
    fetch::run_parallel(tasks.size(), api::parallel_kernels(m_impl->settings),
                        [&](std::size_t i) { done[i] = run_task(*m_impl, tasks[i], refs_mutex); });
    for (PrewarmedKernel& kernel : done) {
        report.bytes_downloaded += kernel.bytes_downloaded;
        report.kernels.push_back(std::move(kernel));
    }
    report.requests = m_impl->requests() - requests_before;
    return report;
}

}  // namespace kernhub
