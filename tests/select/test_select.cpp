// select_variant against a table of hosts, repo contents and expected verdicts.
// Each row lists the full `rejected` list, so a reason, an order or a missing
// candidate that changes fails the row.
#include <catch2/catch.hpp>

#include "select/variant.hpp"

using namespace kernhub::select;

namespace {

HostFacts host_on(const std::string& cpu, const std::string& os) {
    HostFacts host;
    host.cpu = cpu;
    host.os = os;
    return host;
}

const HostFacts k_cpu_host = host_on("x86_64", "linux");

HostFacts gpu_host(int major, int minor) {
    HostFacts host = k_cpu_host;
    host.cuda = std::make_pair(major, minor);
    return host;
}

HostFacts with_torch(HostFacts host, int major, int minor) {
    host.torch = std::make_pair(major, minor);
    return host;
}

// A host whose tvm-ffi runtime answers (major, minor).
HostFacts with_abi(HostFacts host, bool cxx11) {
    host.torch_cxx11_abi = cxx11;
    return host;
}

Backend versioned_backend(BackendKind kind, int major, int minor) {
    Backend backend;
    backend.kind = kind;
    backend.major = major;
    backend.minor = minor;
    backend.versioned = true;
    return backend;
}

Backend cuda_backend(int major, int minor) {
    return versioned_backend(BackendKind::cuda, major, minor);
}

Backend rocm_backend(int major, int minor) {
    return versioned_backend(BackendKind::rocm, major, minor);
}

HostFacts with_backend(HostFacts host, Backend backend) {
    host.backend = backend;
    return host;
}

HostFacts with_python(HostFacts host, int major, int minor, bool free_threaded) {
    host.python = std::make_pair(major, minor);
    host.free_threaded = free_threaded;
    return host;
}

// torch-2.10-cxx11-cuda-12.8-<python>-x86_64-linux
std::string d210(const std::string& python) {
    return "torch-2.10-cxx11-cuda-12.8-" + python + "-x86_64-linux";
}

HostFacts with_tvm_ffi(HostFacts host, int major, int minor) {
    host.tvm_ffi = [major, minor] { return RuntimeProbe{std::make_pair(major, minor), {}}; };
    return host;
}

HostFacts with_targets(HostFacts host, std::vector<std::string> targets) {
    host.targets = std::move(targets);
    return host;
}

Candidate cand(const std::string& name, std::vector<std::string> files = {"kernel.so"}) {
    return {name, std::move(files)};
}

std::string why(const std::string& variant, const std::string& reason) {
    return variant + ": " + reason;
}

std::string lower(const std::string& variant, const std::string& chosen) {
    return why(variant, "lower preference than " + chosen);
}

struct SelectRow {
    std::string what;
    HostFacts host;
    std::vector<Candidate> candidates;
    std::optional<std::string> required_file;
    std::optional<std::string> chosen;
    std::vector<std::string> rejected;  // "variant: reason", in order
};

const std::string ncpu = "native-cpu-x86_64-linux";
const std::string ncpu_arm = "native-cpu-aarch64-linux";
const std::string ncuda = "native-cuda";
const std::string cu118 = "native-cu118-x86_64-linux";
const std::string cu124 = "native-cu124-x86_64-linux";
const std::string cu126 = "native-cu126-x86_64-linux";
const std::string cu128 = "native-cu128-x86_64-linux";
const std::string cu129 = "native-cu129-x86_64-linux";
const std::string cu130 = "native-cu130-x86_64-linux";
const std::string t28cu128 = "torch28-cxx11-cu128-x86_64-linux";
const std::string no_cuda = "needs CUDA, host has no CUDA driver";

// CUDA versions and the host platform.
std::vector<SelectRow> cuda_and_platform_rows() {
    return {
        {"CPU-only host never picks CUDA, even native-cuda",
         k_cpu_host,
         {cand(cu128), cand(ncuda), cand(ncpu)},
         {},
         ncpu,
         {why(cu128, no_cuda), why(ncuda, no_cuda)}},
        {"CPU-only host with only CUDA variants selects nothing",
         with_abi(with_torch(k_cpu_host, 2, 8), true),
         {cand(cu128), cand(ncuda), cand(t28cu128), cand("torch-cuda")},
         {},
         {},
         {why(cu128, no_cuda), why(ncuda, no_cuda), why(t28cu128, "built for cu128, the backend is cpu"),
          why("torch-cuda", "a torch-cuda build, the backend is cpu")}},
        {"cu minor above the host's is rejected",
         gpu_host(12, 8),
         {cand(cu129), cand(cu128)},
         {},
         cu128,
         {why(cu129, "needs CUDA 12.9, host has 12.8")}},
        {"highest matching cu version wins",
         gpu_host(12, 8),
         {cand(cu124), cand(cu128), cand(cu126)},
         {},
         cu128,
         {lower(cu124, cu128), lower(cu126, cu128)}},
        {"CUDA major must be equal",
         gpu_host(12, 8),
         {cand(cu118), cand(cu130)},
         {},
         {},
         {why(cu118, "needs CUDA 11.8, host has 12.8"), why(cu130, "needs CUDA 13.0, host has 12.8")}},
        {"minor 0 host accepts only its major",
         gpu_host(13, 0),
         {cand(cu128), cand(cu130)},
         {},
         cu130,
         {why(cu128, "needs CUDA 12.8, host has 13.0")}},
        {"host-specific native-cu over noarch native-cuda",
         gpu_host(12, 8),
         {cand(ncuda), cand(cu126)},
         {},
         cu126,
         {lower(ncuda, cu126)}},
        {"CUDA variant above CPU variant on a CUDA host",
         gpu_host(12, 8),
         {cand(ncpu), cand(ncuda)},
         {},
         ncuda,
         {lower(ncpu, ncuda)}},
        {"CUDA host falls back to native-cpu",
         gpu_host(12, 8),
         {cand(ncpu), cand(cu130)},
         {},
         ncpu,
         {why(cu130, "needs CUDA 13.0, host has 12.8")}},
        {"cpu and os must match the host",
         k_cpu_host,
         {cand(ncpu_arm), cand("native-cpu-x86_64-darwin"), cand("native-cu128-aarch64-linux")},
         {},
         {},
         {why(ncpu_arm, "built for aarch64-linux, host is x86_64-linux"),
          why("native-cpu-x86_64-darwin", "built for x86_64-darwin, host is x86_64-linux"),
          why("native-cu128-aarch64-linux", "built for aarch64-linux, host is x86_64-linux")}},
        {"aarch64 host picks its own build",
         host_on("aarch64", "linux"),
         {cand(ncpu), cand(ncpu_arm)},
         {},
         ncpu_arm,
         {why(ncpu, "built for x86_64-linux, host is aarch64-linux")}},
    };
}

const std::string s28cu126 = "torch-stable-abi28-cu126-x86_64-linux";
const std::string t28cpu = "torch28-cpu-x86_64-linux";
const std::string t28cxx11cpu = "torch28-cxx11-cpu-x86_64-linux";

// Torch families follow the `kernels` rules (the differential test in
// tests/select/kernels_differential.py compares them with the real
// library on generated cases); these rows name the rules one by one.
std::vector<SelectRow> torch_rows() {
    return {
        {"torch and stable-abi variants need a torch; torch-universal does not",
         gpu_host(12, 8),
         {cand(t28cu128), cand("torch-stable-abi29-cu128-x86_64-linux"), cand("torch-universal")},
         {},
         "torch-universal",
         {why(t28cu128, "needs torch 2.8, host has no torch"),
          why("torch-stable-abi29-cu128-x86_64-linux", "needs torch 2.9 or newer, host has no torch")}},
        {"versioned torch needs the exact major.minor",
         with_abi(with_torch(gpu_host(12, 8), 2, 8), true),
         {cand("torch27-cxx11-cu128-x86_64-linux"), cand("torch28-cxx11-cu126-x86_64-linux"),
          cand("torch29-cxx11-cu128-x86_64-linux")},
         {},
         "torch28-cxx11-cu126-x86_64-linux",
         {why("torch27-cxx11-cu128-x86_64-linux", "needs torch 2.7, host has torch 2.8"),
          why("torch29-cxx11-cu128-x86_64-linux", "needs torch 2.9, host has torch 2.8")}},
        {"torch210 is 2.10, not 2.1",
         with_abi(with_torch(k_cpu_host, 2, 10), true),
         {cand("torch21-cxx11-cpu-x86_64-linux"), cand("torch210-cxx11-cpu-x86_64-linux")},
         {},
         "torch210-cxx11-cpu-x86_64-linux",
         {why("torch21-cxx11-cpu-x86_64-linux", "needs torch 2.1, host has torch 2.10")}},
        {"an ABI tag must match torch's ABI; an unknown ABI takes untagged builds only",
         with_torch(k_cpu_host, 2, 8),
         {cand(t28cxx11cpu), cand("torch28-cxx98-cpu-x86_64-linux")},
         {},
         {},
         {why(t28cxx11cpu, "built for the cxx11 ABI, torch uses an unknown ABI"),
          why("torch28-cxx98-cpu-x86_64-linux", "built for the cxx98 ABI, torch uses an unknown ABI")}},
        {"an untagged torch build ranks above a tagged one",
         with_abi(with_torch(k_cpu_host, 2, 8), true),
         {cand(t28cxx11cpu), cand(t28cpu), cand("torch28-cxx98-cpu-x86_64-linux")},
         {},
         t28cpu,
         {lower(t28cxx11cpu, t28cpu),
          why("torch28-cxx98-cpu-x86_64-linux", "built for the cxx98 ABI, torch uses the cxx11 ABI")}},
        {"stable ABI runs on newer torch; newest matching wins",
         with_torch(k_cpu_host, 2, 9),
         {cand("torch-stable-abi28-cpu-x86_64-linux"), cand("torch-stable-abi29-cpu-x86_64-linux"),
          cand("torch-stable-abi210-cpu-x86_64-linux")},
         {},
         "torch-stable-abi29-cpu-x86_64-linux",
         {lower("torch-stable-abi28-cpu-x86_64-linux", "torch-stable-abi29-cpu-x86_64-linux"),
          why("torch-stable-abi210-cpu-x86_64-linux", "needs torch 2.10 or newer, host has torch 2.9")}},
        {"kernels order: stable ABI > versioned > noarch > universal",
         with_abi(with_torch(gpu_host(12, 8), 2, 8), true),
         {cand("torch-universal"), cand("torch-cuda"), cand(t28cu128), cand(s28cu126)},
         {},
         s28cu126,
         {lower("torch-universal", s28cu126), lower("torch-cuda", s28cu126), lower(t28cu128, s28cu126)}},
        {"on a CUDA backend CPU builds do not fit, noarch torch-cpu included",
         with_abi(with_torch(gpu_host(12, 8), 2, 8), true),
         {cand(t28cxx11cpu), cand("torch-cpu"), cand("torch-stable-abi28-cpu-x86_64-linux")},
         {},
         {},
         {why(t28cxx11cpu, "built for cpu, the backend is cu128"),
          why("torch-cpu", "a torch-cpu build, the backend is cuda"),
          why("torch-stable-abi28-cpu-x86_64-linux", "built for cpu, the backend is cu128")}},
        {"torch's build decides the backend: a CUDA torch selects CUDA builds without a driver",
         with_backend(with_torch(k_cpu_host, 2, 8), cuda_backend(13, 0)),
         {cand(t28cpu), cand("torch28-cu130-x86_64-linux"), cand(ncpu)},
         {},
         "torch28-cu130-x86_64-linux",
         {why(t28cpu, "built for cpu, the backend is cu130"), lower(ncpu, "torch28-cu130-x86_64-linux")}},
        {"a free-threaded Python takes abi3t builds only; legacy names count as abi3",
         with_python(with_abi(with_torch(gpu_host(12, 8), 2, 10), true), 3, 15, true),
         {cand("torch210-cxx11-cu128-x86_64-linux"), cand(d210("cpython-3.15-abi3")),
          cand(d210("cpython-3.15-abi3t"))},
         {},
         d210("cpython-3.15-abi3t"),
         {why("torch210-cxx11-cu128-x86_64-linux",
              "an abi3 build, and the host's Python 3.15 is free-threaded (it loads abi3t only)"),
          why(d210("cpython-3.15-abi3"), "an abi3 build, and the host's Python 3.15 is free-threaded (it loads abi3t only)")}},
        {"the Python tag is a minimum; abi3 before abi3t, then the higher Python",
         with_python(with_abi(with_torch(gpu_host(12, 8), 2, 10), true), 3, 15, false),
         {cand(d210("cpython-3.15-abi3t")), cand(d210("cpython-3.9-abi3")), cand(d210("cpython-3.12-abi3")),
          cand(d210("cpython-3.16-abi3"))},
         {},
         d210("cpython-3.12-abi3"),
         {lower(d210("cpython-3.15-abi3t"), d210("cpython-3.12-abi3")),
          lower(d210("cpython-3.9-abi3"), d210("cpython-3.12-abi3")),
          why(d210("cpython-3.16-abi3"), "needs Python 3.16 or later, host has Python 3.15")}},
        {"ROCm minors fit like CUDA's: an older 7.x minor of the host's ROCm 7.14",
         with_backend(with_abi(with_torch(k_cpu_host, 2, 9), true), rocm_backend(7, 14)),
         {cand("torch29-cxx11-rocm71-x86_64-linux"), cand("torch29-cxx11-rocm714-x86_64-linux"),
          cand("torch29-cxx11-rocm63-x86_64-linux")},
         {},
         "torch29-cxx11-rocm714-x86_64-linux",
         {lower("torch29-cxx11-rocm71-x86_64-linux", "torch29-cxx11-rocm714-x86_64-linux"),
          why("torch29-cxx11-rocm63-x86_64-linux", "needs ROCm 6.3, the backend is ROCm 7.14")}},
        {"CANN is no longer torch-npu: noarch names match the backend's own word",
         with_backend(with_torch(host_on("aarch64", "linux"), 2, 8), versioned_backend(BackendKind::cann, 8, 1)),
         {cand("torch-npu"), cand("torch-cann")},
         {},
         "torch-cann",
         {why("torch-npu", "a torch-npu build, the backend is cann")}},
        {"kernels 0.19 order: tvm-ffi, compiled SDK, noarch, universal, sdk-<backend>, sdk",
         with_tvm_ffi(gpu_host(12, 8), 0, 1),
         {cand("sdk"), cand("sdk-cuda"), cand("torch-universal"), cand("torch-cuda"),
          cand("sdk-cpython-3.9-abi3-x86_64-linux"), cand("sdk-cuda-12.8-cpython-3.9-abi3-x86_64-linux"),
          cand("tvm-ffi-0.1-cuda-12.8-cpython-3.9-abi3-x86_64-linux")},
         {},
         "tvm-ffi-0.1-cuda-12.8-cpython-3.9-abi3-x86_64-linux",
         {lower("sdk", "tvm-ffi-0.1-cuda-12.8-cpython-3.9-abi3-x86_64-linux"),
          lower("sdk-cuda", "tvm-ffi-0.1-cuda-12.8-cpython-3.9-abi3-x86_64-linux"),
          lower("torch-universal", "tvm-ffi-0.1-cuda-12.8-cpython-3.9-abi3-x86_64-linux"),
          lower("torch-cuda", "tvm-ffi-0.1-cuda-12.8-cpython-3.9-abi3-x86_64-linux"),
          lower("sdk-cpython-3.9-abi3-x86_64-linux", "tvm-ffi-0.1-cuda-12.8-cpython-3.9-abi3-x86_64-linux"),
          lower("sdk-cuda-12.8-cpython-3.9-abi3-x86_64-linux",
                "tvm-ffi-0.1-cuda-12.8-cpython-3.9-abi3-x86_64-linux")}},
        {"an SDK for a backend ranks above the backend-agnostic one; sdk-<backend> above sdk",
         gpu_host(12, 8),
         {cand("sdk"), cand("sdk-cuda"), cand("sdk-cpython-3.9-abi3-x86_64-linux"),
          cand("sdk-cuda-12.6-cpython-3.9-abi3-x86_64-linux"), cand("sdk-rocm")},
         {},
         "sdk-cuda-12.6-cpython-3.9-abi3-x86_64-linux",
         {lower("sdk", "sdk-cuda-12.6-cpython-3.9-abi3-x86_64-linux"),
          lower("sdk-cuda", "sdk-cuda-12.6-cpython-3.9-abi3-x86_64-linux"),
          lower("sdk-cpython-3.9-abi3-x86_64-linux", "sdk-cuda-12.6-cpython-3.9-abi3-x86_64-linux"),
          why("sdk-rocm", "a sdk-rocm build, the backend is cuda")}},
        {"mlx-<backend> needs MLX; a stable-ABI build fits a later torch major too",
         with_abi(with_torch(k_cpu_host, 3, 0), true),
         {cand("mlx-cpu"), cand("torch-stable-abi-2.11-cpu-cpython-3.9-abi3-x86_64-linux")},
         {},
         "torch-stable-abi-2.11-cpu-cpython-3.9-abi3-x86_64-linux",
         {why("mlx-cpu", "an MLX build, and the host has no MLX")}},
        {"native ranks above torch families",
         with_abi(with_torch(gpu_host(12, 8), 2, 8), true),
         {cand(t28cu128), cand(cu126)},
         {},
         cu126,
         {lower(t28cu128, cu126)}},
        {"torch CUDA build above native-cpu on a CUDA host",
         with_abi(with_torch(gpu_host(12, 8), 2, 8), true),
         {cand(ncpu), cand(t28cu128)},
         {},
         t28cu128,
         {lower(ncpu, t28cu128)}},
        {"torch-universal does not beat a native CPU build",
         k_cpu_host,
         {cand("torch-universal"), cand(ncpu)},
         {},
         ncpu,
         {lower("torch-universal", ncpu)}},
    };
}

std::vector<SelectRow> support_and_file_rows() {
    return {
        {"ROCm, XPU, Metal and NPU builds fit only their own backend",
         with_tvm_ffi(with_abi(with_torch(gpu_host(12, 8), 2, 8), true), 0, 1),
         {cand("torch28-cxx11-rocm63-x86_64-linux"), cand("torch28-cxx11-xpu20251-x86_64-linux"),
          cand("torch28-metal-aarch64-darwin"), cand("torch-npu"), cand("tvm-ffi01-rocm63-x86_64-linux")},
         {},
         {},
         {why("torch28-cxx11-rocm63-x86_64-linux", "built for rocm63, the backend is cu128"),
          why("torch28-cxx11-xpu20251-x86_64-linux", "built for xpu20251, the backend is cu128"),
          why("torch28-metal-aarch64-darwin", "built for CPU aarch64, host is x86_64"),
          why("torch-npu", "a torch-npu build, the backend is cuda"),
          why("tvm-ffi01-rocm63-x86_64-linux", "built for rocm63, the backend is cu128")}},
        {"a ROCm backend selects ROCm builds",
         with_backend(with_abi(with_torch(k_cpu_host, 2, 8), true), rocm_backend(6, 3)),
         {cand("torch28-cxx11-rocm63-x86_64-linux"), cand("torch28-cxx11-rocm64-x86_64-linux"), cand("torch-rocm")},
         {},
         "torch28-cxx11-rocm63-x86_64-linux",
         {why("torch28-cxx11-rocm64-x86_64-linux", "needs ROCm 6.4, the backend is ROCm 6.3"),
          lower("torch-rocm", "torch28-cxx11-rocm63-x86_64-linux")}},
        {"unrecognised names are rejected, not fatal",
         k_cpu_host,
         {cand("native-cpu-riscv-linux"), cand(ncpu), cand("README.md")},
         {},
         ncpu,
         {why("native-cpu-riscv-linux", "unrecognised variant name"), why("README.md", "unrecognised variant name")}},
        {"required file rules out the better variant",
         gpu_host(12, 8),
         {cand(cu128, {"libother.so"}), cand(cu126, {"metadata.json", "libvector_add.so"})},
         "libvector_add.so",
         cu126,
         {why(cu128, "lacks libvector_add.so")}},
        {"a variant with an archive may hold the required file inside it",
         gpu_host(12, 8),
         {cand(cu128, {"libother.so"}), cand(cu126, {"metadata.json", "kernel.tar.zst"})},
         "lib/libvector_add.so",
         cu126,
         {why(cu128, "lacks lib/libvector_add.so")}},
        {"required file is checked before host facts",
         k_cpu_host,
         {cand(cu128, {}), cand(ncpu, {"a.so"})},
         "kernel.so",
         {},
         {why(cu128, "lacks kernel.so"), why(ncpu, "lacks kernel.so")}},
        {"a torch build without ABI part ranks above cxx98",
         with_abi(with_torch(gpu_host(12, 8), 2, 9), false),
         {cand("torch29-cxx98-cu128-x86_64-linux"), cand("torch29-cu128-x86_64-linux")},
         {},
         "torch29-cu128-x86_64-linux",
         {lower("torch29-cxx98-cu128-x86_64-linux", "torch29-cu128-x86_64-linux")}},
        {"no candidates, no choice", gpu_host(12, 8), {}, {}, {}, {}},
    };
}

const std::string tvm01_cpu = "tvm-ffi01-cpu-x86_64-linux";
const std::string tvm02_cpu = "tvm-ffi02-cpu-x86_64-linux";
const std::string tvm01_cu126 = "tvm-ffi01-cu126-x86_64-linux";
const std::string tvm01_cu128 = "tvm-ffi01-cu128-x86_64-linux";
const std::string tvm01_cu129 = "tvm-ffi01-cu129-x86_64-linux";
const std::string tvm01_cu130 = "tvm-ffi01-cu130-x86_64-linux";
const std::string no_runtime = "needs the tvm-ffi 0.1 runtime (libtvm_ffi.so), which kernhub did not find";

// tvm-ffi variants: the runtime's major.minor, the backend and the
// platform must fit; native ranks above them, they rank above torch.
std::vector<SelectRow> tvm_ffi_rows() {
    return {
        {"tvm-ffi runs on the runtime of its own major.minor only",
         with_tvm_ffi(k_cpu_host, 0, 1),
         {cand(tvm02_cpu), cand(tvm01_cpu), cand("tvm-ffi00-cpu-x86_64-linux")},
         {},
         tvm01_cpu,
         {why(tvm02_cpu, "needs tvm-ffi 0.2, the runtime is tvm-ffi 0.1"),
          why("tvm-ffi00-cpu-x86_64-linux", "needs tvm-ffi 0.0, the runtime is tvm-ffi 0.1")}},
        {"an older tvm-ffi the runtime cannot run is named when nothing fits",
         with_tvm_ffi(k_cpu_host, 0, 1),
         {cand("tvm-ffi00-cpu-x86_64-linux")},
         {},
         {},
         {why("tvm-ffi00-cpu-x86_64-linux", "needs tvm-ffi 0.0, the runtime is tvm-ffi 0.1")}},
        {"without a runtime no tvm-ffi variant fits",
         k_cpu_host,
         {cand(tvm01_cpu)},
         {},
         {},
         {why(tvm01_cpu, no_runtime)}},
        {"native keeps priority over tvm-ffi when both fit",
         with_tvm_ffi(k_cpu_host, 0, 1),
         {cand(tvm01_cpu), cand(ncpu)},
         {},
         ncpu,
         {lower(tvm01_cpu, ncpu)}},
        {"torch ranks above tvm-ffi, as in kernels",
         with_tvm_ffi(with_torch(k_cpu_host, 2, 8), 0, 1),
         {cand(t28cpu), cand(tvm01_cpu)},
         {},
         t28cpu,
         {lower(tvm01_cpu, t28cpu)}},
        {"tvm-ffi CUDA backends follow the CUDA rules; its CPU build does not fit a CUDA backend",
         with_tvm_ffi(gpu_host(12, 8), 0, 1),
         {cand(tvm01_cpu), cand(tvm01_cu126), cand(tvm01_cu128), cand(tvm01_cu129), cand(tvm01_cu130)},
         {},
         tvm01_cu128,
         {why(tvm01_cpu, "built for cpu, the backend is cu128"), lower(tvm01_cu126, tvm01_cu128),
          why(tvm01_cu129, "needs CUDA 12.9, the backend is CUDA 12.8"),
          why(tvm01_cu130, "needs CUDA 13.0, the backend is CUDA 12.8")}},
        {"a CPU-only host never picks a tvm-ffi CUDA build",
         with_tvm_ffi(k_cpu_host, 0, 1),
         {cand(tvm01_cu128), cand(tvm01_cpu)},
         {},
         tvm01_cpu,
         {why(tvm01_cu128, "built for cu128, the backend is cpu")}},
        {"tvm-ffi for another platform",
         with_tvm_ffi(k_cpu_host, 0, 1),
         {cand("tvm-ffi01-cpu-aarch64-linux"), cand("tvm-ffi01-cpu-x86_64-darwin")},
         {},
         {},
         {why("tvm-ffi01-cpu-aarch64-linux", "built for CPU aarch64, host is x86_64"),
          why("tvm-ffi01-cpu-x86_64-darwin", "built for OS darwin, host is linux")}},
        {"tvm-ffi ranks above torch-<backend> (kernels 0.17 ranked them equal)",
         with_tvm_ffi(k_cpu_host, 0, 1),
         {cand("torch-cpu"), cand(tvm01_cpu)},
         {},
         tvm01_cpu,
         {lower("torch-cpu", tvm01_cpu)}},
    };
}

std::vector<SelectRow> detection_rows() {
    std::vector<SelectRow> rows = cuda_and_platform_rows();
    for (auto&& more : {torch_rows(), support_and_file_rows(), tvm_ffi_rows()}) {
        rows.insert(rows.end(), more.begin(), more.end());
    }
    return rows;
}

std::vector<SelectRow> target_rows() {
    const std::string missing = "no such variant in the repo";
    return {
        {"GPU target on a CPU-only host is honoured",
         with_targets(k_cpu_host, {cu128}),
         {cand(ncpu), cand(cu128), cand(ncuda)},
         {},
         cu128,
         {why(ncpu, "not a requested target"), why(ncuda, "not a requested target")}},
        {"first target in target order that exists wins",
         with_targets(k_cpu_host, {cu130, cu128, ncpu}),
         {cand(ncpu), cand(cu128)},
         {},
         cu128,
         {why(ncpu, "a later target than " + cu128), why(cu130, missing)}},
        {"several missing targets: nothing chosen, all reported",
         with_targets(gpu_host(12, 8), {t28cu128, cu130}),
         {cand(ncpu), cand(ncuda)},
         {},
         {},
         {why(ncpu, "not a requested target"), why(ncuda, "not a requested target"), why(t28cu128, missing),
          why(cu130, missing)}},
        {"target lacking the required file falls through to the next target",
         with_targets(k_cpu_host, {cu128, ncuda}),
         {cand(cu128, {"lib.so"}), cand(ncuda, {"kernel.fatbin"}), cand(ncpu, {"kernel.fatbin"})},
         "kernel.fatbin",
         ncuda,
         {why(cu128, "lacks kernel.fatbin"), why(ncpu, "not a requested target")}},
        {"unparseable names are allowed as targets",
         with_targets(k_cpu_host, {"my-custom-build"}),
         {cand(ncpu), cand("my-custom-build")},
         {},
         "my-custom-build",
         {why(ncpu, "not a requested target")}},
        {"torch target needs no torch on the host",
         with_targets(k_cpu_host, {t28cu128}),
         {cand(t28cu128), cand(ncpu)},
         {},
         t28cu128,
         {why(ncpu, "not a requested target")}},
        {"a target repeated is reported missing once",
         with_targets(k_cpu_host, {cu130, cu130}),
         {cand(ncpu)},
         {},
         {},
         {why(ncpu, "not a requested target"), why(cu130, missing)}},
    };
}

std::vector<std::string> flatten(const std::vector<Rejection>& rejected) {
    std::vector<std::string> lines;
    for (const Rejection& r : rejected) {
        lines.push_back(why(r.variant, r.reason));
    }
    return lines;
}

void check_row(const SelectRow& row) {
    INFO(row.what << " [host: " << describe(row.host) << "]");
    const Selection selection = select_variant(row.host, row.candidates, row.required_file);
    CHECK(selection.chosen == row.chosen);
    CHECK(flatten(selection.rejected) == row.rejected);
}

}  // namespace

TEST_CASE("select_variant by detection follows the kernels rules plus native first", "[select]") {
    check_row(GENERATE(from_range(detection_rows())));
}

TEST_CASE("select_variant with --target bypasses detection", "[select]") {
    check_row(GENERATE(from_range(target_rows())));
}

TEST_CASE("select_variant accounts for every candidate exactly once", "[select]") {
    std::vector<SelectRow> rows = detection_rows();
    for (SelectRow& row : target_rows()) {
        rows.push_back(std::move(row));
    }
    CHECK(rows.size() >= 20);
    for (const SelectRow& row : rows) {
        INFO(row.what);
        const Selection selection = select_variant(row.host, row.candidates, row.required_file);
        std::vector<std::string> expected;
        bool chosen_seen = false;
        for (const Candidate& c : row.candidates) {
            if (!chosen_seen && selection.chosen == c.name) {
                chosen_seen = true;
                continue;
            }
            expected.push_back(c.name);
        }
        CHECK(chosen_seen == selection.chosen.has_value());
        REQUIRE(selection.rejected.size() >= expected.size());
        for (std::size_t i = 0; i < expected.size(); ++i) {
            CHECK(selection.rejected[i].variant == expected[i]);
        }
    }
}

TEST_CASE("archive names: .tar.gz, .tgz, .tar.zst and .tar.xz, nothing else", "[select]") {
    for (const char* name : {"k.tar.gz", "lib/k.tgz", "k.tar.zst", "k.tar.xz"}) CHECK(is_variant_archive(name));
    for (const char* name : {".tar.gz", "k.tar", "k.zip", "k.gz", "k.tar.bz2", "k.tar.gz.sig", "k.so"}) {
        CHECK_FALSE(is_variant_archive(name));
    }
}

TEST_CASE("select_variant is deterministic", "[select]") {
    const HostFacts host = with_torch(gpu_host(12, 9), 2, 8);
    const std::vector<Candidate> candidates{cand(ncpu), cand(cu126), cand(cu129), cand(ncuda), cand(t28cu128)};
    const Selection first = select_variant(host, candidates);
    const Selection second = select_variant(host, candidates);
    CHECK(first.chosen == std::optional<std::string>(cu129));
    CHECK(flatten(first.rejected) == flatten(second.rejected));
}

TEST_CASE("the tvm-ffi runtime is asked only for a tvm-ffi variant that otherwise fits", "[select]") {
    int asked = 0;
    HostFacts host = k_cpu_host;
    host.tvm_ffi = [&asked] {
        ++asked;
        return RuntimeProbe{std::nullopt, "libtvm_ffi.so is nowhere"};
    };
    // Other families, other platforms and CUDA builds on a CPU host never
    // need the runtime: answering loads a library. Nor does a tvm-ffi
    // variant that a native one outranks.
    Selection selection = select_variant(
        host, {cand(ncpu), cand("tvm-ffi01-cpu-aarch64-linux"), cand(tvm01_cu128), cand(t28cu128), cand(tvm01_cpu)});
    CHECK(asked == 0);
    CHECK(flatten(selection.rejected).back() == lower(tvm01_cpu, ncpu));
    CHECK(selection.chosen == std::optional<std::string>(ncpu));
    CHECK(selection.runtime_problem.empty());
    for (const Rejection& rejection : selection.rejected) CHECK_FALSE(rejection.missing_runtime);

    selection = select_variant(host, {cand(tvm01_cpu), cand("tvm-ffi01-cpu-aarch64-linux")});
    CHECK(asked >= 1);
    CHECK_FALSE(selection.chosen);
    REQUIRE(selection.rejected.size() == 2);
    CHECK(selection.rejected[0].missing_runtime);
    CHECK(selection.rejected[0].reason == no_runtime);
    CHECK_FALSE(selection.rejected[1].missing_runtime);
    // The probe's reason is said once, for the whole selection.
    CHECK(selection.runtime_problem == "libtvm_ffi.so is nowhere");

    // A tvm-ffi CUDA build outranks native CPU on a GPU host, so the
    // runtime is asked once, however many tvm-ffi variants wait.
    asked = 0;
    host.cuda = std::make_pair(12, 8);
    host.tvm_ffi = [&asked] {
        ++asked;
        return RuntimeProbe{std::make_pair(0, 1), {}};
    };
    selection = select_variant(host, {cand(ncpu), cand(tvm01_cu126), cand(tvm01_cu128), cand(tvm02_cpu)});
    CHECK(asked == 1);
    CHECK(selection.chosen == std::optional<std::string>(tvm01_cu128));
}

TEST_CASE("a --target tvm-ffi variant needs no runtime to be chosen", "[select]") {
    int asked = 0;
    HostFacts host = with_targets(k_cpu_host, {tvm02_cpu});
    host.tvm_ffi = [&asked] {
        ++asked;
        return RuntimeProbe{std::make_pair(0, 1), {}};
    };
    const Selection selection = select_variant(host, {cand(tvm01_cpu), cand(tvm02_cpu)});
    CHECK(selection.chosen == std::optional<std::string>(tvm02_cpu));
    CHECK(asked == 0);
}
