// The public C++ API: composes registry -> hub -> select -> fetch -> load.
#include <algorithm>
#include <cstring>

#include "api/client_impl.hpp"
#include "api/default_registry.hpp"
#include "api/file_bytes.hpp"
#include "api/settings.hpp"
#include "api/verified_load.hpp"
#include "common/join.hpp"
#include "common/text.hpp"
#include "cuda/driver.hpp"
#include "digest/digest.hpp"
#include "elf/elf_inspect.hpp"
#include "fatbin/fatbin.hpp"
#include "fetch/fetcher.hpp"
#include "fetch/parallel.hpp"
#include "kernhub/kernhub.hpp"
#include "loader/loader.hpp"
#include "registry/registry.hpp"
#include "select/variant.hpp"
#include "tvmffi/runtime.hpp"

namespace kernhub {

EventSink::~EventSink() = default;

const char* version() noexcept {
    return KERNHUB_VERSION;
}

void* resolved_address(const std::string& ref) {
    return loader::ResolvedTable::instance().find(ref);
}

void* detail::c_function_address(const std::string& ref) {
    const loader::Resolved entry = loader::ResolvedTable::instance().require(ref);
    if (entry.cuda || entry.tvm_ffi) {
        throw Error(ErrorCode::usage, "kernel '" + ref + "' is " +
                                          (entry.cuda ? "a CUDA kernel; launch it through CudaKernel"
                                                      : "a tvm-ffi function; call it through TvmFunction"));
    }
    return entry.address;
}

namespace {

bool has_suffix(const std::string& path, const char* suffix) {
    std::string tail(suffix);
    return path.size() > tail.size() && path.compare(path.size() - tail.size(), tail.size(), tail) == 0;
}

bool is_shared_object(const std::string& p) {
    return has_suffix(p, ".so") || p.find(".so.") != std::string::npos;
}
bool is_cuda_image(const std::string& p) {
    return has_suffix(p, ".fatbin") || has_suffix(p, ".cubin");
}

// The file to load: the registry's "file", else the variant's only shared
// object, else its only fatbin/cubin.
std::string choose_artifact(const FetchResult& fetched, const std::string& wanted) {
    if (!wanted.empty()) {
        for (const auto& file : fetched.files) {
            if (file.path == wanted) return file.path;
        }
        throw Error(ErrorCode::not_found, "variant " + fetched.variant + " of " + fetched.repo_id + " has no file '" +
                                              wanted + "'; check the registry's \"file\"");
    }
    for (auto matches : {is_shared_object, is_cuda_image}) {
        std::vector<std::string> found;
        for (const auto& file : fetched.files) {
            if (matches(file.path)) found.push_back(file.path);
        }
        if (found.size() == 1) return found.front();
        if (found.size() > 1) {
            std::string names;
            for (const auto& f : found) names += (names.empty() ? "" : ", ") + f;
            throw Error(ErrorCode::usage, "variant " + fetched.variant + " of " + fetched.repo_id +
                                              " has several loadable files (" + names +
                                              "); name one with \"file\" in the registry");
        }
    }
    throw Error(ErrorCode::not_found, "variant " + fetched.variant + " of " + fetched.repo_id +
                                          " has no shared object, fatbin or cubin to load");
}

// `_*.so` files of a variant at `depth` folders down (0: its top level).
std::vector<std::string> tvm_ffi_libraries(const FetchResult& fetched, int depth) {
    std::vector<std::string> found;
    for (const auto& file : fetched.files) {
        const std::string& path = file.path;
        const std::size_t slash = path.rfind('/');
        const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
        if (std::count(path.begin(), path.end(), '/') == depth && name.size() > 4 && name.front() == '_' &&
            has_suffix(name, ".so")) {
            found.push_back(path);
        }
    }
    return found;
}

// A tvm-ffi variant's library: the registry's "file", else the variant's
// only top-level `_*.so` (kernel-builder names it _<name>_<backend>_<hash>.so
// beside its Python glue), else its only `_*.so` one folder down (the
// layout with a Python package folder).
std::string choose_tvm_ffi_library(const FetchResult& fetched, const std::string& wanted) {
    if (!wanted.empty()) return choose_artifact(fetched, wanted);
    for (int depth : {0, 1}) {
        const std::vector<std::string> found = tvm_ffi_libraries(fetched, depth);
        if (found.size() == 1) return found.front();
        if (found.size() > 1) {
            throw Error(ErrorCode::usage, "tvm-ffi variant " + fetched.variant + " of " + fetched.repo_id +
                                              " has several libraries (" + join(found, ", ") +
                                              "); name one with \"file\" in the registry");
        }
    }
    throw Error(ErrorCode::not_found, "tvm-ffi variant " + fetched.variant + " of " + fetched.repo_id +
                                          " has no library (a _*.so file at its top level or one folder down); "
                                          "name the library with \"file\" in the registry");
}

// The runtime for a tvm-ffi variant, bound before its library is loaded
// (the library's NEEDED libtvm_ffi.so is then the bound one). A --target
// choice skipped selection's version check, so it is made here.
const tvmffi::Runtime& runtime_for(const std::string& library, const select::Variant& variant,
                                   const std::string& repo_id) {
    const tvmffi::Runtime& runtime = tvmffi::bind(library);
    if (static_cast<int>(runtime.version.major) != variant.family_major ||
        static_cast<int>(runtime.version.minor) != variant.family_minor) {
        throw Error(ErrorCode::load,
                    "variant " + variant.name + " of " + repo_id + " needs tvm-ffi " +
                        std::to_string(variant.family_major) + "." + std::to_string(variant.family_minor) +
                        ", and the runtime " + runtime.library + " is " + runtime.version_text() +
                        "; install the matching apache-tvm-ffi, or fetch a variant for " +
                        std::to_string(runtime.version.major) + "." + std::to_string(runtime.version.minor));
    }
    return runtime;
}

// The symbol for `symbol`; for a tvm-ffi function a missing one is named
// with the functions the library does have.
void* resolve_symbol(const loader::Library& library, const LoadResult& result, bool tvm_ffi) {
    std::string why = " has no tvm-ffi function ";
    try {
        void* address = library.symbol(result.symbol);
        // Calling a data object through the convention would jump into it.
        if (!tvm_ffi || loader::is_code_symbol(address)) return address;
        why = " exports data, not a tvm-ffi function, as ";
    } catch (const Error& e) {
        if (!tvm_ffi || e.code() != ErrorCode::not_found) throw;
    }
    std::vector<std::string> names;
    try {
        names = tvmffi::function_names(elf::inspect_elf_file(result.file).exported_functions);
    } catch (const Error&) {
        // The list only helps the message; the refusal stands without it.
    }
    constexpr std::size_t k_listed = 32;
    const std::size_t more = names.size() > k_listed ? names.size() - k_listed : 0;
    names.resize(names.size() - more);
    std::string has = names.empty() ? "none" : join(names);
    if (more > 0) has += " and " + std::to_string(more) + " more";
    throw Error(ErrorCode::not_found, result.file + why + quoted_name(result.symbol.substr(std::strlen("__tvm_ffi_"))) +
                                          " (symbol " + result.symbol + "); its functions: " + has +
                                          "; check the registry's \"symbol\"");
}

void record(const std::string& ref, LoadResult& result, bool tvm_ffi) {
    loader::Resolved resolved;
    resolved.address = result.address;
    if (tvm_ffi) {
        resolved.tvm_ffi = true;
        resolved.function = result.symbol.substr(std::strlen("__tvm_ffi_"));
        result.kind = "tvm-ffi";
    } else {
        result.kind = "function";
    }
    loader::ResolvedTable::instance().put(ref, resolved);
}

// Loads a fatbin or cubin image on device 0 after checking that it holds a
// binary the device can run, and returns the kernel handle. `image` is
// exactly what the driver gets.
void* load_cuda_image(const std::vector<std::uint8_t>& image, const std::string& label, const std::string& symbol) {
    fatbin::Fatbin parsed = fatbin::detect_format(image.data(), image.size()) == fatbin::Format::cubin
                                ? fatbin::parse_cubin(image.data(), image.size(), label)
                                : fatbin::parse_fatbin(image.data(), image.size(), label);
    cuda::Driver* driver = nullptr;
    try {
        driver = &cuda::Driver::instance();
    } catch (const Error& e) {
        throw Error(ErrorCode::load, "cannot load CUDA kernel '" + symbol + "' from " + label + ": " + e.message(),
                    e.context());
    }
    cuda::DriverInfo info = driver->info();
    if (info.devices.empty()) {
        throw Error(ErrorCode::load,
                    "cannot load CUDA kernel '" + symbol + "' from " + label + ": the CUDA driver reports no device");
    }
    const cuda::Device& device = info.devices.front();
    if (!fatbin::select_entry(parsed, device.cc_major, device.cc_minor)) {
        throw Error(ErrorCode::load, "no binary in " + label + " runs on " + driver->describe_device(device.index) +
                                         " (it has " + fatbin::describe_archs(parsed) + "); use a build for this GPU");
    }
    cuda::Library library = driver->load(image.data(), label, device.index);
    return library.kernel(symbol);
}

}  // namespace

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
    sources.env_value = env("KERNHUB_REGISTRY").value_or("");
    for (const auto& file : options.registries) sources.explicit_files.emplace_back(file);
    return registry::load_stack(sources);
}

}  // namespace api

Client::Client(Options options) : m_impl(std::make_unique<Impl>(std::move(options))) {}
Client::~Client() = default;
Client::Client(Client&&) noexcept = default;
Client& Client::operator=(Client&&) noexcept = default;

FetchResult Client::fetch(const std::string& ref) {
    return m_impl->fetch(registry::resolve_ref(m_impl->registry, ref));
}

FetchResult Client::Impl::fetch(const registry::KernelSpec& spec) {
    fetch::FetchRequest request = request_for(spec);
    std::uint64_t before = requests();
    fetch::Fetcher fetcher(settings.cache_root, hub_client(), options.events);
    fetcher.use_memo(&memo);
    fetch::FetchOutcome outcome = fetcher.fetch(request);

    FetchResult result;
    result.name = spec.name;
    result.repo_id = spec.repo_id;
    result.repo_type = to_string(spec.repo_type);
    result.revision = request.revision;
    result.commit = outcome.commit;
    result.variant = outcome.variant;
    result.path = outcome.variant_dir.string();
    for (const auto& file : outcome.files) result.files.push_back(FileInfo{file.path, file.size, file.sha256});
    result.bytes_downloaded = outcome.bytes_downloaded;
    result.requests = requests() - before;
    if (outcome.signature) result.signature = api::signature_info(*outcome.signature);
    return result;
}

LoadResult Client::load(const std::string& ref, const std::string& symbol_override) {
    registry::KernelSpec spec = registry::resolve_ref(m_impl->registry, ref);
    LoadResult result;
    result.symbol = symbol_override.empty() ? spec.symbol : symbol_override;
    if (result.symbol.empty()) {
        throw Error(ErrorCode::usage,
                    "no symbol to resolve for " + quoted_name(ref) +
                        ": give one (the CLI's --symbol, Client::load's symbol argument) or add the repo to a "
                        "registry with a \"symbol\" (entries naming the same repo must agree on it)");
    }
    result.fetch = m_impl->fetch(spec);
    const std::optional<select::Variant> variant = select::parse_variant(result.fetch.variant);
    const bool tvm_ffi_variant = variant && variant->family == select::Family::tvm_ffi;
    std::string artifact =
        tvm_ffi_variant ? choose_tvm_ffi_library(result.fetch, spec.file) : choose_artifact(result.fetch, spec.file);
    std::filesystem::path path = std::filesystem::path(result.fetch.path) / artifact;
    result.file = path.string();
    if (tvm_ffi_variant) {
        const std::string symbol = tvmffi::symbol_of(result.symbol);
        if (symbol.rfind("__tvm_ffi__", 0) == 0) {
            throw Error(ErrorCode::usage, quoted_name(result.symbol) + " names " + symbol +
                                              ", an internal symbol of tvm-ffi, not a function; name the function "
                                              "without the __tvm_ffi_ prefix");
        }
        runtime_for(m_impl->settings.tvm_ffi_library, *variant, result.fetch.repo_id);
        result.symbol = symbol;
    }
    if (m_impl->settings.verify_on_load) {
        return m_impl->load_verified(spec, ref, artifact, tvm_ffi_variant, std::move(result));
    }
    if (!tvm_ffi_variant && is_cuda_image(artifact)) {
        result.address = load_cuda_image(api::read_file_bytes(path.string()), path.string(), result.symbol);
        result.kind = "cuda-kernel";
        loader::ResolvedTable::instance().put(ref, loader::Resolved{result.address, true, 0, false, {}});
        return result;
    }
    loader::Library library = loader::Library::open(path);
    result.address = resolve_symbol(library, result, tvm_ffi_variant);
    record(ref, result, tvm_ffi_variant);
    return result;
}

// verify_on_load: the artifact's blob is opened once and hashed while it is
// copied; only that copy is loaded (a sealed memfd for a shared object, the
// buffer handed to the driver for a fatbin or cubin), so nothing can change
// the bytes between the check and the use (docs/ARCHITECTURE.md "Loading").
LoadResult Client::Impl::load_verified(const registry::KernelSpec& spec, const std::string& ref,
                                       const std::string& artifact, bool tvm_ffi, LoadResult result) {
    auto it = std::find_if(result.fetch.files.begin(), result.fetch.files.end(),
                           [&](const FileInfo& f) { return f.path == artifact; });
    if (it == result.fetch.files.end()) {
        throw Error(ErrorCode::verification, result.file + " is not among the verified files of variant " +
                                                 result.fetch.variant + "; fetch again");
    }
    cache::RepoCache cache(settings.cache_root, spec.repo_type, spec.repo_id);
    const api::VerifiedSource source =
        api::verified_source(cache, result.fetch.commit, "build/" + result.fetch.variant + "/" + artifact, it->sha256,
                             it->size, result.file);
    if (!tvm_ffi && is_cuda_image(artifact)) {
        std::vector<std::uint8_t> image;
        image.reserve(source.size);
        api::read_verified(source, [&](const void* data, std::size_t size) {
            const auto* bytes = static_cast<const std::uint8_t*>(data);
            image.insert(image.end(), bytes, bytes + size);
        });
        result.address = load_cuda_image(image, result.file, result.symbol);
        result.kind = "cuda-kernel";
        loader::ResolvedTable::instance().put(ref, loader::Resolved{result.address, true, 0, false, {}});
        return result;
    }
    loader::SealedImage image(std::filesystem::path(artifact).filename().string());
    const std::string sha256 =
        api::read_verified(source, [&](const void* data, std::size_t size) { image.append(data, size); });
    image.seal();
    loader::Library library = loader::Library::open_sealed(std::move(image), result.file, sha256);
    result.address = resolve_symbol(library, result, tvm_ffi);
    record(ref, result, tvm_ffi);
    return result;
}

InfoResult Client::info(const std::string& ref) {
    registry::KernelSpec spec = registry::resolve_ref(m_impl->registry, ref);
    fetch::FetchRequest request = m_impl->request_for(spec);
    std::uint64_t before = m_impl->requests();
    fetch::Fetcher fetcher(m_impl->settings.cache_root, m_impl->hub_client(), m_impl->options.events);
    fetcher.use_memo(&m_impl->memo);
    fetch::VariantChoice choice = fetcher.choose(request);

    InfoResult info;
    info.name = spec.name;
    info.repo_id = spec.repo_id;
    info.repo_type = to_string(spec.repo_type);
    info.revision = request.revision;
    info.commit = choice.commit;
    info.symbol = spec.symbol;
    info.host = select::describe(request.host);
    info.targets = request.host.targets;
    if (choice.selection.chosen) {
        info.selected = *choice.selection.chosen;
        info.variants.push_back(VariantStatus{info.selected, true, {}});
    }
    for (const auto& rejection : choice.selection.rejected) {
        info.variants.push_back(VariantStatus{rejection.variant, false, rejection.reason});
    }
    const bool has_tvm_ffi =
        std::any_of(choice.candidates.begin(), choice.candidates.end(), [](const select::Candidate& candidate) {
            const std::optional<select::Variant> variant = select::parse_variant(candidate.name);
            return variant && variant->family == select::Family::tvm_ffi;
        });
    if (has_tvm_ffi) {
        const tvmffi::Runtime* runtime = tvmffi::bound();
        info.tvm_ffi_runtime =
            runtime != nullptr ? runtime->version_text() + " at " + runtime->library : choice.selection.runtime_problem;
    }
    std::sort(info.variants.begin(), info.variants.end(),
              [](const VariantStatus& a, const VariantStatus& b) { return a.name < b.name; });
    info.signature_policy = spec.signature;
    if (request.signature && choice.selection.chosen) {
        // Who signed the selected variant: from its record when one vouches
        // for it under this policy, else verified now (two small files).
        info.signature = api::signature_info(fetcher.signature_of(request, choice));
    }
    info.requests = m_impl->requests() - before;
    return info;
}

std::vector<RegistryEntry> Client::list() const {
    std::vector<RegistryEntry> out;
    for (const auto& spec : m_impl->registry.entries()) {
        out.push_back(RegistryEntry{spec.name, spec.repo_id, to_string(spec.repo_type), spec.revision, spec.version,
                                    spec.symbol, spec.file, spec.source, spec.signature});
    }
    return out;
}

std::vector<LoadResult> Client::prewarm(const std::vector<std::string>& refs) {
    // Side by side (load is thread-safe); after a failure no further kernel
    // starts, and the first failure in the order given is thrown.
    std::vector<LoadResult> results(refs.size());
    fetch::run_parallel(refs.size(), api::parallel_kernels(m_impl->settings),
                        [&](std::size_t i) { results[i] = load(refs[i]); });
    return results;
}

}  // namespace kernhub
