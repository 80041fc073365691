// Loading as a family of kinds (docs/kernels.md "How a kernel is loaded"): from a
// verified variant folder (a FetchResult) to a resolved entry. One Kind per
// way of loading code (a shared-object symbol, a CUDA kernel, a tvm-ffi
// function), each in a file of its own; kinds.cpp lists them and picks the
// one that loads a variant. The api layer only composes: it fetches, calls
// loader::load and keeps the result in its Client's table.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/repo.hpp"
#include "deptree/metadata.hpp"
#include "kernhub/kernhub.hpp"
#include "loader/loader.hpp"
#include "select/variant.hpp"

namespace kernhub::loader {

// What one load asks for.
struct LoadRequest {
    FetchResult fetched;                     // the verified variant folder
    std::optional<select::Variant> variant;  // fetched.variant parsed; nullopt when no grammar fits
    std::string file;                        // the registry's "file"; empty: the kind chooses
    std::string symbol;                      // the registry's "symbol", or the caller's override
    // verify_on_load: only bytes read once from the blob and hashed as they
    // are copied are loaded (Artifact below).
    bool verify_on_load = false;
    std::filesystem::path cache_root;
    RepoType repo_type = RepoType::kernel;
    std::string tvm_ffi_library;  // the runtime to bind (settings), "" to search
    // Torch ops (torch_op.cpp): the op inside the library's namespace
    // ("name" or "name.overload"); empty: `symbol`.
    std::string op;
    // The torch facts the caller stated (Options::torch), for a LibTorch
    // whose version its library does not tell.
    std::optional<TorchInfo> torch;
    // A torch package folder or LibTorch root whose lib/ libc10.so and
    // libtorch_cpu.so are loaded first (RTLD_GLOBAL) when no LibTorch is in
    // the process; empty: none is loaded.
    std::string load_torch_from;
    // Long scans of the library's bytes (the torch op listing) end with
    // Error(interrupted) once *cancel is set.
    const std::atomic<bool>* cancel = nullptr;
    // The variant's metadata.json as the fetch read it: its build layout
    // and, for the zip layout, the id that names <id>.zip.
    deptree::VariantMetadata metadata;
    // Whether the device arch check applies (kinds.cpp, check_device_arch):
    // not when the variant was chosen for another machine (targets, host).
    bool check_device_arch = true;
};

// What a kind resolved.
struct Resolved {
    void* address = nullptr;
    std::string symbol;  // the symbol resolved (for a tvm-ffi function, __tvm_ffi_<name>)
    int device = 0;      // a CUDA kernel's device ordinal
    // A torch op: "namespace::op[.overload]", and the LibTorch it was
    // registered with.
    std::string torch_op;
    std::string torch_version;  // "2.15.0"
    std::string torch_library;  // libtorch_cpu.so's path
};

// A resolved address (the kinds other than torch ops).
inline Resolved resolved_address(void* address, std::string symbol, int device = 0) {
    Resolved resolved;
    resolved.address = address;
    resolved.symbol = std::move(symbol);
    resolved.device = device;
    return resolved;
}

// The file a kind loads, read from the snapshot, or with verify_on_load
// from its blob through the sealed-copy path (verified_load.hpp): the
// checks run when the bytes are first asked for, so a kind's own checks
// (the tvm-ffi runtime, the symbol) come first.
class Artifact {
public:
    Artifact(const LoadRequest& request, std::string relative);
    // Relative to the variant folder.
    const std::string& relative() const noexcept { return m_relative; }
    // Absolute, in the cache snapshot; what messages name.
    const std::filesystem::path& path() const noexcept { return m_path; }
    // The whole file in memory (a fatbin or cubin for the driver).
    std::vector<std::uint8_t> read() const;
    // The file dlopen'ed: the path, or a sealed copy of the verified bytes.
    // `inspect`, when given, sees exactly the bytes dlopen then loads (the
    // file mapped, or the sealed copy once verified) and may throw to stop
    // the load.
    using Inspect = std::function<void(const std::uint8_t* data, std::size_t size)>;
    Library open(Binding binding = Binding::now, const Inspect& inspect = {}) const;

private:
    const LoadRequest& m_request;
    std::string m_relative;
    std::filesystem::path m_path;
};

// One way of loading code. Stateless; the instances live for the process.
class Kind {
public:
    virtual ~Kind() = default;
    // LoadResult::kind: "function", "cuda-kernel", "tvm-ffi".
    virtual const char* name() const noexcept = 0;
    // For a handle of another kind: what this one is ("a CPU function") and
    // what to use instead ("call it through KernelFn").
    virtual const char* what() const noexcept = 0;
    virtual const char* use_instead() const noexcept = 0;
    // The artifact of the variant this kind loads (relative to its folder),
    // or nullopt when the kind does not load it. Throws Error when the kind
    // would load the variant but cannot choose one file (none, several).
    // A `request.file` that the variant lacks never gets here.
    virtual std::optional<std::string> choose(const LoadRequest& request) const = 0;
    // Checks, loads the artifact and resolves the entry. Throws Error.
    virtual Resolved load(const LoadRequest& request, const Artifact& artifact) const = 0;
    // Opens the artifact of a dependency (docs/registry.md, "Kernel dependencies")
    // so that what it defines is present for the kernels that depend on
    // it, resolving nothing: a shared object's symbols join the global
    // scope, a tvm-ffi library registers its functions, an op library its
    // ops. Returns false when the kind has nothing to open in a process
    // (a CUDA image). Throws Error.
    virtual bool open_dependency(const LoadRequest& request, const Artifact& artifact) const = 0;
    // For `info`: the runtime this kind needs, when some of `variants` are
    // of its kind ("0.1.15 at /path/libtvm_ffi.so"), else `problem` (why
    // selection found none); "" when the kind needs no runtime or none of
    // the variants is of its kind.
    virtual std::string runtime_status(const std::vector<std::string>& variants, const std::string& problem) const {
        (void)variants;
        (void)problem;
        return {};
    }
};

// The kinds (defined in their own files).
const Kind& shared_object_kind();
const Kind& cuda_kernel_kind();
const Kind& tvm_ffi_kind();
const Kind& torch_op_kind();

// Every kind, in the order they are asked to choose (kinds.cpp).
const std::vector<const Kind*>& kinds();

// The public LoadKind of a kind (the one whose to_string is its name).
LoadKind load_kind(const Kind& kind);
// The kind named `name` (to_string of a LoadKind), or nullptr.
const Kind* find_kind(const std::string& name);

// The kind that loads `request`'s variant and the file it loads: the first
// kind whose choose() answers. Error(not_found) when `request.file` is not
// in the variant or when no kind loads it.
struct Pick {
    const Kind* kind = nullptr;
    std::string artifact;
};
Pick pick(const LoadRequest& request);

// The files of a variant that loading it reads (docs/cache-format.md,
// "Partial variants"), chosen over its whole listing (`files`, relative to
// the variant folder) exactly as pick() chooses over a fetched variant:
// the artifact; for a torch op library the _ops.py beside it when listed,
// else (the zip layout, whose <id>.zip is named by metadata.json, not yet
// read) every .zip at the variant's top level; metadata.json when listed.
// A dependency with nothing to open needs only metadata.json. nullopt, for
// the whole variant, when the choice fails (the load then fails as it did
// before it read anything), when a kernel has nothing to load, or when the
// choice over the part would differ from the choice over the whole.
std::optional<std::set<std::string>> files_to_read(const std::string& repo_id, const std::string& variant,
                                                   const std::vector<std::string>& files, const std::string& file,
                                                   bool dependency);

// The first non-empty Kind::runtime_status over the kinds.
std::string runtime_status(const std::vector<std::string>& variants, const std::string& problem);

// What a load refuses of a tree before it opens any library, as kernels
// 0.19.1 validates every node before it loads one (docs/kernels.md, "What a
// load refuses that selection accepts"): for the kernel and each
// dependency, a build layout kernhub does not know and a device arch that
// does not cover device 0; for the kernel, select::rules::load_refusal; for
// a dependency with a library to open, that refusal unless it is a noarch
// or SDK variant. Error(load) naming the variant.
void check_tree(const LoadRequest& kernel, const std::vector<LoadRequest>& dependencies);

// pick, then the kind loads and resolves (check_tree's checks of the
// kernel first).
struct Loaded {
    const Kind* kind = nullptr;
    std::string file;  // the loaded file, absolute
    Resolved resolved;
};
Loaded load(const LoadRequest& request);

// check_tree's checks of a dependency, then pick, and the kind opens the
// dependency's artifact (Kind::open_dependency);
// the file opened, or nullopt when the kind opens nothing or no kind loads
// the variant (a pure-Python one).
std::optional<std::string> load_dependency(const LoadRequest& request);

// Helpers for the kinds that choose by file name.
// Whether a file name ends in `suffix` after at least one more byte.
bool has_suffix(const std::string& path, const char* suffix);
// `_*.so` files of a variant `depth` folders down (0: its top level): the
// extension-library naming of kernel-builder (tvm-ffi and torch variants).
std::vector<std::string> underscore_libraries(const FetchResult& fetched, int depth);
// The registry's "file", else the variant's only `_*.so` at its top level,
// else its only one a folder down (a Python package folder). Error(usage)
// when a level has several, Error(not_found) when none has one; messages
// call the variant `family` ("torch variant") and the file `what` (a "...library").
std::string choose_underscore_library(const LoadRequest& request, const std::string& family, const std::string& what);
// A fatbin or cubin, by its name (cuda_kernel.cpp).
bool is_cuda_image(const std::string& path);
// The variant's one file `matches` accepts; nullopt when it has none,
// Error(usage) naming them when it has several.
std::optional<std::string> only_file(const LoadRequest& request, bool (*matches)(const std::string& path));

}  // namespace kernhub::loader
