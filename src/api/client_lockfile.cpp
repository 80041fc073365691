// Client::lock (docs/ci-images.md, "Locks and prewarming"): pin a
// project's kernels to commits and file digests.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <set>
#include <unordered_set>

#include "api/client_impl.hpp"
#include "cache/cache.hpp"
#include "common/hint.hpp"
#include "common/join.hpp"
#include "deptree/tree.hpp"
#include "digest/digest.hpp"
#include "fetch/parallel.hpp"
#include "lockfile/lockfile.hpp"

namespace kernhub {

namespace fs = std::filesystem;

namespace api {

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

}  // namespace api

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
    std::unordered_set<std::string> listed;
    for (const hub::TreeEntry& entry : listing) {
        if (!entry.is_file || entry.path.rfind(prefix, 0) != 0) continue;
        const std::string relpath = entry.path.substr(prefix.size());
        if (fetch::is_python_bytecode(relpath)) continue;
        listed.insert(relpath);
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
    if (listed.empty()) return "variant " + variant + ": not" + at;
    for (const auto& pinned : pin.files) {
        if (listed.count(pinned.first) == 0) {
            return "variant " + variant + ", file " + pinned.first + ": in the lock but not" + at;
        }
    }
    const std::string hash = fetch::listing_variant_hash(listing, variant);
    if (pin.hash != hash) return "variant " + variant + ": hash " + pin.hash + " in the lock, " + hash + at;
    return {};
}

struct Locker {
    ClientImpl& impl;
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

    // The kernels the locked variants' metadata.json files name under
    // "kernel-depends", all variants together (docs/registry.md, "Kernel
    // dependencies"). A metadata.json that describe() did not just place
    // in the cache (a kept pin, a fresh cache) is described again first.
    std::vector<deptree::KernelDependency> depends_of(const registry::KernelSpec& spec,
                                                      const lockfile::LockedKernel& locked) {
        std::vector<deptree::VariantMetadata> variants;
        const cache::RepoCache cache(impl.settings.cache_root, spec.repo_type, spec.repo_id);
        registry::KernelSpec at_commit =
            api::spec_at_commit(spec.name, spec.repo_id, spec.repo_type, locked.commit, spec.file);
        at_commit.signature = spec.signature;
        for (const auto& [variant, pin] : locked.variants) {
            const auto metadata_pin = pin.files.find("metadata.json");
            if (metadata_pin == pin.files.end()) continue;
            const fs::path path = cache.snapshot_path(locked.commit, "build/" + variant + "/metadata.json");
            std::string text;
            cache::ReadStatus status = cache::read_file_into(path, text, deptree::k_max_metadata_bytes + 1);
            if (status.error != 0 || digest::sha256_hex(text) != metadata_pin->second.sha256) {
                (void)describe(at_commit, variant);
                text.clear();
                status = cache::read_file_into(path, text, deptree::k_max_metadata_bytes + 1);
                if (status.error != 0) {
                    throw Error(ErrorCode::internal,
                                "cannot read " + path.string() + ": " + std::strerror(status.error));
                }
            }
            variants.push_back(deptree::parse_variant_metadata(text, spec.repo_id + " variant " + variant));
        }
        return deptree::merged_depends(variants);
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
        // A host description asks for that machine's choice, not the previous lock's.
        const bool from_previous = targets.empty() && impl.settings.host.empty() && previous != nullptr &&
                                   previous->repo_id == spec.repo_id &&
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
            std::vector<std::string> offered = api::candidate_names(choice);
            for (const auto& target : targets) {
                const bool was_locked = from_previous && previous->variants.count(target) != 0;
                if (!api::contains(offered, target) && was_locked) {
                    throw Error(ErrorCode::not_found,
                                "kernel '" + spec.name + "' (" + spec.repo_id + "@" + choice.commit.substr(0, 12) +
                                    ") no longer has the variant " + target + " that " + api::k_lock_name +
                                    " locks; it has " + join(offered) + "; lock again naming the targets to keep",
                                hint::setting("targets"));
                }
                if (!api::contains(offered, target)) {
                    if (!api::contains(out_missing, target)) out_missing.push_back(target);
                } else if (!api::contains(wanted, target)) {
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
        registry::KernelSpec at_commit =
            api::spec_at_commit(spec.name, spec.repo_id, spec.repo_type, out.commit, spec.file);
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

namespace {

// The project's kernhub.json, whose entries are the kernels to lock.
std::vector<registry::KernelSpec> manifest_specs(const fs::path& dir) {
    const fs::path manifest = dir / "kernhub.json";
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
    return project.entries();
}

// Every --update name must be a kernel of the manifest.
void check_update_names(const std::vector<registry::KernelSpec>& specs, const LockOptions& options,
                        const fs::path& manifest) {
    for (const auto& name : options.update) {
        bool known = std::any_of(specs.begin(), specs.end(), [&](const auto& spec) { return spec.name == name; });
        if (!known) {
            throw Error(ErrorCode::usage, "cannot update " + name + ": no kernel of that name in " + manifest.string(),
                        hint::setting("lock.update"));
        }
    }
}

// The lock as it is now, when there is one; Error(usage) for another format.
lockfile::KernhubLock previous_lock(const fs::path& lock_path, const std::optional<std::string>& old_text,
                                    const std::atomic<bool>* cancel) {
    if (!old_text) return {};
    lockfile::AnyLock parsed = lockfile::parse_lock(*old_text, lock_path.string(), cancel);
    if (parsed.format != lockfile::Format::kernhub_lock) {
        throw Error(ErrorCode::usage, lock_path.string() + " is a " + to_string(parsed.format) +
                                          ", not a kernhub.lock; move it away or name it kernels.lock");
    }
    return std::move(parsed.kernhub);
}

// One kernel's line of the report.
LockedKernel summary_of(const registry::KernelSpec& spec, const lockfile::LockedKernel& locked, bool kept,
                        const std::vector<std::string>& missing, const std::string& pin_problem) {
    LockedKernel summary{spec.name, locked.repo_id, locked.revision, locked.commit, {}, kept, missing, {}, {}};
    for (const auto& [variant, data] : locked.variants) {
        summary.variants.push_back(variant);
        if (data.signer && !summary.signature) {
            summary.signature = SignatureInfo{data.signer->identity, data.signer->issuer, {}, 0, 0};
        }
    }
    summary.pin_problem = pin_problem;
    return summary;
}

}  // namespace

namespace {

// Kernel dependencies (docs/registry.md, "Kernel dependencies"): every kernel a
// locked variant names is locked too, as an entry called by its
// "ORG/REPO@REVISION", with the same targets and pin rules; one shared by
// several kernels is locked once. Sets each manifest kernel's
// kernel_depends; the dependencies' entries go into `next` and `report`.
void lock_dependencies(ClientImpl& impl, Locker& locker, const std::vector<registry::KernelSpec>& specs,
                       std::vector<lockfile::LockedKernel>& results, const lockfile::KernhubLock& previous,
                       const LockOptions& options, LockReport& report, lockfile::KernhubLock& next) {
    std::map<std::string, std::vector<deptree::KernelDependency>> expanded;
    const deptree::Expand lock_dependency = [&](const deptree::KernelDependency& dep) {
        const std::string name = dep.label();
        if (auto done = expanded.find(name); done != expanded.end()) return done->second;
        registry::KernelSpec spec = impl.dependency_spec(dep);
        spec.name = name;
        auto found = previous.kernels.find(name);
        const lockfile::LockedKernel* prior = found == previous.kernels.end() ? nullptr : &found->second;
        bool keep_pin = prior != nullptr && !options.update_all && prior->repo_id == spec.repo_id &&
                        prior->repo_type == spec.repo_type && prior->revision == spec.effective_revision();
        std::vector<std::string> missing;
        std::string pin_problem;
        lockfile::LockedKernel locked = locker.lock_kernel(spec, prior, keep_pin, missing, pin_problem);
        std::vector<deptree::KernelDependency> depends = locker.depends_of(spec, locked);
        for (const deptree::KernelDependency& d : depends) locked.kernel_depends.insert(d.label());
        report.kernels.push_back(summary_of(spec, locked, keep_pin, missing, pin_problem));
        if (!pin_problem.empty() && options.check) report.pins_disagree = true;
        next.kernels.emplace(name, std::move(locked));
        expanded.emplace(name, depends);
        return depends;
    };
    for (std::size_t i = 0; i < specs.size(); ++i) {
        const std::vector<deptree::KernelDependency> depends = locker.depends_of(specs[i], results[i]);
        for (const deptree::KernelDependency& d : depends) results[i].kernel_depends.insert(d.label());
        const deptree::KernelDependency top{specs[i].repo_id, std::nullopt, specs[i].effective_revision()};
        (void)deptree::walk(top, depends, lock_dependency);
    }
}

}  // namespace

LockReport Client::lock(const LockOptions& options) {
    // A check compares the lock with the hub and writes nothing: it still
    // checks the pins.
    if (!options.check) m_impl->refuse_all_latest("lock");
    const fs::path dir = api::project_dir(m_impl->options);
    const fs::path lock_path = dir / api::k_lock_name;
    const std::vector<registry::KernelSpec> specs = manifest_specs(dir);
    const std::optional<std::string> old_text = lockfile::read_lock_file(lock_path);
    const lockfile::KernhubLock previous = previous_lock(lock_path, old_text, m_impl->options.cancel);
    check_update_names(specs, options, dir / "kernhub.json");
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
        bool keep_pin = prior != nullptr && !options.update_all && !api::contains(options.update, spec.name) &&
                        prior->repo_id == spec.repo_id && prior->repo_type == spec.repo_type &&
                        prior->revision == spec.effective_revision();
        results[i] = locker.lock_kernel(spec, prior, keep_pin, missing[i], pin_problems[i]);
        kept[i] = keep_pin ? 1 : 0;
    });
    for (std::size_t i = 0; i < specs.size(); ++i) {
        report.kernels.push_back(summary_of(specs[i], results[i], kept[i] != 0, missing[i], pin_problems[i]));
        if (!pin_problems[i].empty() && options.check) report.pins_disagree = true;
    }
    // The manifest's kernels go in after their dependencies were locked:
    // the walk reads each kernel's kernel_depends as it sets it.
    lock_dependencies(*m_impl, locker, specs, results, previous, options, report, next);
    for (std::size_t i = 0; i < specs.size(); ++i) next.kernels.emplace(specs[i].name, std::move(results[i]));
    report.content = lockfile::write_kernhub_lock(next);
    report.changed = !old_text || *old_text != report.content;
    if (report.changed) {
        report.diff =
            lockfile::line_diff(old_text.value_or(""), report.content, old_text ? api::k_lock_name : "/dev/null",
                                std::string(api::k_lock_name) + " (new)");
        if (!options.check) cache::write_file_atomic(lock_path, report.content);
    }
    report.requests = m_impl->requests() - requests_before;
    return report;
}

}  // namespace kernhub
