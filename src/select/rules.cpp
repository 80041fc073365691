// Both rule sets of select_variant, kept apart from the walk that applies
// them (select.cpp). Reasons are one short clause each: a failed selection
// lists one per variant.
#include "select/rules.hpp"

namespace kernhub::select::rules {
namespace {

// Macs before this cannot load the Metal 4 code that Metal variants carry
// (`kernels` refuses them on older systems too).
constexpr std::pair<int, int> k_metal_min_macos{26, 0};

std::string pair_text(const std::pair<int, int>& version) {
    return version_text(version.first, version.second);
}

std::string torch_text(const std::optional<std::pair<int, int>>& torch) {
    return torch ? "torch " + pair_text(*torch) : std::string("no torch");
}

std::string abi_word(const std::optional<bool>& cxx11) {
    if (!cxx11) return "an unknown ABI";
    return *cxx11 ? "the cxx11 ABI" : "the cxx98 ABI";
}

// Families and backends kernhub cannot load at all, whatever the host.
std::optional<std::string> unsupported_native(const Variant& variant) {
    if (variant.backend.kind == BackendKind::cpu || variant.backend.kind == BackendKind::cuda) return std::nullopt;
    return kind_word(variant.backend.kind) + " is not supported by kernhub's native family";
}

std::optional<std::string> platform_reason(const HostFacts& host, const Variant& variant) {
    if (variant.noarch || (variant.cpu == host.cpu && variant.os == host.os)) return std::nullopt;
    return "built for " + variant.cpu + "-" + variant.os + ", host is " + host.cpu + "-" + host.os;
}

std::string python_text(const std::pair<int, int>& version) {
    return "Python " + pair_text(version);
}

// A build's Python tag against the host's Python: abi3 does not load in a
// free-threaded Python, and the tag's version is a minimum.
std::optional<std::string> python_reason(const HostFacts& host, const PythonTag& tag) {
    const std::pair<int, int> python = host.python.value_or(k_default_python);
    if (!tag.abi3t && host.free_threaded) {
        return "an abi3 build, and the host's " + python_text(python) + " is free-threaded (it loads abi3t only)";
    }
    if (python < std::make_pair(tag.major, tag.minor)) {
        return "needs " + python_text({tag.major, tag.minor}) + " or later, host has " + python_text(python);
    }
    return std::nullopt;
}

std::optional<std::string> system_reason(const HostFacts& host, const Variant& variant) {
    if (variant.cpu != host.cpu) return "built for CPU " + variant.cpu + ", host is " + host.cpu;
    if (variant.os != host.os) return "built for OS " + variant.os + ", host is " + host.os;
    return std::nullopt;
}

bool same_backend(const Backend& a, const Backend& b) {
    return a.kind == b.kind && a.versioned == b.versioned && (!a.versioned || (a.major == b.major && a.minor == b.minor));
}

// The word a noarch or sdk-<word> name is matched with: the backend's kind.
std::optional<std::string> word_reason(const Variant& variant, const Backend& backend, bool universal_fits) {
    const std::string want = kind_word(backend.kind);
    if (variant.backend_word == want || (universal_fits && variant.backend_word == "universal")) return std::nullopt;
    const std::string prefix = variant.family == Family::sdk ? "sdk-" : variant.mlx ? "mlx-" : "torch-";
    return "a " + prefix + variant.backend_word + " build, the backend is " + want;
}

}  // namespace

std::string version_text(int major, int minor) {
    return std::to_string(major) + "." + std::to_string(minor);
}

std::optional<std::string> native_reason(const HostFacts& host, const Variant& variant) {
    if (auto reason = unsupported_native(variant)) return reason;
    if (auto reason = platform_reason(host, variant)) return reason;
    if (variant.backend.kind != BackendKind::cuda) return std::nullopt;
    if (!host.cuda) return "needs CUDA, host has no CUDA driver";
    const auto [host_major, host_minor] = *host.cuda;
    const Backend& need = variant.backend;
    if (!need.versioned || (need.major == host_major && need.minor <= host_minor)) return std::nullopt;
    return "needs CUDA " + version_text(need.major, need.minor) + ", host has " + version_text(host_major, host_minor);
}

NativeKey native_key(const Variant& variant) {
    return {variant.backend.kind == BackendKind::cuda ? 1 : 0, variant.noarch ? 0 : 1, variant.backend.major,
            variant.backend.minor};
}

std::optional<std::string> torch_reason(const Variant& variant, const std::optional<std::pair<int, int>>& torch,
                                        const std::optional<bool>& cxx11_abi) {
    const std::pair<int, int> built{variant.family_major, variant.family_minor};
    if (variant.family == Family::torch) {
        if (!torch || *torch != built) return "needs torch " + pair_text(built) + ", host has " + torch_text(torch);
        const bool tagged = !variant.cxx_abi.empty();
        if (tagged && (!cxx11_abi || *cxx11_abi != (variant.cxx_abi == "cxx11"))) {
            return "built for the " + variant.cxx_abi + " ABI, torch uses " + abi_word(cxx11_abi);
        }
    } else if (variant.family == Family::torch_stable_abi && (!torch || built > *torch)) {
        return "needs torch " + pair_text(built) + " or newer, host has " + torch_text(torch);
    }
    return std::nullopt;
}

std::optional<std::string> backend_reason(const HostFacts& host, const Backend& backend, const Backend& built,
                                          bool legacy) {
    const bool minors_compatible = (backend.kind == BackendKind::cuda || backend.kind == BackendKind::rocm) &&
                                   built.kind == backend.kind && built.versioned && backend.versioned;
    if (minors_compatible) {
        if (built.major == backend.major && built.minor <= backend.minor) return std::nullopt;
        const std::string name = backend.kind == BackendKind::cuda ? "CUDA " : "ROCm ";
        return "needs " + name + version_text(built.major, built.minor) + ", the backend is " + name +
               version_text(backend.major, backend.minor);
    }
    if (!same_backend(built, backend)) {
        const auto spelled = legacy ? backend_spelling : backend_dotted;
        return "built for " + spelled(built) + ", the backend is " + spelled(backend);
    }
    if (built.kind == BackendKind::metal && (!host.macos || *host.macos < k_metal_min_macos)) {
        return "Metal variants need macOS " + pair_text(k_metal_min_macos) + " or later, host has " +
               (host.macos ? "macOS " + pair_text(*host.macos) : std::string("no macOS version"));
    }
    return std::nullopt;
}

std::optional<std::string> kernels_reason(const HostFacts& host, const Backend& backend, const Variant& variant) {
    if (variant.family == Family::noarch) {
        if (variant.mlx && !host.mlx) return "an MLX build, and the host has no MLX";
        return word_reason(variant, backend, true);
    }
    if (variant.python) {
        if (auto reason = python_reason(host, *variant.python)) return reason;
        if (auto reason = system_reason(host, variant)) return reason;
    }
    if (variant.family == Family::sdk) {
        if (!variant.backend_word.empty()) return word_reason(variant, backend, false);
        if (variant.backend.kind == BackendKind::none) return std::nullopt;
    } else if (auto reason = torch_reason(variant, host.torch, host.torch_cxx11_abi)) {
        return reason;
    }
    return backend_reason(host, backend, variant.backend, variant.legacy);
}

std::optional<std::string> load_refusal(const Variant& variant) {
    switch (variant.family) {
        case Family::noarch:
            return "a noarch build holds Python code only, which kernhub does not load; load it from Python with "
                   "the kernels library";
        case Family::sdk:
            return "an SDK build is for other kernels to build on, and kernhub loads kernels, not SDKs";
        case Family::torch:
        case Family::torch_stable_abi:
            if (variant.backend.kind == BackendKind::cpu || variant.backend.kind == BackendKind::cuda) {
                return std::nullopt;
            }
            return "built for " + kind_word(variant.backend.kind) +
                   ", and kernhub loads torch variants built for the CPU or CUDA; load it from Python with the "
                   "kernels library";
        default:
            return std::nullopt;
    }
}

std::optional<Mismatch> tvm_ffi_reason(const RuntimeProbe& runtime, const Variant& variant) {
    const std::pair<int, int> built{variant.family_major, variant.family_minor};
    const std::string need = "tvm-ffi " + pair_text(built);
    if (!runtime.version) {
        return Mismatch{"needs the " + need + " runtime (libtvm_ffi.so), which kernhub did not find", true,
                        runtime.problem};
    }
    if (*runtime.version == built) return std::nullopt;
    return Mismatch{"needs " + need + ", the runtime is tvm-ffi " + pair_text(*runtime.version), false, {}};
}

KernelsKey kernels_key(const Variant& variant) {
    const Backend& backend = variant.backend;
    const bool minor_ranks = backend.kind == BackendKind::cuda || backend.kind == BackendKind::rocm ||
                             backend.kind == BackendKind::xpu || backend.kind == BackendKind::cann;
    const int backend_order = minor_ranks ? -backend.minor : 0;
    const PythonTag python = variant.python.value_or(PythonTag{});
    const int abi_order = python.abi3t ? 1 : 0;
    switch (variant.family) {
        case Family::torch_stable_abi:
            return {0, -variant.family_major, -variant.family_minor, backend_order, abi_order, -python.major,
                    -python.minor};
        case Family::torch:
            return {1, 0, variant.cxx_abi.empty() ? 0 : 1, backend_order, abi_order, -python.major, -python.minor};
        case Family::tvm_ffi:
            return {2, 0, 0, backend_order, abi_order, -python.major, -python.minor};
        case Family::sdk:
            if (variant.python) {
                // A backend-agnostic compiled SDK ranks below any for a backend.
                const int order = backend.kind == BackendKind::none ? 1 : backend_order;
                return {3, 0, 0, order, abi_order, -python.major, -python.minor};
            }
            return {variant.backend_word.empty() ? 6 : 5, 0, 0, 0, 0, 0, 0};
        default:  // noarch: torch- and mlx-<backend>, universal after them
            return {4, 0, 0, variant.backend_word == "universal" ? 1 : 0, 0, 0, 0};
    }
}

}  // namespace kernhub::select::rules
