// The two rule sets select_variant applies (docs/registry.md,
// "Variant selection"): kernhub's own for its native family, and the Python
// `kernels` library's for the families it defines (torch, torch-stable-abi,
// tvm-ffi, torch-<backend>, torch-universal), so that both tools choose the
// same variant of a repo on the same host.
#pragma once

#include <array>
#include <optional>
#include <string>

#include "select/variant.hpp"

namespace kernhub::select::rules {

// Why a candidate does not fit, and with missing_runtime that what it needs
// (the tvm-ffi runtime) is missing rather than the host unsuitable.
struct Mismatch {
    std::string reason;
    bool missing_runtime = false;
    std::string problem;  // with missing_runtime: why the runtime is missing
};

std::string version_text(int major, int minor);

// kernhub's native family: CUDA variants need the driver's CUDA (minors
// are backward compatible within a major); CPU variants fit any host of
// their CPU and OS, GPU hosts included.
std::optional<std::string> native_reason(const HostFacts& host, const Variant& variant);
// Larger is better: CUDA above CPU, host-specific above noarch, newest
// CUDA first.
using NativeKey = std::array<int, 4>;
NativeKey native_key(const Variant& variant);

// kernels' checks for one variant of its families against the selected
// backend, in kernels' order, except the tvm-ffi version, which
// tvm_ffi_reason checks once the runtime has been asked.
std::optional<std::string> kernels_reason(const HostFacts& host, const Backend& backend, const Variant& variant);
std::optional<Mismatch> tvm_ffi_reason(const RuntimeProbe& runtime, const Variant& variant);

// The torch fit rule, the one both selection and the loader apply
// (docs/registry.md, "Variant selection"): a torch variant needs exactly
// its torch major.minor, and a cxx11 or cxx98 tag the same C++ ABI (an
// unknown ABI fits untagged builds only); a torch-stable-abi variant needs
// its torch or any later one. nullopt for other families.
std::optional<std::string> torch_reason(const Variant& variant, const std::optional<std::pair<int, int>>& torch,
                                        const std::optional<bool>& cxx11_abi);
// The backend rule, shared the same way: given a CUDA x.y backend, builds
// for CUDA x.z with z <= y fit, and ROCm likewise; otherwise the backend
// must be the same (a Metal build also needs macOS 26). `legacy`: spell
// backends as legacy names do (cu128) rather than dotted (cuda-12.8).
std::optional<std::string> backend_reason(const HostFacts& host, const Backend& backend, const Backend& built,
                                          bool legacy = true);

// What a load refuses beyond selection, the one place it is said
// (docs/kernels.md, "What a load refuses that selection accepts"): a
// variant that fits the host but that kernhub cannot load in a process,
// with the reason; nullopt when kernhub loads it. `info` shows it.
std::optional<std::string> load_refusal(const Variant& variant);

// kernels' preference order; smaller is better, equal keys keep the
// listing's order: stable-abi (newest first), then torch (untagged before
// an ABI tag), then tvm-ffi, then compiled SDK builds, then torch- and
// mlx-<backend>, then universal, then sdk-<backend>, then sdk; within a
// group the highest backend minor first, then abi3 before abi3t, then the
// highest Python.
using KernelsKey = std::array<int, 7>;
KernelsKey kernels_key(const Variant& variant);

}  // namespace kernhub::select::rules
