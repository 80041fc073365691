// The list of kinds, and the choice of the one that loads a variant.
#include <algorithm>

#include "common/join.hpp"
#include "common/text.hpp"
#include "cuda/driver.hpp"
#include "kernhub/error.hpp"
#include "loader/kind.hpp"
#include "select/rules.hpp"

namespace kernhub::loader {

const std::vector<const Kind*>& kinds() {
    // Asked in this order: the kinds that own a family of variants (tvm-ffi,
    // torch ops) before those that go by the artifact's name, and among
    // those a shared object before a CUDA image. A new kind is one more line
    // here; one that owns a family whose artifact is also a shared object
    // goes before shared_object_kind(), which takes any .so it is offered.
    static const std::vector<const Kind*> list = {
        &tvm_ffi_kind(),
        &torch_op_kind(),
        &shared_object_kind(),
        &cuda_kernel_kind(),
    };
    return list;
}

const Kind* find_kind(const std::string& name) {
    for (const Kind* kind : kinds()) {
        if (name == kind->name()) return kind;
    }
    return nullptr;
}

LoadKind load_kind(const Kind& kind) {
    for (LoadKind each : {LoadKind::function, LoadKind::cuda_kernel, LoadKind::tvm_ffi, LoadKind::torch_op}) {
        if (std::string(to_string(each)) == kind.name()) return each;
    }
    throw Error(ErrorCode::internal, std::string("a loader kind without a LoadKind: ") + kind.name());
}

bool has_suffix(const std::string& path, const char* suffix) {
    const std::string tail(suffix);
    return path.size() > tail.size() && path.compare(path.size() - tail.size(), tail.size(), tail) == 0;
}

std::vector<std::string> underscore_libraries(const FetchResult& fetched, int depth) {
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

std::string choose_underscore_library(const LoadRequest& request, const std::string& family, const std::string& what) {
    if (!request.file.empty()) return request.file;
    // "library" -> "libraries": the files it names are libraries.
    const std::string plural = what.substr(0, what.size() - 1) + "ies";
    const FetchResult& fetched = request.fetched;
    for (int depth : {0, 1}) {
        const std::vector<std::string> found = underscore_libraries(fetched, depth);
        if (found.size() == 1) return found.front();
        if (found.size() > 1) {
            throw Error(ErrorCode::usage, family + " " + fetched.variant + " of " + fetched.repo_id + " has several " +
                                              plural + " (" + join(found, ", ") +
                                              "); name one with \"file\" in the registry");
        }
    }
    throw Error(ErrorCode::not_found, family + " " + fetched.variant + " of " + fetched.repo_id + " has no " + what +
                                          " (a _*.so file at its top level or one folder down); name the library "
                                          "with \"file\" in the registry");
}

std::optional<std::string> only_file(const LoadRequest& request, bool (*matches)(const std::string& path)) {
    std::vector<std::string> found;
    for (const auto& file : request.fetched.files) {
        if (matches(file.path)) found.push_back(file.path);
    }
    if (found.empty()) return std::nullopt;
    if (found.size() > 1) {
        throw Error(ErrorCode::usage, "variant " + request.fetched.variant + " of " + request.fetched.repo_id +
                                          " has several loadable files (" + join(found, ", ") +
                                          "); name one with \"file\" in the registry");
    }
    return found.front();
}

Pick pick(const LoadRequest& request) {
    const FetchResult& fetched = request.fetched;
    if (!request.file.empty() && std::none_of(fetched.files.begin(), fetched.files.end(),
                                              [&](const FileInfo& file) { return file.path == request.file; })) {
        throw Error(ErrorCode::not_found, "variant " + fetched.variant + " of " + fetched.repo_id + " has no file '" +
                                              request.file + "'; check the registry's \"file\"");
    }
    for (const Kind* kind : kinds()) {
        if (std::optional<std::string> artifact = kind->choose(request)) return Pick{kind, *artifact};
    }
    throw Error(ErrorCode::not_found, "variant " + fetched.variant + " of " + fetched.repo_id +
                                          " has no shared object, fatbin or cubin to load");
}

namespace {

// The kind that pick() takes and its artifact, or a null kind when none
// loads the variant; throws as a kind's choose() throws.
Pick first_choice(const LoadRequest& request) {
    for (const Kind* kind : kinds()) {
        if (std::optional<std::string> artifact = kind->choose(request)) return Pick{kind, *artifact};
    }
    return Pick{};
}

}  // namespace

std::optional<std::set<std::string>> files_to_read(const std::string& repo_id, const std::string& variant,
                                                   const std::vector<std::string>& files, const std::string& file,
                                                   bool dependency) {
    LoadRequest request;
    request.fetched.repo_id = repo_id;
    request.fetched.variant = variant;
    for (const std::string& path : files) request.fetched.files.push_back(FileInfo{path, 0, {}});
    request.variant = select::parse_variant(variant);
    request.file = file;
    const auto listed = [&](const std::string& path) {
        return std::find(files.begin(), files.end(), path) != files.end();
    };
    if (!file.empty() && !listed(file)) return std::nullopt;  // pick() refuses it, after the whole fetch
    std::set<std::string> needed;
    if (listed("metadata.json")) needed.insert("metadata.json");
    Pick chosen;
    try {
        chosen = first_choice(request);
    } catch (const Error&) {
        return std::nullopt;  // several loadable files and the like: the message stays the load's
    }
    if (chosen.kind == nullptr) {
        if (dependency) return needed;  // opened for nothing; its metadata names its own dependencies
        return std::nullopt;
    }
    needed.insert(chosen.artifact);
    const std::filesystem::path folder = std::filesystem::path(chosen.artifact).parent_path();
    // The dynamic loader may need a shared object beside the artifact
    // (DT_NEEDED through $ORIGIN): those in its folder come along.
    for (const std::string& path : files) {
        const bool beside = std::filesystem::path(path).parent_path() == folder;
        if (beside && (has_suffix(path, ".so") || path.find(".so.") != std::string::npos)) needed.insert(path);
    }
    if (chosen.kind == &torch_op_kind()) {
        const std::string ops_py = (folder / "_ops.py").string();
        if (listed(ops_py)) {
            needed.insert(ops_py);
        } else {
            for (const std::string& path : files) {
                if (path.find('/') == std::string::npos && has_suffix(path, ".zip")) needed.insert(path);
            }
        }
    }
    // The part must lead every kind to the same choice as the whole did.
    LoadRequest part = request;
    part.fetched.files.clear();
    for (const std::string& path : needed) part.fetched.files.push_back(FileInfo{path, 0, {}});
    try {
        const Pick again = first_choice(part);
        if (again.kind != chosen.kind || again.artifact != chosen.artifact) return std::nullopt;
    } catch (const Error&) {
        return std::nullopt;
    }
    return needed;
}

std::string runtime_status(const std::vector<std::string>& variants, const std::string& problem) {
    for (const Kind* kind : kinds()) {
        if (std::string status = kind->runtime_status(variants, problem); !status.empty()) return status;
    }
    return {};
}

namespace {

// A layout kernels 0.19.1 does not know holds what kernhub cannot find.
void check_layout(const LoadRequest& request) {
    const std::string problem = deptree::layout_problem(request.metadata);
    if (!problem.empty()) {
        throw Error(ErrorCode::load,
                    "variant " + request.fetched.variant + " of " + request.fetched.repo_id + " " + problem);
    }
}

// kernels 0.19.1's device arch check (its archs.py; deptree::arch_check
// says which builds it checks): a CUDA build whose metadata declares archs
// must run on this machine's device 0, as the CUDA driver reports its
// compute capability. Skipped without a driver or a device, and when the
// caller selects for another machine. A ROCm build's archs are not checked:
// kernhub loads no ROCm build (docs/registry.md, "Parity with the Python
// kernels library").
void check_device_arch(const LoadRequest& request) {
    const deptree::VariantMetadata& metadata = request.metadata;
    if (!request.check_device_arch || deptree::arch_check(metadata) != deptree::ArchCheck::cuda) return;
    if (!cuda::Driver::available()) return;
    cuda::DriverInfo info;
    try {
        info = cuda::Driver::instance().info();
    } catch (const Error&) {
        return;  // a driver that cannot describe its devices: the load itself will say why
    }
    if (info.devices.empty()) return;
    const cuda::Device& device = info.devices.front();
    if (deptree::supports_cuda_capability(metadata.backend_archs, {device.cc_major, device.cc_minor})) return;
    std::string archs;
    for (const std::string& arch : metadata.backend_archs) archs += (archs.empty() ? "" : ", ") + printable(arch);
    throw Error(ErrorCode::load, "variant " + request.fetched.variant + " of " + request.fetched.repo_id +
                                     " does not support this machine's GPU: CUDA capability " +
                                     std::to_string(device.cc_major) + "." + std::to_string(device.cc_minor) + " (" +
                                     printable(device.name) +
                                     ") is not among the architectures its metadata.json "
                                     "declares (" +
                                     archs + "); kernels refuses it too. Fetch a build for this GPU");
}

void refuse(const LoadRequest& request, const std::string& refusal) {
    throw Error(ErrorCode::load,
                "variant " + request.fetched.variant + " of " + request.fetched.repo_id + ": " + refusal);
}

// Whether a kind loads something of the variant: a dependency without
// (pure Python, a noarch torch variant) is there for the Python kernels
// library, and nothing of it is opened.
bool has_loadable(const LoadRequest& request) {
    return std::any_of(kinds().begin(), kinds().end(),
                       [&](const Kind* kind) { return kind->choose(request).has_value(); });
}

void check_kernel(const LoadRequest& request) {
    check_layout(request);
    check_device_arch(request);
    // A noarch or SDK build fits the host but holds nothing kernhub loads
    // as a kernel; a torch build for a backend kernhub does not load is
    // refused too (select::rules::load_refusal).
    if (request.variant) {
        if (std::optional<std::string> refusal = select::rules::load_refusal(*request.variant)) {
            refuse(request, *refusal);
        }
    }
}

// A dependency is checked as 0.19.1 validates every node of the tree:
// its layout and device arch, whether or not it has a library. Of the
// load refusals, a noarch or SDK dependency is exempt (it is opened where
// it has a library), and one with nothing to open is not refused.
void check_dependency(const LoadRequest& request) {
    check_layout(request);
    check_device_arch(request);
    if (!request.variant || request.variant->family == select::Family::noarch ||
        request.variant->family == select::Family::sdk || !has_loadable(request)) {
        return;
    }
    if (std::optional<std::string> refusal = select::rules::load_refusal(*request.variant)) refuse(request, *refusal);
}

}  // namespace

void check_tree(const LoadRequest& kernel, const std::vector<LoadRequest>& dependencies) {
    check_kernel(kernel);
    for (const LoadRequest& dependency : dependencies) check_dependency(dependency);
}

Loaded load(const LoadRequest& request) {
    check_kernel(request);
    const Pick chosen = pick(request);
    const Artifact artifact(request, chosen.artifact);
    Loaded loaded;
    loaded.kind = chosen.kind;
    loaded.file = artifact.path().string();
    loaded.resolved = chosen.kind->load(request, artifact);
    return loaded;
}

std::optional<std::string> load_dependency(const LoadRequest& request) {
    if (!has_loadable(request)) return std::nullopt;
    check_dependency(request);
    const Pick chosen = pick(request);
    const Artifact artifact(request, chosen.artifact);
    if (!chosen.kind->open_dependency(request, artifact)) return std::nullopt;
    return artifact.path().string();
}

}  // namespace kernhub::loader
