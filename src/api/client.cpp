// The public C++ API: composes registry -> hub -> select -> fetch -> load.
#include <algorithm>
#include <atomic>
#include <vector>

#include <unistd.h>

#include "api/client_impl.hpp"
#include "api/default_registry.hpp"
#include "api/setting_table.hpp"
#include "api/settings.hpp"
#include "common/crash_point.hpp"
#include "common/hint.hpp"
#include "common/text.hpp"
#include "deptree/metadata.hpp"
#include "fetch/fetcher.hpp"
#include "fetch/parallel.hpp"
#include "kernhub/kernhub.hpp"
#include "loader/kind.hpp"
#include "registry/registry.hpp"
#include "select/variant.hpp"

namespace kernhub {

EventSink::~EventSink() = default;

const char* version() noexcept {
    return KERNHUB_VERSION;
}

const char* kernels_release() noexcept {
    return deptree::k_kernels_release;
}

void expect_kind(const LoadResult& result, LoadKind kind) {
    const std::string name = "kernel '" + (result.ref.empty() ? result.fetch.name : result.ref) + "'";
    const bool loaded = result.kind == LoadKind::torch_op ? !result.torch_op.empty() : result.address != nullptr;
    if (!loaded) {
        throw Error(ErrorCode::usage, name + " holds no loaded kernel; pass a result of Client::load or loaded");
    }
    if (result.kind == kind) return;
    const loader::Kind* actual = loader::find_kind(to_string(result.kind));
    if (actual == nullptr) throw Error(ErrorCode::internal, name + " is of an unknown kind");
    throw Error(ErrorCode::usage, name + " is " + actual->what() + "; " + actual->use_instead());
}

namespace api {

registry::Registry load_registries(const Options& options, const cache::EnvLookup& env) {
    registry::StackSources sources;
    if (!options.no_default_registry) {
        std::filesystem::path found = find_default_registry();
        if (!found.empty()) sources.default_file = found;
    }
    std::filesystem::path project =
        options.project_dir.empty() ? std::filesystem::current_path() : std::filesystem::path(options.project_dir);
    sources.project_file = project / "kernhub.json";
    sources.env_value = env(std::string(api::setting_for_field("registries").env)).value_or("");
    for (const auto& file : options.registries) sources.explicit_files.emplace_back(file);
    return registry::load_stack(sources);
}

}  // namespace api

void end_child_of_sink() noexcept {
    static constexpr char k_line[] =
        "kernhub: a child made by fork() inside an event sink or message function returned into its parent's "
        "call, which cannot go on across fork(); the child ends here (exit 1): exec or _exit in the child\n";
    (void)!::write(STDERR_FILENO, k_line, sizeof k_line - 1);
    ::_exit(1);
}

void ClientImpl::warn_unknown_variables() const {
    static std::atomic<bool> reported{false};
    if (options.events == nullptr || reported.exchange(true)) return;
    const std::vector<api::UnknownVariable> unknown = api::unknown_variables(environ);
    for (std::size_t i = 0; i < unknown.size() && i < api::k_max_named_variables; ++i) {
        say("warning: " + unknown[i].name + " is set but is not a kernhub setting" +
            (unknown[i].nearest.empty() ? "" : "; did you mean " + unknown[i].nearest + "?") +
            " (docs/configuration.md lists the settings)");
    }
    if (unknown.size() > api::k_max_named_variables) {
        say("warning: " + std::to_string(unknown.size() - api::k_max_named_variables) +
            " more KERNHUB_* variables are set that are no kernhub setting (k_max_named_variables)");
    }
}

Client::Client(Options options) : m_impl(std::make_unique<Impl>(std::move(options))) {}
Client::~Client() = default;
Client::Client(Client&&) noexcept = default;
Client& Client::operator=(Client&&) noexcept = default;

FetchResult Client::fetch(const std::string& ref) {
    return m_impl->fetch(registry::resolve_ref(m_impl->registry, ref));
}

FetchResult ClientImpl::fetch_one(const registry::KernelSpec& spec, deptree::VariantMetadata& metadata,
                                  PartialHolds* for_load, bool dependency) {
    if (const std::filesystem::path folder = local_folder(spec.repo_id); !folder.empty()) {
        // The organisation allow-list is the program's policy and holds for
        // local kernels too; trust and signatures are about a hub's bytes.
        api::check_allowed_org(settings, spec.repo_id);
        return fetch_local(spec, folder, metadata);
    }
    fetch::FetchRequest request = request_for(spec);
    bool parsed = false;  // by the hook, on a fetch that downloads
    request.check_metadata = [&](const std::string& variant, const std::string& text) {
        // Cold: refused before the variant's other files are downloaded.
        metadata = deptree::parse_variant_metadata(text, spec.repo_id + " variant " + variant);
        parsed = true;
        if (!selecting_elsewhere()) check_minver(metadata, spec.repo_id, variant);
    };
    if (for_load != nullptr) {
        // The load's kinds choose over the whole listing, so the files it
        // takes are the ones a load of the whole variant would read.
        request.files_to_read = [&spec, dependency](const std::string& variant, const std::vector<std::string>& files) {
            return loader::files_to_read(spec.repo_id, variant, files, spec.file, dependency);
        };
    }
    std::uint64_t before = requests();
    use_latest_version(spec, request);
    fetch::Fetcher fetcher(settings.cache_root, hub_client(), options.events);
    fetcher.use_memo(&memo);
    fetch::FetchOutcome outcome = fetcher.fetch(request);
    if (for_load != nullptr && outcome.hold) for_load->push_back(std::move(outcome.hold));

    FetchResult result;
    result.name = spec.name;
    result.repo_id = spec.repo_id;
    result.repo_type = spec.repo_type;
    result.revision = request.revision;
    result.commit = outcome.commit;
    result.variant = outcome.variant;
    result.path = outcome.variant_dir.string();
    for (const auto& file : outcome.files) result.files.push_back(FileInfo{file.path, file.size, file.sha256});
    result.bytes_downloaded = outcome.bytes_downloaded;
    result.requests = requests() - before;
    if (outcome.signature) result.signature = api::signature_info(*outcome.signature);
    // A warm fetch downloaded nothing: its metadata.json is read from the cache.
    if (!parsed) metadata = api::variant_metadata(result);
    check_minver(metadata, result.repo_id, result.variant);
    result.python_depends = metadata.python_depends;
    result.provenance = metadata.provenance;
    return result;
}

LoadResult Client::load(const std::string& ref, const std::string& symbol_override) {
    LoadOptions options;
    options.symbol = symbol_override;
    return load(ref, options);
}

LoadResult Client::load(const std::string& ref, const LoadOptions& options) {
    if (!m_impl->settings.host.empty()) {
        throw Error(ErrorCode::usage,
                    "a host description selects for another machine, and loading happens on this one; load without "
                    "it (fetch, lock, prewarm from a lock and mirror take it)",
                    hint::setting("host"));
    }
    registry::KernelSpec spec = registry::resolve_ref(m_impl->registry, ref);
    LoadResult result;
    result.ref = ref;
    result.symbol = options.symbol.empty() ? spec.symbol : options.symbol;
    const std::string op = options.op.empty() ? spec.op : options.op;
    if (result.symbol.empty() && op.empty()) {
        throw Error(ErrorCode::usage,
                    "no symbol to resolve for " + quoted_name(ref) +
                        ": add the repo to a registry with a \"symbol\" (entries naming the same repo must agree "
                        "on it), or give one",
                    hint::setting("load.symbol"));
    }
    // Numbered before the fetch: of overlapping loads of `ref`, the one
    // that started last is the one loaded() answers with.
    const std::uint64_t started = m_impl->resolved.start();
    ClientImpl::PartialHolds holds;  // until the libraries are open (cache-format.md, "Partial variants")
    result.fetch = m_impl->fetch(spec, &holds);
    std::string load_torch_from;
    if (options.load_torch) {
        // The torch the host facts found (KERNHUB_TORCH_DIR, the Python
        // environments); a torch the program stated is its own, already loaded.
        const std::optional<torchenv::FoundTorch>& torch = m_impl->host_detection().torch;
        if (torch && !torch->lib_dir.empty()) load_torch_from = torch->lib_dir.parent_path().string();
    }
    // Dependencies first, each opened for what it defines (docs/registry.md, "Kernel
    // dependencies"); every library joins one process, so a tree holding
    // two versions of one repo cannot load. What the tree's metadata and
    // names refuse is refused before the first library is opened, which
    // cannot be undone (loader::check_tree).
    api::check_one_version_each(result.fetch);
    const std::vector<loader::LoadRequest> dependencies = m_impl->dependency_requests(result.fetch, load_torch_from);
    loader::LoadRequest request = m_impl->load_request(result.fetch, spec.file);
    request.symbol = result.symbol;
    request.repo_type = spec.repo_type;
    request.op = op;
    request.load_torch_from = load_torch_from;
    loader::check_tree(request, dependencies);
    crash_point("opening");
    for (const loader::LoadRequest& opened : dependencies) {
        if (std::optional<std::string> file = loader::load_dependency(opened)) result.dependency_files.push_back(*file);
    }
    const loader::Loaded loaded = loader::load(request);
    result.file = loaded.file;
    result.kind = loader::load_kind(*loaded.kind);
    result.address = loaded.resolved.address;
    result.symbol = loaded.resolved.symbol;
    result.device = loaded.resolved.device;
    result.torch_op = loaded.resolved.torch_op;
    result.torch_version = loaded.resolved.torch_version;
    result.torch_library = loaded.resolved.torch_library;
    m_impl->resolved.publish(ref, result, started);
    return result;
}

LoadResult Client::loaded(const std::string& ref) const {
    std::optional<LoadResult> found = m_impl->resolved.find(ref);
    if (!found) {
        throw Error(ErrorCode::not_found, "kernel '" + ref +
                                              "' is not loaded by this Client; call load with the same "
                                              "name on this Client first");
    }
    return std::move(*found);
}

InfoResult Client::info(const std::string& ref) {
    registry::KernelSpec spec = registry::resolve_ref(m_impl->registry, ref);
    if (const std::filesystem::path folder = m_impl->local_folder(spec.repo_id); !folder.empty()) {
        api::check_allowed_org(m_impl->settings, spec.repo_id);
        return m_impl->local_info(spec, folder);
    }
    fetch::FetchRequest request = m_impl->request_for(spec);
    std::uint64_t before = m_impl->requests();
    m_impl->use_latest_version(spec, request);
    fetch::Fetcher fetcher(m_impl->settings.cache_root, m_impl->hub_client(), m_impl->options.events);
    fetcher.use_memo(&m_impl->memo);
    fetch::VariantChoice choice = fetcher.choose(request);

    InfoResult info;
    info.name = spec.name;
    info.repo_id = spec.repo_id;
    info.repo_type = spec.repo_type;
    info.revision = request.revision;
    info.commit = choice.commit;
    info.symbol = spec.symbol;
    info.host = select::describe(request.host);
    info.host_facts = m_impl->host_detection().report;
    info.targets = request.host.targets;
    if (choice.selection.chosen) {
        info.selected = *choice.selection.chosen;
        info.variants.push_back(VariantStatus{info.selected, true, {}, api::load_refusal_of(info.selected)});
    }
    for (const auto& rejection : choice.selection.rejected) {
        info.variants.push_back(
            VariantStatus{rejection.variant, false, rejection.reason, api::load_refusal_of(rejection.variant)});
    }
    std::vector<std::string> names;
    for (const auto& candidate : choice.candidates) names.push_back(candidate.name);
    // The runtime a kind of these variants needs (tvm-ffi's), or why none;
    // not asked for a described machine, whose runtime is not this one's.
    if (m_impl->settings.host.empty()) {
        info.tvm_ffi_runtime = loader::runtime_status(names, choice.selection.runtime_problem);
    }
    std::sort(info.variants.begin(), info.variants.end(),
              [](const VariantStatus& a, const VariantStatus& b) { return a.name < b.name; });
    info.signature_policy = spec.signature;
    if (request.signature && choice.selection.chosen) {
        // Who signed the selected variant: from its record when one vouches
        // for it under this policy, else verified now (two small files).
        info.signature = api::signature_info(fetcher.signature_of(request, choice));
    }
    if (choice.selection.chosen) {
        if (std::optional<std::string> text = fetcher.metadata_of(request, choice)) {
            const deptree::VariantMetadata metadata =
                deptree::parse_variant_metadata(*text, spec.repo_id + " variant " + info.selected);
            info.python_depends = metadata.python_depends;
            info.provenance = metadata.provenance;
        }
    }
    info.requests = m_impl->requests() - before;
    return info;
}

std::vector<RegistryEntry> Client::list() const {
    std::vector<RegistryEntry> out;
    for (const auto& spec : m_impl->registry.entries()) {
        out.push_back(RegistryEntry{spec.name, spec.repo_id, spec.repo_type, spec.revision, spec.version, spec.symbol,
                                    spec.file, spec.op, spec.source, spec.signature});
    }
    return out;
}

std::vector<LoadResult> Client::load(const std::vector<std::string>& refs) {
    // Side by side (load is thread-safe); after a failure no further kernel
    // starts, and the failure that happened first in time is thrown.
    std::vector<LoadResult> results(refs.size());
    fetch::run_parallel(refs.size(), api::parallel_kernels(m_impl->settings),
                        [&](std::size_t i) { results[i] = load(refs[i]); });
    return results;
}

std::vector<LoadResult> Client::load(std::initializer_list<std::string> refs) {
    return load(std::vector<std::string>(refs));
}

}  // namespace kernhub
