// Client::mirror: fetch every wanted variant of each kernel through the cache
// (so each file is verified once, by the same pipeline as fetch), then lay
// the verified blobs out as a static hub tree (docs/ci-images.md,
// "How a mirror tree is written").
#include <algorithm>
#include <map>
#include <set>

#include "api/client_impl.hpp"
#include "common/hint.hpp"
#include "common/join.hpp"
#include "deptree/tree.hpp"
#include "fetch/parallel.hpp"
#include "mirror/mirror.hpp"

namespace kernhub {

namespace {

// The variants of the repo to mirror: the target ones it has, the one a
// described host selects, or all.
std::vector<std::string> variants_to_mirror(const fetch::VariantChoice& choice, const api::Settings& settings,
                                            const std::string& where) {
    const std::vector<std::string>& targets = settings.targets;
    std::vector<std::string> available;
    for (const auto& candidate : choice.candidates) available.push_back(candidate.name);
    if (available.empty()) throw Error(ErrorCode::not_found, where + " has no build variants to mirror");
    if (!settings.host.empty()) {
        if (choice.selection.chosen) return {*choice.selection.chosen};
        throw Error(ErrorCode::not_found,
                    "no build variant of " + where +
                        " fits the described host: " + fetch::describe_rejections(choice.selection),
                    hint::setting("host"));
    }
    if (targets.empty()) return available;
    std::vector<std::string> chosen;
    for (const auto& target : targets) {
        bool has = std::find(available.begin(), available.end(), target) != available.end();
        if (has && std::find(chosen.begin(), chosen.end(), target) == chosen.end()) chosen.push_back(target);
    }
    if (chosen.empty()) {
        throw Error(ErrorCode::not_found,
                    "none of the targets (" + join(targets) + ") is in " + where + "; it has " + join(available),
                    hint::setting("targets"));
    }
    return chosen;
}

// What mirroring one kernel needs from the client.
struct MirrorRun {
    const api::Settings& settings;
    bool use_locks;
    const std::atomic<bool>* cancel;
    fetch::Fetcher& fetcher;
    // For the fetchers of variants fetched side by side.
    hub::HubClient* client;
    EventSink* events;
    mirror::HubTree& tree;
    MirrorReport& report;
    // With a host description: its facts, which choose the one variant to
    // mirror; null otherwise (a mirror serves every variant or the targets).
    const select::HostFacts* host;
};

MirroredKernel mirror_kernel(const registry::KernelSpec& spec, MirrorRun& run);

// What the mirrored variants' metadata.json files name under
// "kernel-depends", all variants together.
std::vector<deptree::KernelDependency> mirrored_depends(const MirroredKernel& kernel, const api::Settings& settings) {
    const cache::RepoCache cache(settings.cache_root, kernel.repo_type, kernel.repo_id);
    std::vector<deptree::VariantMetadata> variants;
    variants.reserve(kernel.variants.size());
    for (const std::string& variant : kernel.variants) {
        variants.push_back(api::variant_metadata(cache.snapshot_path(kernel.commit, "build/" + variant),
                                                 kernel.repo_id + " variant " + variant));
    }
    return deptree::merged_depends(variants);
}

}  // namespace

namespace {

// Mirrors each kernel with its "kernel-depends" tree, then writes each
// mirrored organisation's overview (docs/trust.md, "Trusted publishers").
void mirror_trees(ClientImpl& impl, const std::vector<registry::KernelSpec>& specs, MirrorRun& run,
                  mirror::HubTree& tree) {
    // Each kernel's "kernel-depends" tree comes along (docs/registry.md, "Kernel
    // dependencies"): the same variants of each dependency, once.
    std::map<std::string, std::vector<deptree::KernelDependency>> expanded;
    std::set<std::string> organizations;
    const auto mirror_one = [&](const registry::KernelSpec& spec) {
        // The allow-list before anything is asked, as for a fetch.
        api::check_allowed_org(impl.settings, spec.repo_id);
        impl.check_publisher(spec);
        organizations.insert(spec.repo_id.substr(0, spec.repo_id.find('/')));
        return mirror_kernel(spec, run);
    };
    const deptree::Expand mirror_dependency = [&](const deptree::KernelDependency& dep) {
        const std::string label = dep.label();
        if (auto done = expanded.find(label); done != expanded.end()) return done->second;
        registry::KernelSpec dep_spec = impl.dependency_spec(dep);
        dep_spec.name = label;
        MirroredKernel kernel = mirror_one(dep_spec);
        std::vector<deptree::KernelDependency> depends = mirrored_depends(kernel, impl.settings);
        run.report.kernels.push_back(std::move(kernel));
        expanded.emplace(label, depends);
        return depends;
    };
    for (const auto& spec : specs) {
        run.report.kernels.push_back(mirror_one(spec));
        const std::vector<deptree::KernelDependency> depends =
            mirrored_depends(run.report.kernels.back(), impl.settings);
        const deptree::KernelDependency top{spec.repo_id, std::nullopt, spec.effective_revision()};
        (void)deptree::walk(top, depends, mirror_dependency);
    }
    // Each mirrored organisation's overview, as the hub answers it, so
    // that a trusted-publisher check against the mirror gets the hub's
    // answer; an organisation the hub has none of gets none.
    if (impl.settings.offline) {
        if (!organizations.empty()) {
            impl.say("warning: offline, so the mirror gets no organisation overview (" +
                     join(std::vector<std::string>(organizations.begin(), organizations.end())) +
                     "); mirror online to add them");
        }
    } else {
        for (const std::string& org : organizations) {
            try {
                if (std::optional<std::string> overview = impl.hub_client()->organization_overview(org)) {
                    tree.set_organization(org, *overview);
                }
            } catch (const Error& e) {
                if (e.code() != ErrorCode::network) throw;
                impl.say("warning: the mirror has no overview of organisation " + org +
                         ", since the hub's could not be read (" + e.plain_message() + ")");
            }
        }
    }
}

}  // namespace

MirrorReport Client::mirror(const std::vector<std::string>& refs, const MirrorOptions& options) {
    if (options.to.empty()) {
        throw Error(ErrorCode::usage, "mirroring needs the folder of the static hub tree to write",
                    hint::setting("mirror.to"));
    }
    if (refs.empty() && options.nginx_conf.empty()) {
        throw Error(ErrorCode::usage,
                    "nothing to mirror: name kernels (NAME or ORG/REPO[@REV]), or the nginx configuration file to "
                    "write for an existing tree",
                    hint::setting("mirror.nginx_conf"));
    }
    if (!options.nginx_conf.empty()) mirror::check_listen(options.listen);
    // Every name is resolved before anything is written.
    std::vector<registry::KernelSpec> specs;
    specs.reserve(refs.size());
    for (const auto& ref : refs) specs.push_back(registry::resolve_ref(m_impl->registry, ref));

    MirrorReport report;
    std::error_code ec;
    report.to = std::filesystem::absolute(options.to, ec).lexically_normal().string();
    if (ec) report.to = options.to;
    const std::uint64_t before = m_impl->requests();
    if (!specs.empty()) {
        mirror::HubTree tree(report.to);
        fetch::Fetcher fetcher(m_impl->settings.cache_root, m_impl->hub_client(), m_impl->options.events);
        MirrorRun run{m_impl->settings,
                      m_impl->settings.use_flock,
                      m_impl->options.cancel,
                      fetcher,
                      m_impl->hub_client(),
                      m_impl->options.events,
                      tree,
                      report,
                      m_impl->settings.host.empty() ? nullptr : &m_impl->host_facts()};
        mirror_trees(*m_impl, specs, run, tree);
    }
    if (!options.nginx_conf.empty()) {
        report.nginx_conf = std::filesystem::absolute(options.nginx_conf, ec).lexically_normal().string();
        if (ec) report.nginx_conf = options.nginx_conf;
        cache::write_file_atomic(report.nginx_conf, mirror::nginx_conf(report.to, options.listen));
    }
    report.requests = m_impl->requests() - before;
    return report;
}

namespace {

// A mirror's fetch of one repo: every variant, not one to load.
fetch::FetchRequest mirror_request(const registry::KernelSpec& spec, const MirrorRun& run) {
    const api::Settings& settings = run.settings;
    api::check_allowed_org(settings, spec.repo_id);
    fetch::FetchRequest request;
    request.repo = hub::RepoRef{spec.repo_type, spec.repo_id};
    request.revision = spec.effective_revision();
    request.offline = settings.offline;
    request.use_locks = run.use_locks;
    request.cancel = run.cancel;
    request.max_connections = settings.max_connections;
    if (run.host != nullptr) request.host = *run.host;
    // The registry's "file" picks a variant to load; a mirror serves them all.
    return request;
}

// Each variant of `kernel` fetched (side by side, each by a fetcher of its
// own), and the files of all of them as the mirror lays them out.
std::vector<mirror::MirrorFile> fetch_variants(const fetch::FetchRequest& request, MirroredKernel& kernel,
                                               MirrorRun& run, const cache::RepoCache& cache) {
    const api::Settings& settings = run.settings;
    std::vector<std::uint64_t> downloaded(kernel.variants.size(), 0);
    fetch::run_parallel(kernel.variants.size(), api::parallel_kernels(settings), [&](std::size_t i) {
        fetch::FetchRequest one = request;
        one.host.targets = {kernel.variants[i]};
        fetch::Fetcher variant_fetcher(settings.cache_root, run.client, run.events);
        downloaded[i] = variant_fetcher.fetch(one).bytes_downloaded;
    });
    std::vector<mirror::MirrorFile> files;
    for (std::size_t i = 0; i < kernel.variants.size(); ++i) {
        run.report.bytes_downloaded += downloaded[i];
        const std::string prefix = "build/" + kernel.variants[i] + "/";
        for (const auto& entry : run.fetcher.last_listing()) {
            if (!entry.is_file || entry.path.rfind(prefix, 0) != 0) continue;
            files.push_back(mirror::MirrorFile{entry, cache.blob_path(entry.etag())});
            kernel.bytes += entry.size;
        }
    }
    return files;
}

MirroredKernel mirror_kernel(const registry::KernelSpec& spec, MirrorRun& run) {
    const api::Settings& settings = run.settings;
    MirrorReport& report = run.report;
    fetch::FetchRequest request = mirror_request(spec, run);
    const fetch::VariantChoice choice = run.fetcher.choose(request);
    const std::string where =
        (spec.repo_type == RepoType::kernel ? "kernel repo " : "model repo ") + spec.repo_id + "@" + request.revision;
    MirroredKernel kernel;
    kernel.name = spec.name;
    kernel.repo_id = spec.repo_id;
    kernel.repo_type = spec.repo_type;
    kernel.revision = request.revision;
    kernel.commit = choice.commit;
    kernel.variants = variants_to_mirror(choice, settings, where);
    // By commit from here on: the listing is cached now, so each variant
    // costs no revision or listing request.
    request.revision = choice.commit;
    cache::RepoCache cache(settings.cache_root, spec.repo_type, spec.repo_id);
    const std::vector<mirror::MirrorFile> files = fetch_variants(request, kernel, run, cache);
    kernel.files = files.size();
    mirror::PlaceCounts placed = run.tree.add_files(request.repo, choice.commit, files);
    report.files_linked += placed.linked;
    report.files_copied += placed.copied;
    report.files_unchanged += placed.unchanged;
    if (!is_commit_sha(kernel.revision)) {
        run.tree.set_revision(request.repo, kernel.revision, choice.commit);
        // As fetch does: the cache's ref follows the hub, so a later
        // --offline mirror or fetch of the same name finds the commit.
        if (!settings.offline && cache.read_ref(kernel.revision) != choice.commit) {
            cache.write_ref(kernel.revision, choice.commit);
        }
    }
    return kernel;
}

}  // namespace

}  // namespace kernhub
