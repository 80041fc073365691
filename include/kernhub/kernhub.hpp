// kernhub public C++ API.
//
// A Client resolves a kernel name (or "org/repo[@revision]") through the
// stacked registries, fetches the one build variant this host (or --target)
// needs from the hub into the shared cache, verifies it, loads it and keeps
// the resolved entry in its own table, under the name asked for. Call
// load() at start-up (of one name, or of several at once) and take a typed
// handle from the Client
// (client.resolve<Sig>(name), or KernelFn<Sig>::from(load result));
// afterwards a KernelFn is a plain function pointer: calling it is one
// indirect call with no lookup, lock or allocation.
//
//   client.load("vector-add");
//   auto add = client.resolve<void(const float*, const float*, float*, size_t)>("vector-add");
//   add(a, b, out, n);
//
// Every function reports failure by throwing kernhub::Error (error.hpp).
#pragma once

#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernhub/enums.hpp"
#include "kernhub/error.hpp"
#include "kernhub/events.hpp"
#include "kernhub/export.hpp"
#include "kernhub/manage.hpp"
#include "kernhub/signature.hpp"

namespace kernhub {

// The torch a program uses, as the Python `kernels` library reads it: it
// decides which torch and torch-stable-abi variants fit and, when present,
// the backend (docs/kernels.md, "Torch kernels").
struct TorchInfo {
    int major = 0;  // torch 2.15.0 -> 2
    int minor = 0;  // torch 2.15.0 -> 15
    // The C++11 ABI flag (_GLIBCXX_USE_CXX11_ABI) torch was built with;
    // nullopt when unknown, as off Linux.
    std::optional<bool> cxx11_abi;
    std::string cuda;  // torch.version.cuda ("13.0"); empty for a build without CUDA
    std::string hip;   // torch.version.hip ("6.3.42131-fa1d09cbd"); empty without ROCm
    std::string xpu;   // torch.version.xpu ("20250101"); empty without XPU
    // Where the facts came from: a file read, or "kernhub/torch.hpp".
    std::string source;
};

// What a Client is told. Each setting's environment variable, C key,
// range and default are in the one settings table (docs/configuration.md,
// "Settings"): a field left empty or nullopt takes its variable, else its
// default; a value outside the range is Error(usage) naming the field.
struct Options {
    // Hub endpoint (http://, https:// or file://). Empty: KERNHUB_ENDPOINT,
    // then HF_ENDPOINT, then https://huggingface.co.
    std::string endpoint;
    // Cache root. Empty: KERNHUB_CACHE, KERNELS_CACHE, HF_HUB_CACHE,
    // $HF_HOME/hub, $XDG_CACHE_HOME/huggingface/hub, ~/.cache/huggingface/hub.
    std::string cache_dir;
    // Extra registry files stacked last (like --registry), in order.
    std::vector<std::string> registries;
    // Directory searched for kernhub.json. Empty: the current directory.
    std::string project_dir;
    // Skip the installed default registry (tests, fully explicit setups).
    bool no_default_registry = false;
    // Variants to use instead of detecting the host (like --target).
    std::vector<std::string> targets;
    // nullopt: KERNHUB_OFFLINE=1 or HF_HUB_OFFLINE=1 switch it on.
    std::optional<bool> offline;
    // nullopt: HF_TOKEN, then the file $HF_HOME/token. Sent only to the
    // endpoint's own scheme, host and port.
    std::optional<std::string> token;
    // nullopt: KERNHUB_VERIFY_ON_LOAD=1 re-hashes files before loading.
    std::optional<bool> verify_on_load;
    // Attempts after the first for transient failures (408, 429, 5xx, broken
    // transfers).
    std::optional<int> retries;
    // The longest the hub may ask a retry to wait (Retry-After, or the
    // reset time of an exhausted RateLimit quota), in seconds; a longer
    // request fails at once with Error(network) instead of sleeping.
    std::optional<int> max_wait_seconds;
    // Receives progress and status events; may be null. Called on the
    // thread that runs the call or on that call's worker threads, never
    // from two threads at once (see EventSink).
    EventSink* events = nullptr;
    // When non-null, setting *cancel to true (from another thread or a
    // signal handler) stops a running call soon after: transfers abort,
    // retry waits and lock waits end, and the call throws
    // Error(interrupted). A partial download is kept, and the next fetch of
    // the same file continues it.
    const std::atomic<bool>* cancel = nullptr;

    // Trust policy.
    // Organisations (the ORG of ORG/REPO, compared ignoring ASCII case)
    // whose repos may be fetched or loaded; any other repo is refused with
    // Error(verification) before a request is sent or a cached file is
    // used. nullopt: KERNHUB_ALLOWED_ORGS (comma-separated; unset or empty
    // allows every organisation). An empty list allows none.
    std::optional<std::vector<std::string>> allowed_orgs;
    // Trusted publishers (docs/trust.md, "Trusted publishers"): a repo no registry
    // names, fetched from an http(s) endpoint, must belong to an
    // organisation the hub marks a trusted kernel publisher, unless
    // allowed_orgs names its organisation or this setting names it: "1"
    // (also true, yes, on) for every repo, else repo ids separated by
    // commas ("org/a,org/b"), as the kernels library's trust_remote_code.
    // nullopt: KERNHUB_TRUST_REMOTE_CODE.
    std::optional<std::string> trust_remote_code;

    // Bounds on hub answers (listing size, API deadline, download rate).
    // Entries one tree listing may have, over all its pages; more is
    // Error(network).
    std::optional<int> max_listing_entries;
    // Body bytes one tree listing may have, over all its pages; more is
    // Error(network).
    std::optional<int> max_listing_bytes;
    // Seconds one API call (a revision lookup, a listing with all its pages)
    // may take, every attempt, redirect and retry wait included; then
    // Error(network).
    std::optional<int> api_timeout_seconds;
    // The lowest average download rate, in bytes per second over each
    // window of min_rate_window_seconds (0: off); an attempt that falls
    // below is cut and retried, and the last one is Error(network).
    std::optional<int> min_rate;
    // That window, in seconds.
    std::optional<int> min_rate_window_seconds;
    // How many files of a variant are transferred at once, each with a
    // connection of its own; also the most downloads this Client runs at
    // once with one host, over all its calls (load of several names,
    // prewarm, lock and mirror fetch up to min(4, this) kernels or variants
    // side by side). API requests (revision, listing) do not wait for that
    // bound.
    std::optional<int> max_connections;
    // Seconds during which a branch or tag this cache resolved on the hub
    // (by any process) is taken from the cache's refs/ without asking the
    // hub again; 0 asks on every fetch.
    std::optional<int> ref_ttl_seconds;
    // Archive variants: caps on unpacking one archive of a variant
    // (docs/registry.md, "Archive variants").
    // File bytes unpacked.
    std::optional<std::uint64_t> archive_max_bytes;
    // Entries.
    std::optional<int> archive_max_entries;
    // Bytes of one entry's path.
    std::optional<int> archive_max_path;

    // Signatures (docs/trust.md, "Signatures").
    // The Sigstore trusted_root.json that signatures are checked against.
    // Empty: KERNHUB_SIGSTORE_TRUSTED_ROOT, else the public-good root built
    // into kernhub.
    std::string sigstore_trusted_root;
    // tvm-ffi variants (docs/kernels.md, "tvm-ffi variants"): the tvm-ffi runtime
    // library to bind (a path, or a name for the dynamic loader). Empty:
    // KERNHUB_TVM_FFI_LIBRARY, else a libtvm_ffi.so already in the process,
    // on the loader's path or in the apache-tvm-ffi package of a Python
    // environment. A process binds one runtime; naming another later is
    // Error(load).
    std::string tvm_ffi_library;

    // Torch kernels and the machine selected for (docs/kernels.md, "Torch kernels").
    // The torch this program uses; kernhub::torch::this_torch() (from
    // kernhub/torch.hpp) fills it from the LibTorch headers the program is
    // compiled against. nullopt: the torch package or LibTorch root named
    // by torch_dir, else the torch package of the Python environments
    // searched for tvm-ffi, else none.
    std::optional<TorchInfo> torch;
    // A torch package folder (.../site-packages/torch) or a LibTorch
    // distribution root. Empty: KERNHUB_TORCH_DIR.
    std::string torch_dir;
    // "cpu" selects CPU variants even where torch or the driver says CUDA
    // (as `kernels`' backend="cpu"). Empty: KERNHUB_BACKEND, else detected.
    std::string backend;
    // Select for another machine, described as --host describes it
    // ("cpu=x86_64,os=linux,cuda=13.0,torch=2.15,cxx11-abi=true"), instead
    // of this one; nothing of this machine is used. Empty: this machine.
    // Not together with targets (Error(usage)).
    std::string host;

    // Local overrides (docs/configuration.md, "Local kernels"): "ORG/REPO=PATH[:...]", the
    // Python kernels library's LOCAL_KERNELS syntax. A repo named here is
    // loaded from PATH (its variant chosen among PATH's or PATH/build's
    // subfolders, or PATH itself when it holds metadata.json) by fetch,
    // load and info (not by prewarm of a lock, which pins the hub's commits), with no request, no cache write, no trust
    // or signature check. nullopt: LOCAL_KERNELS; "" overrides nothing.
    std::optional<std::string> local_kernels;

    // Refuse (Error(verification)) any kernel whose registry entry has no
    // "signature" policy. nullopt: KERNHUB_REQUIRE_SIGNATURES=1 switches it on.
    std::optional<bool> require_signatures;
};

struct FileInfo {
    std::string path;  // relative to the variant directory
    std::uint64_t size = 0;
    std::string sha256;  // lowercase hex
};

struct FetchResult {
    std::string name;  // the registry name, or the repo id when none
    std::string repo_id;
    RepoType repo_type = RepoType::kernel;
    std::string revision;  // what was asked for: a branch, tag, commit or "vN"
    std::string commit;
    std::string variant;
    std::string path;  // the variant directory inside the cache snapshot
    std::vector<FileInfo> files;
    std::uint64_t bytes_downloaded = 0;
    std::uint64_t requests = 0;  // HTTP requests made, redirects included
    // The verified signature, when the registry entry has a policy.
    std::optional<SignatureInfo> signature;
    // The kernels the variant's metadata.json names under "kernel-depends",
    // and theirs, each once, fetched for the same machine, in the order
    // load() opens them: every kernel after those it depends on (docs/registry.md,
    // "Kernel dependencies"). Their own `dependencies` are empty; `requests`
    // and `bytes_downloaded` above count the whole tree.
    std::vector<FetchResult> dependencies;
    // For a dependency: every revision the tree asked it under ("main",
    // "v2"), in the order they were met; `revision` is the first. A commit
    // and variant reached under several names is one dependency.
    std::vector<std::string> revisions;
    // The LOCAL_KERNELS folder the kernel came from (docs/configuration.md, "Local
    // kernels"); empty when it came from the hub through the cache. A local
    // kernel has no commit, and its files no sha256.
    std::string local_folder;
    // The variant's metadata.json "python-depends" and "provenance", as
    // compact JSON text; empty when it has none. Shown, not enforced: a C++
    // load needs no Python package (docs/registry.md, "Parity with the
    // Python kernels library").
    std::string python_depends;
    std::string provenance;
};

struct LoadResult {
    std::string ref;  // the reference load() was given ("vector-add", "org/repo@v1")
    FetchResult fetch;
    std::string symbol;
    std::string file;  // the loaded file, absolute
    // What address is (LoadKind says which handle takes it): a C symbol, a
    // CUfunction/CUkernel, or a TVM FFI safe call (symbol is then
    // __tvm_ffi_<function>). For LoadKind::torch_op (an op the library
    // registered in LibTorch's dispatcher) address is null and torch_op
    // names the op.
    LoadKind kind = LoadKind::function;
    void* address = nullptr;
    int device = 0;  // for a CUDA kernel: the device ordinal it was loaded for
    // For a torch op: "namespace::op" or "namespace::op.overload", the
    // version of the process's LibTorch ("2.15.0") and its libtorch_cpu.so.
    std::string torch_op;
    std::string torch_version;
    std::string torch_library;
    // The libraries of fetch.dependencies that load() opened first, in
    // that order, absolute (a dependency holding only a CUDA image or
    // nothing kernhub loads opens none).
    std::vector<std::string> dependency_files;
};

// What one Client::load may replace or add.
struct LoadOptions {
    // Replaces the registry's "symbol".
    std::string symbol;
    // For a torch variant: the op to resolve inside the library's namespace
    // ("name" or "name.overload"), replacing the registry's "op".
    std::string op;
    // For a torch variant in a process without LibTorch: load LibTorch
    // first (libc10.so and libtorch_cpu.so, RTLD_GLOBAL, for the life of
    // the process) from the torch kernhub found: Options::torch_dir,
    // KERNHUB_TORCH_DIR, else the Python environments' torch package
    // (docs/kernels.md, "Which torch"); a stated Options::torch loads nothing. For a
    // program that does not link LibTorch and wants to know that a kernel
    // loads against a torch installation (the kernhub program's `load`);
    // off: such a load is Error(load). For a CUDA variant it also opens
    // LibTorch's CUDA part (libc10_cuda.so, libtorch_cuda.so) from that
    // torch when the process lacks it and its libtorch_cpu.so came from the
    // same folder, so a program that links only torch_cpu can load CUDA
    // variants too.
    bool load_torch = false;
};

struct VariantStatus {
    std::string name;
    bool selected = false;
    std::string reason;  // why it was not selected; empty for the selected one
    // Why kernhub would not load this variant even though a host may
    // select it (a noarch or SDK build, a torch build for a backend other
    // than the CPU or CUDA); empty when it loads it (docs/kernels.md, "What
    // a load refuses that selection accepts").
    std::string load_refusal;
};

// One fact about the machine selected for, and where it came from
// ("uname", "CUDA driver", a torch file, "host description").
struct HostFact {
    std::string name;   // cpu, os, cuda, torch, cxx11-abi, backend, macos, tvm-ffi
    std::string value;  // "x86_64", "13.0", "true", "cu132"; "none" when absent
    std::string source;
};

struct InfoResult {
    std::string name;
    std::string repo_id;
    RepoType repo_type = RepoType::kernel;
    std::string revision;
    std::string commit;
    std::string symbol;
    std::string host;  // e.g. "x86_64-linux, no CUDA"
    // What selection used, one fact per line, with where each came from.
    std::vector<HostFact> host_facts;
    std::vector<std::string> targets;
    std::vector<VariantStatus> variants;
    std::string selected;  // empty when nothing matches
    // When the repo has tvm-ffi variants: the runtime kernhub bound
    // ("0.1.15 at /path/libtvm_ffi.so"), or why none could be bound.
    std::string tvm_ffi_runtime;
    std::uint64_t requests = 0;
    // The registry entry's signature policy, and what verifying the
    // selected variant's signature established (info verifies it).
    std::optional<SignaturePolicy> signature_policy;
    std::optional<SignatureInfo> signature;
    // The LOCAL_KERNELS folder the variants were chosen from; empty when
    // they are the hub's.
    std::string local_folder;
    // The selected variant's metadata.json "python-depends" and
    // "provenance", as FetchResult has them (JSON text; empty when absent,
    // when the variant has no metadata.json, or offline when the cache lacks
    // it). info reads that one small file (from the cache when it is there).
    std::string python_depends;
    std::string provenance;
};

struct RegistryEntry {
    std::string name;
    std::string repo_id;
    RepoType repo_type = RepoType::kernel;
    std::string revision;  // empty when version is set
    std::optional<int> version;
    std::string symbol;
    std::string file;
    std::string op;      // for a torch variant: the op, "" when the entry names none
    std::string source;  // the registry file that defined it
    std::optional<SignaturePolicy> signature;
};

template <class Signature>
class KernelFn;

// Threads: one Client may be shared by any number of threads; fetch, load,
// loaded, resolve, info, prewarm and list may run at the same time, for the same or
// different names, and each returns what it would have returned alone
// (FetchResult::requests and the other request counts count the call's
// own requests). Separate Clients have their own settings, registries and
// tables, in one thread or several, but the process has one binding of
// the CUDA driver and one of the tvm-ffi runtime (the first Client that
// needs either binds it for all), and Clients may share a cache directory: calls coordinate through the
// cache's file locks as separate processes do, so a file is downloaded
// once while the other callers wait for it. Concurrent requests of one
// Client use separate connections; its downloads share the per-host bound
// of Options::max_connections, so a call may wait for another thread's
// downloads from the same host (API requests never wait). Options::events
// is called one event at a time, from the calling threads and the workers
// of their fetches (see EventSink). Moving
// or destroying a Client while another thread uses it is not allowed.
class KERNHUB_API Client {
public:
    // Resolves the settings (Options, then the environment) and reads the
    // registries. Error(usage): a setting out of its range or malformed
    // (the message names it), a registry file that is not valid;
    // Error(internal): no cache folder can be chosen (HOME unset).
    explicit Client(Options options = {});
    ~Client();
    Client(Client&&) noexcept;
    Client& operator=(Client&&) noexcept;
    Client(const Client&) = delete;
    Client& operator=(const Client&) = delete;

    // Every call below may also throw Error(usage) for a malformed `ref`
    // or setting, Error(internal) when the local system refuses (the cache
    // cannot be written: the message names the path and errno), and
    // Error(interrupted) when Options::cancel is set.

    // Fetches (or finds in the cache) the selected variant, and the kernels
    // it depends on, and verifies them. Error(not_found): no such name,
    // repo, revision or file, or no variant fits this host; Error(
    // verification): a hash, digest, signature, trust or organisation
    // check failed; Error(network): the hub failed after retries, or an
    // answer went over a limit; Error(offline): offline and not cached;
    // Error(load): the variant needs a newer kernels than kernhub follows.
    FetchResult fetch(const std::string& ref);
    // fetch(), then load the variant's artifact and resolve the symbol
    // (symbol_override replaces the registry's). The result is kept in this
    // Client's table under `ref` (loaded(), resolve()). fetch()'s errors,
    // and Error(not_found) for a symbol the artifact lacks, Error(
    // verification) for a file that changed since it was verified (with
    // verify_on_load) or fails the ELF checks, Error(load) when dlopen, the
    // CUDA driver or the tvm-ffi runtime refuses it.
    LoadResult load(const std::string& ref, const std::string& symbol_override = {});
    // load() with the replacements and additions of `options`. A torch
    // variant's op (LoadOptions::op, else the registry's "op", else the
    // symbol) must be one the library defines: Error(not_found) naming
    // the ops it does. Error(load) when the process has no LibTorch, when
    // it is another torch version or C++ ABI than the variant's, or when
    // the library cannot be bound lazily here (LD_BIND_NOW, a Python data
    // reference); docs/kernels.md, "Torch kernels".
    LoadResult load(const std::string& ref, const LoadOptions& options);
    // load() of each name, all before returning, up to four kernels at
    // once (fewer when Options::max_connections is lower): a program's
    // start-up. After a failure no further kernel starts, and the failure
    // that happened first (in time, not in `refs` order) is thrown, with
    // load()'s codes; kernels loaded before it stay loaded.
    std::vector<LoadResult> load(const std::vector<std::string>& refs);
    std::vector<LoadResult> load(std::initializer_list<std::string> refs);
    // What the successful load() of the very same `ref` string by this
    // Client resolved; when loads of one `ref` overlap on several threads,
    // the one that started last wins, also if it ended first.
    // Error(not_found) when this Client has not loaded `ref`: each Client
    // has its own table, so another Client's load does not count. Not for
    // the hot path: take a handle once and keep it.
    LoadResult loaded(const std::string& ref) const;
    // KernelFn<Signature>::from(loaded(ref)): the C function this Client
    // loaded for `ref`. Error(not_found) when it did not load `ref`,
    // Error(usage) when `ref` is a CUDA kernel, a tvm-ffi function or a
    // torch op (CudaKernel::from, TvmFunction::from, kernhub::torch::op take
    // those).
    template <class Signature>
    KernelFn<Signature> resolve(const std::string& ref) const;
    // The commit, the variants and which one this host selects, and why;
    // verifies the selected variant's signature when there is a policy.
    // Error(not_found), Error(network), Error(offline) and Error(
    // verification) as fetch(); a host with no fitting variant is no error
    // (InfoResult::selected is empty).
    InfoResult info(const std::string& ref);
    // The stacked registry, sorted by name. No error.
    std::vector<RegistryEntry> list() const;

    // Prewarming: make the cache hold, and verify, exactly what a lock file
    // pins (kernhub.lock, or the Python kernels library's kernels.lock in
    // either format) for Options::targets or this host, and write the refs
    // the lock names. Nothing is loaded. Error(usage): not a lock file;
    // Error(not_found): a pinned commit, file or target variant the hub
    // lacks; Error(verification): a file that does not match its pin;
    // Error(network), Error(offline) as fetch(); Error(load): a kernel needs
    // a newer kernels (for this host).
    PrewarmReport prewarm(const std::string& lock_file);
    // Before 0.3, prewarm of several names loaded them; that is load(refs)
    // now. Deleted so that such a call does not compile (a braced list
    // would otherwise become one string).
    PrewarmReport prewarm(std::initializer_list<std::string> refs) = delete;
    PrewarmReport prewarm(const std::vector<std::string>& refs) = delete;

    // kernhub.lock for the kernels of the project's kernhub.json
    // (Options::project_dir), for Options::targets or this host's variant.
    // Error(not_found): no kernhub.json, or a kernel or variant the hub
    // lacks; Error(lock_outdated): with LockOptions::check, the lock on
    // disk differs; Error(network), Error(offline), Error(verification) as
    // fetch().
    LockReport lock(const LockOptions& options);

    // Cache management over the cache root (Options::cache_dir). Nothing
    // here sends a request.
    // The repos, commits and variants the cache holds. Error(internal):
    // the cache cannot be read.
    CacheListing cache_ls();
    // The cache root, or with `ref` the cached variant directory of that
    // kernel (offline: no request). As every fetch does, it first removes
    // a link (or anything but a folder) standing where the repo's blobs/,
    // refs/ or .kernhub/ folders belong; the link goes, never its target
    // (docs/cache-format.md, "Cache management").
    // Error(offline): the variant is not cached; Error(not_found): no such
    // name.
    std::string cache_path(const std::string& ref);
    // Checks every blob against its name and every link and record; with
    // `repair`, removes what is damaged. Problems are reported, not thrown.
    CacheVerifyReport cache_verify(bool repair);
    // Removes what nothing references (older snapshots, orphaned blobs,
    // stale partial downloads), keeping what the named locks pin.
    // Error(usage): a keep-lock that cannot be read.
    PruneReport cache_prune(const PruneOptions& options);
    // A reproducible archive of the cache, or of the named kernels only.
    // Error(offline): a named kernel is not cached; Error(usage): an
    // unknown compression suffix.
    ExportReport cache_export(const std::string& file, const std::vector<std::string>& refs);
    // Adds a cache archive to the cache after verifying every blob.
    // Error(verification): a blob that does not match its name, or an
    // entry the format does not allow; Error(usage): not an archive, or
    // over a limit (the message names it).
    ImportReport cache_import(const std::string& file);
    // Checks the cached variant of `ref` again, offline: every file against
    // the variant's metadata.json digest and the hub's hashes, and the
    // signature against the registry entry's policy (or `policy` when it
    // names an issuer). Error(verification) naming what failed,
    // Error(offline) when the variant is not cached.
    VerifyReport verify(const std::string& ref, const SignaturePolicy& policy = {});

    // Writes a static hub tree holding `refs` at their resolved commits
    // (every variant, or Options::targets only). fetch()'s errors, and
    // Error(usage) for a target folder that is not a mirror.
    MirrorReport mirror(const std::vector<std::string>& refs, const MirrorOptions& options);

private:
    struct Impl;
    std::unique_ptr<Impl> m_impl;
};

// Error(usage) unless `result` is a load of `kind`; the message names the
// handle that takes what it is. The handles' from() call it.
KERNHUB_API void expect_kind(const LoadResult& result, LoadKind kind);

// A typed, resolved kernel entry point. Calling it is one indirect call.
template <class R, class... Args>
class KernelFn<R(Args...)> {
public:
    using Pointer = R (*)(Args...);

    KernelFn() = default;
    explicit KernelFn(void* address) : m_fn(reinterpret_cast<Pointer>(address)) {}

    // The C function a load resolved (Client::load, Client::loaded).
    // Error(usage) when it is a CUDA kernel, a tvm-ffi function or a
    // torch op.
    static KernelFn from(const LoadResult& result) {
        expect_kind(result, LoadKind::function);
        return KernelFn(result.address);
    }

    R operator()(Args... args) const { return m_fn(static_cast<Args>(args)...); }
    explicit operator bool() const noexcept { return m_fn != nullptr; }
    Pointer get() const noexcept { return m_fn; }

private:
    Pointer m_fn = nullptr;
};

template <class Signature>
KernelFn<Signature> Client::resolve(const std::string& ref) const {
    return KernelFn<Signature>::from(loaded(ref));
}

// "0.3.0". No error.
KERNHUB_API const char* version() noexcept;
// The release of the Python `kernels` library whose formats this kernhub
// follows ("0.19.1"): a variant whose metadata.json asks for a newer one
// ("kernels-minver") is refused on this machine (docs/registry.md, "Kernel
// dependencies").
KERNHUB_API const char* kernels_release() noexcept;

}  // namespace kernhub
