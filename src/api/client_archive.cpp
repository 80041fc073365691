// Client::cache_export and Client::cache_import (docs/cache-format.md,
// "Cache archives"): names resolve through the registry and the cache's
// refs, never the network; the cache module does the rest.
#include "api/client_impl.hpp"
#include "cacheadmin/cache_archive.hpp"
#include "deptree/tree.hpp"
#include "lockfile/lockfile.hpp"

#include <map>

namespace kernhub {

namespace {

// The commit `ref` names in the cache: a commit id as given, else the
// cache's refs/<revision> (a prewarmed image has no hub to ask).
cacheadmin::ExportSelection cached_selection(const registry::Registry& registry, const std::filesystem::path& root,
                                             const std::string& ref) {
    registry::KernelSpec spec = registry::resolve_ref(registry, ref);
    cache::RepoCache repo(root, spec.repo_type, spec.repo_id);
    const std::string revision = spec.effective_revision();
    std::optional<std::string> commit =
        is_commit_sha(revision) ? std::optional<std::string>(revision) : repo.read_ref(revision);
    if (!commit) {
        throw Error(ErrorCode::offline, "cannot export '" + ref + "': " + spec.repo_id + "@" + revision +
                                            " is not in the cache " + root.string() + " (no refs/" + revision +
                                            "); fetch or prewarm it first");
    }
    return cacheadmin::ExportSelection{spec.repo_type, spec.repo_id, *commit};
}

// The kernels the cached variants of `selection` name under
// "kernel-depends" (docs/registry.md, "Kernel dependencies"), all variants together.
std::vector<deptree::KernelDependency> cached_depends(const std::filesystem::path& root,
                                                      const cacheadmin::ExportSelection& selection) {
    const cache::RepoCache repo(root, selection.type, selection.repo_id);
    if (!selection.commit) return {};
    std::vector<deptree::VariantMetadata> variants;
    std::error_code ec;
    const std::filesystem::path build = repo.snapshot_path(*selection.commit, "build");
    for (std::filesystem::directory_iterator it(build, ec), end; !ec && it != end; it.increment(ec)) {
        if (variants.size() >= lockfile::k_max_lock_variants) break;
        std::error_code type_ec;
        if (!it->is_directory(type_ec)) continue;
        variants.push_back(
            api::variant_metadata(it->path(), selection.repo_id + " variant " + it->path().filename().string()));
    }
    return deptree::merged_depends(variants);
}

}  // namespace

ExportReport Client::cache_export(const std::string& file, const std::vector<std::string>& refs) {
    std::vector<cacheadmin::ExportSelection> selections;
    selections.reserve(refs.size());
    for (const auto& ref : refs)
        selections.push_back(cached_selection(m_impl->registry, m_impl->settings.cache_root, ref));
    // Each kernel's cached dependencies go along, found through the
    // cache's refs as the kernel's own revision is; one the cache lacks is
    // left out, with a warning (the archive is what this cache holds).
    const std::filesystem::path& root = m_impl->settings.cache_root;
    std::map<std::string, std::vector<deptree::KernelDependency>> expanded;
    const deptree::Expand export_dependency = [&](const deptree::KernelDependency& dep) {
        const std::string label = dep.label();
        if (auto done = expanded.find(label); done != expanded.end()) return done->second;
        std::vector<deptree::KernelDependency> depends;
        try {
            cacheadmin::ExportSelection selection = cached_selection(m_impl->registry, root, label);
            depends = cached_depends(root, selection);
            selections.push_back(std::move(selection));
        } catch (const Error& e) {
            if (e.code() != ErrorCode::offline) throw;
            m_impl->say("warning: the dependency " + label + " is not in the cache, so the archive leaves it out");
        }
        expanded.emplace(label, depends);
        return depends;
    };
    const std::size_t named = selections.size();
    for (std::size_t i = 0; i < named; ++i) {
        const registry::KernelSpec spec = registry::resolve_ref(m_impl->registry, refs[i]);
        const deptree::KernelDependency top{spec.repo_id, std::nullopt, spec.effective_revision()};
        (void)deptree::walk(top, cached_depends(root, selections[i]), export_dependency);
    }
    cacheadmin::ExportStats stats =
        cacheadmin::export_cache(m_impl->settings.cache_root, selections, file, m_impl->options.cancel);
    ExportReport report;
    report.file = file;
    report.entries = stats.entries;
    report.bytes = stats.bytes;
    report.compression = stats.compression;
    report.repos = stats.repos;
    return report;
}

ImportReport Client::cache_import(const std::string& file) {
    cacheadmin::ImportStats stats = cacheadmin::import_cache(m_impl->settings.cache_root, file, m_impl->options.cancel);
    ImportReport report;
    report.file = file;
    report.entries = stats.entries;
    report.blobs = stats.blobs;
    report.links = stats.links;
    report.refs = stats.refs;
    report.side_files = stats.side_files;
    report.skipped = stats.skipped;
    report.repos = stats.repos;
    return report;
}

}  // namespace kernhub
