// Client's cache management: ls, path, verify and prune over the cache root
// (docs/cache-format.md, "Cache management"). The work is in src/cache.
#include <algorithm>

#include "api/client_impl.hpp"
#include "cacheadmin/inventory.hpp"
#include "cacheadmin/prune.hpp"
#include "cacheadmin/verify_cache.hpp"
#include "common/hint.hpp"

namespace kernhub {

namespace {

std::filesystem::path absolute_root(const api::Settings& settings) {
    std::error_code ec;
    std::filesystem::path root = std::filesystem::absolute(settings.cache_root, ec);
    return ec ? settings.cache_root : root.lexically_normal();
}

// Whether blob locks mean anything here, as fetch decides it.
bool locks_work(const api::Settings& settings, const std::filesystem::path& root) {
    return settings.use_flock && cache::flock_excludes(root);
}

}  // namespace

CacheListing Client::cache_ls() {
    return cacheadmin::list_cache(absolute_root(m_impl->settings));
}

// The selection fetch would make, from the cache alone: the ref, the cached
// listing and the snapshot. Nothing is requested, written or re-hashed
// (verify does that); every file of the variant must be linked.
std::string Client::cache_path(const std::string& ref) {
    const std::filesystem::path root = absolute_root(m_impl->settings);
    if (ref.empty()) return root.string();
    registry::KernelSpec spec = registry::resolve_ref(m_impl->registry, ref);
    fetch::FetchRequest request = m_impl->request_for(spec, /*check_trust=*/false);
    request.offline = true;
    fetch::Fetcher fetcher(root, nullptr, m_impl->options.events);
    fetch::VariantChoice choice = fetcher.choose(request);
    const std::string at = spec.repo_id + "@" + request.revision;
    if (!choice.selection.chosen) {
        // As fetch: with the whole listing, nothing fits at all (not found);
        // with links alone, only nothing cached fits.
        const bool links_only = fetcher.last_listing_source() == fetch::ListingSource::snapshot;
        throw Error(links_only ? ErrorCode::offline : ErrorCode::not_found,
                    std::string(links_only ? "no cached" : "no") + " build variant of " + at +
                        " fits: " + fetch::describe_rejections(choice.selection) + "; name one of them as the target",
                    hint::setting("targets"));
    }
    const std::string variant = *choice.selection.chosen;
    cache::RepoCache cache(root, spec.repo_type, spec.repo_id);
    for (const auto& entry : fetcher.last_listing()) {
        if (!entry.is_file || entry.path.rfind("build/" + variant + "/", 0) != 0) continue;
        if (!cache.snapshot_complete(choice.commit, entry.path)) {
            throw Error(ErrorCode::offline, "variant " + variant + " of " + at + " is not complete in the cache at " +
                                                root.string() + " (" + entry.path + " is missing); fetch it first");
        }
    }
    return (cache.snapshot_dir(choice.commit) / "build" / variant).string();
}

CacheVerifyReport Client::cache_verify(bool repair) {
    const std::filesystem::path root = absolute_root(m_impl->settings);
    cacheadmin::VerifyOptions options;
    options.repair = repair;
    // Taking a blob lock is only needed to remove a blob; the probe writes.
    options.use_locks = repair && locks_work(m_impl->settings, root);
    options.cancel = m_impl->options.cancel;
    return cacheadmin::verify_cache(root, options);
}

PruneReport Client::cache_prune(const PruneOptions& options) {
    const std::filesystem::path root = absolute_root(m_impl->settings);
    cacheadmin::PruneRequest request;
    request.dry_run = options.dry_run;
    request.partials = options.partials;
    for (const auto& file : options.keep_locks) {
        for (const auto& [folder, commits] : cacheadmin::locked_commits(file, m_impl->options.cancel)) {
            request.keep[folder].insert(commits.begin(), commits.end());
        }
    }
    request.use_locks = locks_work(m_impl->settings, root);
    request.cancel = m_impl->options.cancel;
    PruneReport report = cacheadmin::prune_cache(root, request);
    std::sort(report.removed.begin(), report.removed.end());
    return report;
}

}  // namespace kernhub
