// Build-variant names and the choice of one variant for a host. Pure: no I/O
// except detect_host(), which reads uname(2).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kernhub::select {

// Which naming family a variant belongs to (the Python `kernels` grammar,
// plus kernhub's native C-ABI family).
enum class Family {
    native,            // native-cpu-<cpu>-<os>, native-cu{MAJ}{MIN}-<cpu>-<os>, native-cuda
    torch,             // torch{MM}[-cxx11|-cxx98]-<backend>-<cpu>-<os>
    torch_stable_abi,  // torch-stable-abi{MM}-<backend>-<cpu>-<os>
    tvm_ffi,           // tvm-ffi{MM}-<backend>-<cpu>-<os>
    torch_noarch,      // torch-<backend kind>  (cpu, cuda, rocm, metal, xpu, npu)
    torch_universal,   // torch-universal
};

// npu is the noarch word for CANN (torch-npu); neuron, tpu and cann are
// backends kernhub parses (to say why they do not fit) but never loads.
enum class BackendKind { none, cpu, cuda, rocm, xpu, metal, npu, neuron, tpu, cann };

struct Backend {
    BackendKind kind = BackendKind::none;
    int major = 0;           // cu128 -> 12, rocm63 -> 6, xpu20251 -> 2025
    int minor = 0;           // cu128 -> 8,  rocm63 -> 3, xpu20251 -> 1
    bool versioned = false;  // false for "cpu", "metal" and noarch kinds
};

// The spelling of a backend in a variant name (cu130, rocm63, cpu) and the
// word of its kind (cuda, rocm, cpu; npu for cann, as noarch names spell it).
std::string backend_spelling(const Backend& backend);
std::string kind_word(BackendKind kind);

struct Variant {
    std::string name;
    Family family = Family::native;
    int family_major = 0;  // torch28 -> 2, tvm-ffi01 -> 0 (the {MM} digits)
    int family_minor = 0;  // torch28 -> 8, tvm-ffi01 -> 1
    std::string cxx_abi;   // "cxx11", "cxx98" or empty
    Backend backend;
    std::string cpu;      // x86_64 | aarch64; empty for noarch
    std::string os;       // linux | darwin | windows; empty for noarch
    bool noarch = false;  // native-cuda, torch-<kind>, torch-universal
};

// nullopt when the name follows none of the grammars.
std::optional<Variant> parse_variant(std::string_view name);

// What kernhub found of a runtime a family needs (tvm-ffi's libtvm_ffi.so).
struct RuntimeProbe {
    std::optional<std::pair<int, int>> version;  // (major, minor); nullopt: none usable
    std::string problem;                         // why none, when version is nullopt
};

struct HostFacts {
    std::string cpu;  // x86_64 | aarch64
    std::string os;   // linux | darwin | windows
    // CUDA driver version usable on this host; nullopt on a CPU-only host.
    // It decides kernhub's native family.
    std::optional<std::pair<int, int>> cuda;
    // The backend the `kernels` families must match (kernels' "selected
    // backend"): torch's build when torch is known, else the driver's CUDA,
    // else the CPU. nullopt: derived from `cuda` that way.
    std::optional<Backend> backend;
    // The torch in use (major, minor) and its C++11 ABI flag (nullopt:
    // unknown, as off Linux); torch and torch-stable-abi variants need it.
    std::optional<std::pair<int, int>> torch;
    std::optional<bool> torch_cxx11_abi;
    // macOS version (major, minor), for Metal variants (macOS 26 or later).
    std::optional<std::pair<int, int>> macos;
    // The tvm-ffi runtime kernhub binds. Asked only when a tvm-ffi variant
    // could win, because answering loads the runtime; unset means none.
    std::function<RuntimeProbe()> tvm_ffi;
    // Explicit --target values. When non-empty detection is bypassed: the
    // first target (in order) that is available wins.
    std::vector<std::string> targets;
};

// uname-based cpu/os; cuda and torch left empty (CUDA detection lives in the
// cuda module).
HostFacts detect_host();
// The part of detect_host() after uname: maps uname's sysname and machine to
// variant spelling ("Darwin"/"arm64" -> darwin/aarch64). Unknown values are
// kept (lowercased) so a mismatch reason still names the host.
HostFacts host_from_uname(std::string_view sysname, std::string_view machine);
std::string describe(const HostFacts& host);
// A machine described as --host describes it ("cpu=x86_64,os=linux,
// cuda=13.0,torch=2.15,cxx11-abi=true"; docs/registry.md, "Describing
// another machine: --target and --host"). Error(usage) naming the key for a
// malformed or unknown key or value, a key named twice, two backends, or a
// missing cpu or os.
HostFacts parse_host_spec(std::string_view spec);
// The backend the kernels families match on this host (HostFacts::backend,
// or the one derived from the driver's CUDA).
Backend selected_backend(const HostFacts& host);

struct Candidate {
    std::string name;                // variant directory name under build/
    std::vector<std::string> files;  // paths relative to the variant directory
};

// A file of a variant that kernhub unpacks next to the variant's other files
// (docs/cache-format.md, "Archive variants"): a name ending in .tar.gz,
// .tgz, .tar.zst or .tar.xz. A candidate holding one may hold a required
// file inside it, which only unpacking shows.
bool is_variant_archive(std::string_view path);

struct Rejection {
    std::string variant;
    std::string reason;  // one short clause, e.g. "needs CUDA 12.x, host has none"
    // The variant fits this host but the runtime it needs is missing (a
    // load failure rather than a variant the host cannot use).
    bool missing_runtime = false;
};

struct Selection {
    std::optional<std::string> chosen;
    // Every candidate that was not chosen, with the reason, in input order
    // (including candidates that matched but ranked lower: "lower preference
    // than <chosen>").
    std::vector<Rejection> rejected;
    // Why the runtime that a rejection with missing_runtime needs is
    // missing (said once here rather than in every reason).
    std::string runtime_problem;
};

// Chooses one variant for the host. When required_file is set, candidates
// whose file list lacks it are rejected. Deterministic for equal inputs.
Selection select_variant(const HostFacts& host, const std::vector<Candidate>& candidates,
                         const std::optional<std::string>& required_file = std::nullopt);

}  // namespace kernhub::select
