// Client::cache_export and Client::cache_import (docs/ARCHITECTURE.md,
// "Cache archives"): names resolve through the registry and the cache's
// refs, never the network; the cache module does the rest.
#include "api/client_impl.hpp"
#include "cacheadmin/cache_archive.hpp"

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

}  // namespace

ExportReport Client::cache_export(const std::string& file, const std::vector<std::string>& refs) {
    std::vector<cacheadmin::ExportSelection> selections;
    selections.reserve(refs.size());
    for (const auto& ref : refs)
        selections.push_back(cached_selection(m_impl->registry, m_impl->settings.cache_root, ref));
    cacheadmin::ExportStats stats =
        cacheadmin::export_cache(m_impl->settings.cache_root, selections, file, m_impl->options.cancel);
    ExportReport report;
    report.file = file;
    report.entries = stats.entries;
    report.bytes = stats.bytes;
    report.compression = archive::to_string(stats.compression);
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
