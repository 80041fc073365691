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

std::optional<std::string> framework_reason(const HostFacts& host, const Variant& variant) {
    const std::pair<int, int> built{variant.family_major, variant.family_minor};
    if (variant.family == Family::torch) {
        if (!host.torch || *host.torch != built) {
            return "needs torch " + pair_text(built) + ", host has " + torch_text(host.torch);
        }
        const bool tagged = !variant.cxx_abi.empty();
        if (tagged && (!host.torch_cxx11_abi || *host.torch_cxx11_abi != (variant.cxx_abi == "cxx11"))) {
            return "built for the " + variant.cxx_abi + " ABI, torch uses " + abi_word(host.torch_cxx11_abi);
        }
    } else if (variant.family == Family::torch_stable_abi && (!host.torch || built > *host.torch)) {
        return "needs torch " + pair_text(built) + " or newer, host has " + torch_text(host.torch);
    }
    return std::nullopt;
}

// Given a CUDA x.y backend, variants for CUDA x.z with z <= y fit;
// otherwise the backend must be spelled the same.
std::optional<std::string> backend_reason(const HostFacts& host, const Backend& backend, const Variant& variant) {
    const Backend& built = variant.backend;
    if (backend.kind == BackendKind::cuda && built.kind == BackendKind::cuda) {
        if (built.major == backend.major && built.minor <= backend.minor) return std::nullopt;
        return "needs CUDA " + version_text(built.major, built.minor) + ", the backend is CUDA " +
               version_text(backend.major, backend.minor);
    }
    if (backend_spelling(built) != backend_spelling(backend)) {
        return "built for " + backend_spelling(built) + ", the backend is " + backend_spelling(backend);
    }
    if (built.kind == BackendKind::metal && (!host.macos || *host.macos < k_metal_min_macos)) {
        return "Metal variants need macOS " + pair_text(k_metal_min_macos) + " or later, host has " +
               (host.macos ? "macOS " + pair_text(*host.macos) : std::string("no macOS version"));
    }
    return std::nullopt;
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

std::optional<std::string> kernels_reason(const HostFacts& host, const Backend& backend, const Variant& variant) {
    if (variant.family == Family::torch_universal) return std::nullopt;
    if (variant.family == Family::torch_noarch) {
        if (variant.backend.kind == backend.kind ||
            (variant.backend.kind == BackendKind::npu && backend.kind == BackendKind::cann)) {
            return std::nullopt;
        }
        return "a torch-" + kind_word(variant.backend.kind) + " build, the backend is " + kind_word(backend.kind);
    }
    if (variant.cpu != host.cpu) return "built for CPU " + variant.cpu + ", host is " + host.cpu;
    if (variant.os != host.os) return "built for OS " + variant.os + ", host is " + host.os;
    if (auto reason = framework_reason(host, variant)) return reason;
    return backend_reason(host, backend, variant);
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
    switch (variant.family) {
        case Family::torch_stable_abi:
            return {0, -variant.family_major, -variant.family_minor, backend_order};
        case Family::torch:
            return {1, 0, variant.cxx_abi.empty() ? 0 : 1, backend_order};
        case Family::tvm_ffi:
            return {2, 0, 0, backend_order};
        case Family::torch_universal:
            return {2, 0, 0, 1};
        default:  // torch-<backend>
            return {2, 0, 0, 0};
    }
}

}  // namespace kernhub::select::rules
