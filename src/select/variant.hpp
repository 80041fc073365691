// Build-variant names and the choice of one variant for a host. Pure: no I/O
// except detect_host(), which reads uname(2).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kernhub::select {

// Which naming family a variant belongs to: the Python `kernels` library's
// grammar (as its release k_kernels_release parses it, legacy and dotted
// names alike), plus kernhub's native C-ABI family.
enum class Family {
    native,            // native-cpu-<cpu>-<os>, native-cu{MAJ}{MIN}-<cpu>-<os>, native-cuda
    torch,             // torch{MM}[-cxx11|-cxx98]-..., torch-X.Y[-cxx11|-cxx98]-...
    torch_stable_abi,  // torch-stable-abi{MM}-..., torch-stable-abi-X.Y-...
    tvm_ffi,           // tvm-ffi{MM}-..., tvm-ffi-X.Y-...
    noarch,            // torch-<backend>, mlx-<backend>, torch-universal, mlx-universal
    sdk,               // sdk, sdk-<backend>, sdk[-<backend>]-cpython-X.Y-<abi>-<cpu>-<os>
};

// The backends of kernels' grammar. kernhub loads CPU and CUDA builds;
// the others are parsed so that selection matches kernels and a mismatch
// can say why.
enum class BackendKind { none, cpu, cuda, rocm, xpu, metal, neuron, tpu, cann };

struct Backend {
    BackendKind kind = BackendKind::none;
    int major = 0;           // cu128 / cuda-12.8 -> 12, rocm714 -> 7, xpu20251 -> 2025
    int minor = 0;           // cu128 / cuda-12.8 -> 8,  rocm714 -> 14, xpu20251 -> 1
    bool versioned = false;  // false for cpu, metal, neuron, tpu
};

// The legacy spelling of a backend (cu130, rocm63, cpu), the dotted one
// (cuda-13.0, rocm-6.3, cpu), and the word of its kind (cuda, rocm, cpu),
// which is also what noarch names (torch-cuda, sdk-cuda) match.
std::string backend_spelling(const Backend& backend);
std::string backend_dotted(const Backend& backend);
std::string kind_word(BackendKind kind);

// The Python a variant's compiled parts are built for: the minimum CPython
// version and the stable-ABI tag. Legacy names carry none and count as
// cpython-3.9-abi3.
struct PythonTag {
    int major = 3;
    int minor = 9;
    bool abi3t = false;  // abi3t (free-threaded capable, Python 3.15+) rather than abi3
    bool legacy = true;  // implicit in a legacy name
};

struct Variant {
    std::string name;
    Family family = Family::native;
    int family_major = 0;  // torch28 / torch-2.8 -> 2, tvm-ffi01 -> 0
    int family_minor = 0;  // torch28 / torch-2.8 -> 8, tvm-ffi01 -> 1
    std::string cxx_abi;   // "cxx11", "cxx98" or empty
    // The backend of an arch or SDK build; kind none for noarch names, for
    // sdk and for sdk-<cpython...> without one.
    Backend backend;
    // noarch and sdk-<backend>: the word after the framework, as written
    // ("cuda", "universal", "npu"; anything, since kernels accepts any).
    std::string backend_word;
    bool mlx = false;  // noarch: mlx-<backend> rather than torch-<backend>
    // Arch and compiled SDK builds: the Python tag; nullopt for noarch,
    // sdk and sdk-<backend>.
    std::optional<PythonTag> python;
    std::string cpu;      // as written (kernels compares it with the host's); empty without one
    std::string os;       // as written; empty without one
    bool noarch = false;  // native-cuda, noarch names, sdk, sdk-<backend>
    bool legacy = false;  // the legacy (undotted) form of kernels' grammar
};

// nullopt when the name follows none of the grammars.
std::optional<Variant> parse_variant(std::string_view name);

// What kernhub found of a runtime a family needs (tvm-ffi's libtvm_ffi.so).
struct RuntimeProbe {
    std::optional<std::pair<int, int>> version;  // (major, minor); nullopt: none usable
    std::string problem;                         // why none, when version is nullopt
};

// The Python a host without a known one is taken to have: the default of
// kernels' own selection function, a GIL-enabled CPython 3.15, which every
// abi3 and abi3t build published for Python 3.15 or older fits.
inline constexpr std::pair<int, int> k_default_python{3, 15};

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
    // The Python whose tags (cpython-X.Y-abi3|abi3t) variants must fit, and
    // whether it is free-threaded (such a Python loads abi3t builds only).
    // Unknown: k_default_python, GIL-enabled (docs/registry.md, "The host's
    // Python").
    std::optional<std::pair<int, int>> python;
    bool free_threaded = false;
    // Whether MLX is present (mlx-<backend> variants need it).
    bool mlx = false;
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
