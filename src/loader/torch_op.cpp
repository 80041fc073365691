// The torch-op kind: an op that a torch or torch-stable-abi variant's
// library registers in the c10 dispatcher from its static initialisers
// when it is loaded (docs/kernels.md, "Torch ops"). kernhub loads the
// library into a process that already has LibTorch, lazily bound, and
// resolves "namespace::op[.overload]"; the caller dispatches through
// LibTorch (kernhub/torch.hpp). kernhub itself never links torch.
#include <dlfcn.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <utility>
#include <vector>

#include "cache/cache.hpp"
#include "common/hint.hpp"
#include "common/join.hpp"
#include "common/text.hpp"
#include "cuda/driver.hpp"
#include "elf/elf_binding.hpp"
#include "kernhub/error.hpp"
#include "archive/archive.hpp"
#include "loader/kind.hpp"
#include "loader/torch_fit.hpp"
#include "loader/torch_namespace.hpp"
#include "loader/torch_ops.hpp"
#include "loader/torch_runtime.hpp"
#include "select/variant.hpp"

namespace kernhub::loader {

namespace {

bool is_torch_variant(const std::optional<select::Variant>& variant) {
    return variant && (variant->family == select::Family::torch || variant->family == select::Family::torch_stable_abi);
}

// This process's LibTorch; loaded from request.load_torch_from first when
// there is none and a folder is named.
TorchRuntime require_torch(const LoadRequest& request, const std::string& file) {
    std::optional<TorchRuntime> runtime = torch_in_process();
    if (!runtime && !request.load_torch_from.empty()) {
        open_torch(request.load_torch_from);
        runtime = torch_in_process();
    }
    if (!runtime) {
        throw Error(ErrorCode::load, "cannot load the torch op library " + file +
                                         ": LibTorch (libtorch_cpu.so) is not in this process, and the library "
                                         "registers its ops with it; link the program with LibTorch, or let "
                                         "kernhub open LibTorch first (LoadOptions::load_torch; the command-line "
                                         "tool does) from a torch it finds: KERNHUB_TORCH_DIR, or a Python "
                                         "environment's torch package");
    }
    return *runtime;
}

// Fills in the version from the caller's torch facts when the library did
// not tell it; Error(load) when neither does.
void complete_version(const LoadRequest& request, TorchRuntime& runtime) {
    if (!runtime.version.empty()) return;
    if (!request.torch) {
        throw Error(ErrorCode::load, "cannot tell which torch version " + runtime.library +
                                         " is, so kernhub cannot check that the variant fits it; state the torch "
                                         "version the program uses (kernhub/torch.hpp's this_torch() gives it)");
    }
    runtime.major = request.torch->major;
    runtime.minor = request.torch->minor;
    runtime.version = std::to_string(runtime.major) + "." + std::to_string(runtime.minor);
    runtime.version_source = request.torch->source.empty() ? "the stated torch" : request.torch->source;
}

// The torch fit, decided by torch_fit_problem alone against this process's
// LibTorch; torch's CUDA is read from its files only for a CUDA variant.
void check_fit(const LoadRequest& request, const TorchRuntime& runtime) {
    const select::Variant& variant = *request.variant;
    const std::optional<std::string> cuda =
        variant.backend.kind == select::BackendKind::cuda ? torch_cuda_version(runtime.library) : std::nullopt;
    if (auto refusal = torch_fit_problem(variant, request.fetched.repo_id, runtime, cuda, request.torch)) {
        throw Error(ErrorCode::load, refusal->message, refusal->hint);
    }
}

// A CUDA variant's library runs on a GPU: the driver must have a device and
// run the variant's CUDA version. Asked before LibTorch's CUDA part is
// opened.
void require_cuda_device(const select::Variant& variant, const std::string& file) {
    const std::string what = "cannot load the CUDA op library " + file + " of variant " + variant.name + ": ";
    cuda::DriverInfo info;
    try {
        info = cuda::Driver::instance().info();
    } catch (const Error& e) {
        // The driver's own words say what is missing and what to do.
        throw Error(ErrorCode::load, what + e.plain_message(), e.hint(), e.context());
    }
    const select::Backend& cuda = variant.backend;
    if (info.devices.empty()) {
        throw Error(ErrorCode::load,
                    what +
                        "the CUDA driver reports no device; load it on a machine with a GPU, or select a CPU "
                        "variant",
                    hint::setting("backend"));
    }
    if (info.major() * 100 + info.minor() < cuda.major * 100 + cuda.minor) {
        const std::string driver = std::to_string(info.major()) + "." + std::to_string(info.minor());
        throw Error(ErrorCode::load, what + "the CUDA driver runs CUDA " + driver + " and the variant needs " +
                                         std::to_string(cuda.major) + "." + std::to_string(cuda.minor) +
                                         "; update the NVIDIA driver, or fetch a variant for CUDA " + driver +
                                         " or older");
    }
}

// A CUDA variant's library links LibTorch's CUDA part by soname: it must be
// in the process, or be opened from the folder this process's LibTorch
// came from when the caller named one.
void require_torch_cuda(const LoadRequest& request, const TorchRuntime& runtime, const std::string& file) {
    if (torch_cuda_in_process()) return;
    namespace fs = std::filesystem;
    std::error_code ec;
    const bool ours =
        !request.load_torch_from.empty() && !runtime.library.empty() &&
        fs::equivalent(fs::path(request.load_torch_from) / "lib", fs::path(runtime.library).parent_path(), ec);
    if (!ours) {
        throw Error(ErrorCode::load,
                    "cannot load the CUDA op library " + file +
                        ": LibTorch's CUDA part (libtorch_cuda.so) is not in this process" +
                        (runtime.library.empty() ? std::string() : ", whose LibTorch is " + runtime.library) +
                        "; link the program with torch_cuda, or let kernhub open it from that "
                        "torch (LoadOptions::load_torch, with Options::torch_dir naming its "
                        "folder)");
    }
    open_torch_cuda(request.load_torch_from, runtime.library);
}

// Once the variant fits (check_fit), a CUDA variant needs the device and
// LibTorch's CUDA part.
void check_backend(const LoadRequest& request, const TorchRuntime& runtime, const std::string& file) {
    const select::Variant& variant = *request.variant;
    if (variant.backend.kind != select::BackendKind::cuda) return;
    require_cuda_device(variant, file);
    require_torch_cuda(request, runtime, file);
}

bool is_python_symbol(const std::string& name) {
    return name.rfind("Py", 0) == 0 || name.rfind("_Py", 0) == 0;
}

// Refuses a library whose Python references the dynamic loader would bind
// at load in this process, which has no Python to bind them to.
void check_binding(const elf::BindingFacts& facts, const std::string& file) {
    const char* bind_now_env = std::getenv("LD_BIND_NOW");
    const bool env_now = bind_now_env != nullptr && *bind_now_env != 0;
    for (const elf::UndefinedReference& ref : facts.undefined) {
        if (!is_python_symbol(ref.symbol) || ::dlsym(RTLD_DEFAULT, ref.symbol.c_str()) != nullptr) continue;
        const std::string relocation = elf::relocation_name(facts.machine, ref.type);
        if (ref.eager) {
            throw Error(ErrorCode::load, file + " refers to Python's " + ref.symbol + " through " + relocation +
                                             ", which the dynamic loader binds when it loads the library even "
                                             "lazily, and this process has no Python; load it in a Python process, "
                                             "or fetch a variant without Python data references");
        }
        if (env_now || !facts.bind_now.empty()) {
            const std::string cause =
                env_now ? "LD_BIND_NOW is set in the environment"
                        : "the library was linked to bind every symbol at load (" + facts.bind_now + ")";
            throw Error(ErrorCode::load,
                        "cannot load " + file + " lazily: " + cause +
                            ", so the dynamic loader would bind its Python function " + ref.symbol + " (" + relocation +
                            "), and this process has no Python" +
                            (env_now ? "; unset LD_BIND_NOW" : "; fetch a variant built without -z now"));
        }
    }
}

// The ops a message names: a crafted library may list millions.
constexpr std::size_t k_max_ops_named = 32;

std::string some_ops(const std::vector<std::string>& ops) {
    if (ops.empty()) return "none found";
    if (ops.size() <= k_max_ops_named) return join(ops);
    const std::vector<std::string> first(ops.begin(), ops.begin() + k_max_ops_named);
    return join(first) + " and " + std::to_string(ops.size() - k_max_ops_named) + " more";
}

void check_op(const TorchOpListing& listing, const std::string& ns, const std::string& op, const std::string& file) {
    // A dependency's library is opened for all its ops, not for one.
    if (op.empty() || may_define_op(listing, op)) return;
    throw Error(ErrorCode::not_found,
                file + " defines no op " + ns + "::" + op + "; its ops: " + some_ops(listing.ops) +
                    "; check the registry's \"op\" (or the op given to the load)",
                hint::setting("load.op"));
}

constexpr std::size_t k_max_ops_py = 1 << 20;

// _ops.py inside the variant's <id>.zip (the zip build layout, where the
// Python package is the zip and the libraries lie beside it); nullopt when
// the zip does not hold one. The zip is a verified file of the variant.
std::optional<std::string> ops_py_in_zip(const LoadRequest& request) {
    const std::string zip = request.metadata.id + ".zip";
    const bool listed = std::any_of(request.fetched.files.begin(), request.fetched.files.end(),
                                    [&](const FileInfo& file) { return file.path == zip; });
    if (!listed) {
        throw Error(ErrorCode::not_found, "variant " + request.fetched.variant + " of " + request.fetched.repo_id +
                                              " is in the zip build layout but has no " + zip +
                                              " (named by its metadata.json's id); the publisher must fix the repo");
    }
    return archive::read_zip_member(std::filesystem::path(request.fetched.path) / zip, "_ops.py", k_max_ops_py,
                                    request.cancel);
}

NamespaceClaim claim_of(const std::string& text, const std::string& where, const NamespaceClaim& from_name) {
    const OpsPy read = read_ops_py(text);
    if (!read.problem.empty()) {
        throw Error(ErrorCode::verification, where + " " + read.problem +
                                                 ", so kernhub cannot tell the op namespace; the publisher must "
                                                 "fix _ops.py");
    }
    return read.name.empty() ? from_name : NamespaceClaim{read.name, true};
}

// The namespace _ops.py claims (beside the library, or in the zip layout
// inside <id>.zip), else the library's file name up to the first dot. An
// _ops.py kernhub cannot read, or reads as no namespace, is
// Error(verification).
NamespaceClaim namespace_claim(const LoadRequest& request, const Artifact& artifact) {
    const std::filesystem::path folder = std::filesystem::path(artifact.relative()).parent_path();
    const std::string ops_py = (folder / "_ops.py").string();
    const std::string name = artifact.path().filename().string();
    NamespaceClaim from_name{name.substr(0, name.find('.')), false};
    const bool listed = std::any_of(request.fetched.files.begin(), request.fetched.files.end(),
                                    [&](const FileInfo& file) { return file.path == ops_py; });
    if (!listed && request.metadata.build_layout == "zip") {
        const std::optional<std::string> text = ops_py_in_zip(request);
        if (!text) return from_name;
        return claim_of(*text, request.fetched.path + "/" + request.metadata.id + ".zip's _ops.py", from_name);
    }
    if (!listed) return from_name;
    const std::filesystem::path path = std::filesystem::path(request.fetched.path) / ops_py;
    std::string text;
    const cache::ReadStatus status = cache::read_file_into(path, text, k_max_ops_py);
    if (status.error != 0) {
        throw Error(ErrorCode::verification,
                    "cannot read " + path.string() + ", the _ops.py that names the op namespace: " +
                        (status.error == EFBIG ? "it is larger than " + std::to_string(k_max_ops_py) + " bytes"
                                               : std::string(std::strerror(status.error))));
    }
    return claim_of(text, path.string(), from_name);
}

// The sha256 the fetch verified for the artifact.
std::string verified_sha256(const LoadRequest& request, const Artifact& artifact) {
    for (const FileInfo& file : request.fetched.files) {
        if (file.path == artifact.relative()) return file.sha256;
    }
    return {};
}

// One library per op namespace and process: TORCH_LIBRARY registers a
// namespace once, and a second library for it throws from its static
// initialiser, out of dlopen (STABLE_TORCH_LIBRARY goes on with no library
// and crashes). So kernhub loads each verified file once (the same bytes
// again, from any path, are served by the library already loaded) and
// refuses, before dlopen, other bytes that register or may register a
// namespace already registered. Held across the load, so two threads
// cannot both load one.
struct LoadedLibrary {
    std::string sha256;
    std::string file;
    TorchNamespace ns;
    TorchOpListing listing;  // without schemas; names only where the guard or check_op needs them

    // Whether loading the library registers (sure) or may have registered
    // `name`: its symbols name its namespaces; when they were stripped,
    // any name string of its read-only data that is none of its ops may be
    // one, and with more name strings than the listing keeps, any name.
    enum class Registers { no, maybe, sure };
    Registers registers(const std::string& name, const std::uint8_t* data = nullptr, std::size_t size = 0) const {
        if (ns.registered.count(name) != 0) return Registers::sure;
        if (!listing.defined_namespaces.empty() || std::binary_search(listing.ops.begin(), listing.ops.end(), name)) {
            return Registers::no;
        }
        if (listing.names.count(name) != 0) return Registers::maybe;
        if (listing.names_complete) return Registers::no;
        // The bytes at hand are searched; a library loaded earlier, whose
        // bytes are gone, may have registered anything.
        return data == nullptr || names_string(data, size, file, name) ? Registers::maybe : Registers::no;
    }

    // What the table keeps of a library once it is loaded.
    void trim() {
        listing.schemas.clear();
        if (!listing.defined_namespaces.empty() && !listing.ops.empty()) listing.names.clear();
    }
};

// Refuses `next` (its bytes at data, size) when a namespace it registers
// is, or may be, registered by a library already loaded, or the reverse.
void check_no_clash(const std::vector<LoadedLibrary>& loaded, const LoadedLibrary& next, const std::uint8_t* data,
                    std::size_t size) {
    const std::string tail =
        ", other bytes, and LibTorch takes one library per namespace; load the same variant, or "
        "this one in another process";
    for (const LoadedLibrary& earlier : loaded) {
        for (const std::string& name : next.ns.registered) {
            const LoadedLibrary::Registers found = earlier.registers(name);
            if (found == LoadedLibrary::Registers::no) continue;
            const std::string why = found == LoadedLibrary::Registers::sure
                                        ? " is already registered in this process by "
                                        : std::string(" may already be registered in this process (") +
                                              (earlier.listing.names.count(name) != 0
                                                   ? "its name is a string of"
                                                   : "kernhub keeps too few of the name strings to tell, for") +
                                              " a library whose symbols were stripped) by ";
            throw Error(ErrorCode::load, "cannot load " + next.file + ": its op namespace " + quoted_name(name) + why +
                                             earlier.file + tail);
        }
        for (const std::string& name : earlier.ns.registered) {
            if (next.registers(name, data, size) == LoadedLibrary::Registers::no) continue;
            throw Error(ErrorCode::load, "cannot load " + next.file + ": it may register the op namespace " +
                                             quoted_name(name) +
                                             " (its name is a string of this library, whose symbols were stripped), "
                                             "which " +
                                             earlier.file +
                                             " registered in this process, and LibTorch takes one library per "
                                             "namespace; load it in another process");
        }
    }
}

// The library already loaded from the same bytes serves: an _ops.py must
// name a namespace that load found (a file name, which says less, gives
// way to it), and the op must be among its ops.
std::string serve_loaded(const LoadedLibrary& entry, const NamespaceClaim& claim, const std::string& op,
                         const std::string& file) {
    const bool found = entry.ns.registered.count(claim.name) != 0;
    if (claim.from_ops_py && !found) {
        throw Error(ErrorCode::verification, "the torch op library " + file + " holds the bytes of " + entry.file +
                                                 ", loaded in this process with the op namespace " +
                                                 quoted_name(entry.ns.name) +
                                                 ", and its _ops.py says the namespace is " + quoted_name(claim.name) +
                                                 "; the publisher must make the two agree");
    }
    std::string ns = found ? claim.name : entry.ns.name;
    check_op(entry.listing, ns, op, file);
    return ns;
}

// The namespace `op` is resolved in.
std::string register_namespace(const LoadRequest& request, const Artifact& artifact, const std::string& op) {
    static std::mutex mutex;
    static std::vector<LoadedLibrary> loaded;
    const std::string file = artifact.path().string();
    const NamespaceClaim claim = namespace_claim(request, artifact);
    const std::string sha256 = verified_sha256(request, artifact);
    std::lock_guard<std::mutex> lock(mutex);
    // Bytes the fetch did not verify (no sha256) are never taken for the same.
    const auto same = std::find_if(loaded.begin(), loaded.end(), [&](const LoadedLibrary& entry) {
        return !sha256.empty() && entry.sha256 == sha256;
    });
    if (same != loaded.end()) return serve_loaded(*same, claim, op, file);
    LoadedLibrary entry{sha256, file, {}, {}};
    try {
        artifact.open(Binding::lazy, [&](const std::uint8_t* data, std::size_t size) {
            check_binding(elf::inspect_binding(data, size, file), file);
            entry.listing = list_torch_ops(data, size, file, request.cancel);
            entry.ns = choose_namespace(entry.listing, claim, data, size, file);
            check_no_clash(loaded, entry, data, size);
            check_op(entry.listing, entry.ns.name, op, file);
        });
    } catch (const Error&) {
        throw;
    } catch (const std::exception& e) {
        // A static initialiser threw (a c10::Error from a registration):
        // the exception left dlopen, which may keep the dynamic loader's
        // lock held by this thread.
        throw Error(ErrorCode::load, "the op library " + file +
                                         " failed while registering its ops, and this process may no longer load "
                                         "libraries; LibTorch said: " +
                                         e.what());
    }
    std::string ns = entry.ns.name;
    entry.trim();
    loaded.push_back(std::move(entry));
    return ns;
}

class TorchOpKind final : public Kind {
public:
    const char* name() const noexcept override { return "torch-op"; }
    const char* what() const noexcept override { return "a torch op"; }
    const char* use_instead() const noexcept override {
        return "call it through the dispatcher (kernhub/torch.hpp's op<Sig>)";
    }

    // Every torch{MM} and torch-stable-abi{MM} variant; the noarch torch
    // variants hold Python only.
    std::optional<std::string> choose(const LoadRequest& request) const override {
        if (!is_torch_variant(request.variant)) return std::nullopt;
        return choose_underscore_library(request, "torch variant", "op library");
    }

    Resolved load(const LoadRequest& request, const Artifact& artifact) const override {
        const std::string op = request.op.empty() ? request.symbol : request.op;
        const std::string file = artifact.path().string();
        if (!is_op_name(op)) {
            throw Error(ErrorCode::usage, quoted_name(op) + " is not an op name (name or name.overload)",
                        hint::setting("load.op"));
        }
        TorchRuntime runtime = require_torch(request, file);
        complete_version(request, runtime);
        check_fit(request, runtime);
        check_backend(request, runtime, file);
        const std::string ns = register_namespace(request, artifact, op);
        Resolved resolved;
        resolved.symbol = request.symbol;
        resolved.torch_op = ns + "::" + op;
        resolved.torch_version = runtime.version;
        resolved.torch_library = runtime.library;
        return resolved;
    }

    // The same checks as a load, then the library registers all its ops.
    bool open_dependency(const LoadRequest& request, const Artifact& artifact) const override {
        const std::string file = artifact.path().string();
        TorchRuntime runtime = require_torch(request, file);
        complete_version(request, runtime);
        check_fit(request, runtime);
        check_backend(request, runtime, file);
        register_namespace(request, artifact, {});
        return true;
    }
};

}  // namespace

const Kind& torch_op_kind() {
    static const TorchOpKind kind;
    return kind;
}

}  // namespace kernhub::loader
