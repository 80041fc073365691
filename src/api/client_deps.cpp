// Kernel dependencies and the kernels release a variant needs
// (docs/registry.md, "Kernel dependencies"): ClientImpl::fetch takes
// a kernel's "kernel-depends" tree along.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>

#include "api/client_impl.hpp"
#include "cache/cache.hpp"
#include "common/text.hpp"
#include "deptree/tree.hpp"
#include "kernhub/error.hpp"

namespace kernhub {

namespace fs = std::filesystem;

deptree::VariantMetadata api::variant_metadata(const fs::path& variant_dir, const std::string& where) {
    const fs::path path = variant_dir / "metadata.json";
    std::string text;
    const cache::ReadStatus status = cache::read_file_into(path, text, deptree::k_max_metadata_bytes + 1);
    if (status.error == ENOENT) return {};
    if (status.not_regular || status.error == EISDIR) {
        throw Error(ErrorCode::verification, "metadata.json of " + where + " (" + path.string() +
                                                 ") is not a regular file; the publisher must fix the variant");
    }
    if (status.error == EFBIG || status.error == EOVERFLOW || text.size() > deptree::k_max_metadata_bytes) {
        throw Error(ErrorCode::verification, "metadata.json of " + where + " is larger than k_max_metadata_bytes (" +
                                                 std::to_string(deptree::k_max_metadata_bytes) + " bytes)");
    }
    if (status.error != 0) {
        throw Error(ErrorCode::internal, "cannot read " + path.string() + ": " + std::strerror(status.error));
    }
    return deptree::parse_variant_metadata(text, where);
}

deptree::VariantMetadata api::variant_metadata(const FetchResult& fetched) {
    const bool has = std::any_of(fetched.files.begin(), fetched.files.end(),
                                 [](const FileInfo& file) { return file.path == "metadata.json"; });
    if (!has) return {};
    return variant_metadata(fetched.path, fetched.repo_id + " variant " + fetched.variant);
}

namespace {

// What makes two results one kernel: the repo and its commit and variant,
// or for a local kernel (no commit) its folder.
std::string kernel_identity(const FetchResult& result) {
    return ascii_lowercase(result.repo_id) + "@" +
           (result.commit.empty() ? "local:" + result.path : result.commit + "/" + result.variant);
}

}  // namespace

void api::check_one_version_each(const FetchResult& fetched) {
    std::map<std::string, const FetchResult*> seen;
    seen.emplace(ascii_lowercase(fetched.repo_id), &fetched);
    for (const FetchResult& dependency : fetched.dependencies) {
        auto [it, fresh] = seen.emplace(ascii_lowercase(dependency.repo_id), &dependency);
        // One commit and variant reached under several names is one kernel
        // (fetch_dependencies keeps it once); two builds are refused.
        if (fresh || kernel_identity(*it->second) == kernel_identity(dependency)) continue;
        throw Error(ErrorCode::load,
                    "the kernel-depends tree of " + fetched.repo_id + " holds " + dependency.repo_id + " twice, at " +
                        it->second->revision + " (" + it->second->commit.substr(0, 12) + ") and at " +
                        dependency.revision + " (" + dependency.commit.substr(0, 12) +
                        "); kernhub opens every kernel of a tree into one process, where two builds of one library "
                        "would share their symbols, so the publishers must agree on one version");
    }
}

void ClientImpl::check_minver(const deptree::VariantMetadata& metadata, const std::string& repo_id,
                              const std::string& variant) {
    const std::string problem = deptree::minver_problem(metadata);
    if (problem.empty()) return;
    const std::string what = variant.empty() ? repo_id : "variant " + variant + " of " + repo_id;
    if (!selecting_elsewhere()) {
        throw Error(ErrorCode::load, what + " " + problem +
                                         "; use a kernhub that follows a newer kernels, or an older version of "
                                         "the kernel");
    }
    say("warning: " + what + " " + problem + "; the machine it is fetched for needs that kernels");
}

fs::path ClientImpl::local_folder(const std::string& repo_id) const {
    if (settings.local_kernels.empty()) return {};
    const std::map<std::string, fs::path> folders =
        fetch::parse_local_kernels(settings.local_kernels, settings.local_kernels_named_by);
    const auto it = folders.find(repo_id);
    if (it == folders.end()) return {};
    std::error_code ec;
    const fs::path absolute = fs::absolute(it->second, ec);
    fs::path folder = (ec ? it->second : absolute).lexically_normal();
    if (folder.filename().empty() && folder.has_parent_path()) folder = folder.parent_path();  // "dir/." -> "dir"
    return folder;
}

FetchResult ClientImpl::fetch_local(const registry::KernelSpec& spec, const fs::path& folder,
                                    deptree::VariantMetadata& metadata) {
    const fetch::LocalVariant local = fetch::resolve_local_kernel(folder, host_facts(), spec.file);
    FetchResult result;
    result.name = spec.name;
    result.repo_id = spec.repo_id;
    result.repo_type = spec.repo_type;
    result.revision = spec.effective_revision();
    result.variant = local.variant;
    result.path = local.dir.string();
    result.local_folder = folder.string();
    for (const auto& file : local.files) result.files.push_back(FileInfo{file.path, file.size, {}});
    metadata = api::variant_metadata(local.dir, spec.repo_id + " variant " + local.variant + " in " + folder.string());
    check_minver(metadata, result.repo_id, result.variant);
    return result;
}

InfoResult ClientImpl::local_info(const registry::KernelSpec& spec, const fs::path& folder) {
    InfoResult info;
    info.name = spec.name;
    info.repo_id = spec.repo_id;
    info.repo_type = spec.repo_type;
    info.revision = spec.effective_revision();
    info.symbol = spec.symbol;
    info.local_folder = folder.string();
    const select::HostFacts& facts = host_facts();
    info.host = select::describe(facts);
    info.host_facts = host_detection().report;
    info.targets = facts.targets;
    const fetch::LocalVariant local = fetch::resolve_local_kernel(folder, facts, spec.file);
    info.selected = local.variant;
    info.variants.push_back(VariantStatus{local.variant, true, {}, api::load_refusal_of(local.variant)});
    std::vector<std::string> names{local.variant};
    for (const auto& rejection : local.selection.rejected) {
        info.variants.push_back(
            VariantStatus{rejection.variant, false, rejection.reason, api::load_refusal_of(rejection.variant)});
        names.push_back(rejection.variant);
    }
    std::sort(info.variants.begin(), info.variants.end(),
              [](const VariantStatus& a, const VariantStatus& b) { return a.name < b.name; });
    if (settings.host.empty()) info.tvm_ffi_runtime = loader::runtime_status(names, local.selection.runtime_problem);
    info.signature_policy = spec.signature;
    const deptree::VariantMetadata metadata = api::variant_metadata(local.dir, spec.repo_id + " (LOCAL_KERNELS)");
    info.python_depends = metadata.python_depends;
    info.provenance = metadata.provenance;
    return info;
}

registry::KernelSpec ClientImpl::dependency_spec(const deptree::KernelDependency& dep) const {
    registry::KernelSpec spec = registry::resolve_ref(registry, dep.repo_id);
    spec.name = dep.repo_id;
    spec.version = dep.version;
    spec.revision = dep.version ? std::string() : dep.revision;
    spec.symbol.clear();
    spec.op.clear();
    return spec;
}

registry::KernelSpec ClientImpl::dependency_spec_of(const FetchResult& fetched) const {
    return registry::resolve_ref(registry, fetched.repo_id);
}

FetchResult ClientImpl::fetch(const registry::KernelSpec& spec, PartialHolds* for_load) {
    const std::uint64_t before = requests();
    deptree::VariantMetadata metadata;
    FetchResult result = fetch_one(spec, metadata, for_load);
    result.dependencies = fetch_dependencies(result, metadata, for_load);
    for (const FetchResult& dependency : result.dependencies) result.bytes_downloaded += dependency.bytes_downloaded;
    result.requests = requests() - before;
    return result;
}

std::vector<FetchResult> ClientImpl::fetch_dependencies(const FetchResult& top,
                                                        const deptree::VariantMetadata& metadata,
                                                        PartialHolds* for_load) {
    if (metadata.depends.empty()) return {};
    std::map<std::string, FetchResult> fetched;
    const deptree::KernelDependency top_node{top.repo_id, std::nullopt, top.revision};
    const std::vector<deptree::KernelDependency> order =
        deptree::walk(top_node, metadata.depends, [&](const deptree::KernelDependency& dep) {
            deptree::VariantMetadata own;
            FetchResult result = fetch_one(dependency_spec(dep), own, for_load, true);
            // The name that led to it; under UNSTABLE_KERNELS_ALL_LATEST the
            // vN fetch_one chose instead.
            if (!settings.all_latest) result.revision = dep.ref();
            fetched[dep.label()] = std::move(result);
            return own.depends;
        });
    // A kernel is its commit and variant: reached under several names
    // (leaf@main and leaf@v2 on one commit) it is kept once, where it first
    // comes in load order, with every name that led to it.
    std::vector<FetchResult> out;
    out.reserve(order.size());
    std::map<std::string, std::size_t> kept;
    for (const deptree::KernelDependency& dep : order) {
        FetchResult& result = fetched[dep.label()];
        const auto [it, fresh] = kept.emplace(kernel_identity(result), out.size());
        if (!fresh) {
            out[it->second].revisions.push_back(result.revision);
            continue;
        }
        result.revisions = {result.revision};
        out.push_back(std::move(result));
    }
    return out;
}

}  // namespace kernhub
