// The one-time binding to libtvm_ffi.so: where it is looked for, dlopen
// with RTLD_GLOBAL (a kernel library's NEEDED libtvm_ffi.so is then the
// bound one), the entry points and the version. Errors raised by tvm-ffi
// functions are read here too.
#include "tvmffi/runtime.hpp"

#include <dlfcn.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <type_traits>

#include "common/python_env.hpp"
#include "common/text.hpp"
#include "kernhub/error.hpp"
#include "loader/loader.hpp"

namespace kernhub::tvmffi {

namespace {

constexpr const char* k_soname = "libtvm_ffi.so";
constexpr const char* k_function_prefix = "__tvm_ffi_";
constexpr const char* k_internal_prefix = "__tvm_ffi__";
constexpr const char* k_install_hint =
    "install the runtime with `pip install apache-tvm-ffi` (it ships tvm_ffi/lib/libtvm_ffi.so), or name the "
    "library in KERNHUB_TVM_FFI_LIBRARY";
// Failures kept per requested value; beyond this they are not cached.
constexpr std::size_t k_max_failures = 16;
// The most of a raised error's text kept (Error cuts further).
constexpr std::size_t k_max_error_text = std::size_t{64} * 1024;

bool is_regular_file(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// tvm_ffi/lib/libtvm_ffi.so of the apache-tvm-ffi package in the usual
// Python environments, in the order they are tried.
std::vector<std::string> package_candidates() {
    std::vector<std::string> candidates;
    for (const auto& folder : python_env::package_folders()) {
        candidates.push_back(folder + "/tvm_ffi/lib/" + k_soname);
    }
    return candidates;
}

// The library the dynamic loader opened for `handle`, from one of its
// symbols.
std::string opened_file(const void* symbol, const std::string& fallback) {
    Dl_info where{};
    if (symbol != nullptr && ::dladdr(symbol, &where) != 0 && where.dli_fname != nullptr) return where.dli_fname;
    return fallback;
}

bool same_file(const std::string& a, const std::string& b) {
    struct stat sa {};
    struct stat sb {};
    return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

// Does `requested` (a path, or a bare name the dynamic loader resolves)
// name the library already loaded as `handle` from `file`?
bool names_loaded(const std::string& requested, void* handle, const std::string& file) {
    if (requested == file) return true;
    if (requested.find('/') == std::string::npos) {
        void* found = ::dlopen(requested.c_str(), RTLD_NOW | RTLD_NOLOAD);
        if (found == nullptr) return false;
        ::dlclose(found);  // RTLD_NOLOAD still counted a reference
        return found == handle;
    }
    return same_file(requested, file);
}

// dlopen(RTLD_NOW | RTLD_GLOBAL | extra), or nullptr with the reason.
void* open_global(const std::string& name, int extra, std::string& reason) {
    loader::take_dlerror();
    void* handle = ::dlopen(name.c_str(), RTLD_NOW | RTLD_GLOBAL | extra);
    if (handle == nullptr) reason = loader::take_dlerror();
    return handle;
}

// The first usable runtime: already loaded, on the loader's path, or in a
// Python environment. Throws Error(load) listing where it looked.
void* find_runtime(std::string& name) {
    std::string reason;
    name = k_soname;
    if (void* handle = open_global(name, RTLD_NOLOAD, reason)) return handle;
    if (void* handle = open_global(name, 0, reason)) return handle;
    const std::string loader_reason = reason;
    for (const auto& candidate : package_candidates()) {
        if (!is_regular_file(candidate)) continue;
        name = candidate;
        if (void* handle = open_global(candidate, 0, reason)) return handle;
        throw Error(ErrorCode::load,
                    "the tvm-ffi runtime " + candidate +
                        " could not be loaded; reinstall apache-tvm-ffi, or name "
                        "another library in KERNHUB_TVM_FFI_LIBRARY",
                    reason);
    }
    throw Error(ErrorCode::load,
                "libtvm_ffi.so, the tvm-ffi runtime, is neither loaded, nor on the dynamic loader's path, nor in " +
                    std::string(python_env::k_searched) + "; " + k_install_hint,
                loader_reason);
}

// Resolves the entry points and reads the version; Error(load) when
// `handle` is not a tvm-ffi runtime.
std::unique_ptr<Runtime> describe(void* handle, const std::string& name) {
    auto runtime = std::make_unique<Runtime>();
    auto need = [&](const char* symbol, auto& slot) {
        void* address = ::dlsym(handle, symbol);
        if (address == nullptr) {
            throw Error(ErrorCode::load,
                        name + " is not a usable tvm-ffi runtime: it exports no " + symbol + "; " + k_install_hint);
        }
        slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(address);
    };
    EntryPoints& api = runtime->api;
    need("TVMFFIGetVersion", api.get_version);
    need("TVMFFIErrorMoveFromRaised", api.error_move_from_raised);
    need("TVMFFIObjectDecRef", api.object_dec_ref);
    need("TVMFFIEnvSetStream", api.env_set_stream);
    api.get_version(&runtime->version);
    runtime->library = opened_file(reinterpret_cast<const void*>(api.get_version), name);
    return runtime;
}

struct State {
    std::mutex mutex;
    std::unique_ptr<Runtime> runtime;
    std::map<std::string, std::exception_ptr> failures;  // by requested value
};

State& state() {
    static State instance;
    return instance;
}

std::atomic<const Runtime*> g_bound{nullptr};

std::unique_ptr<Runtime> bind_now(const std::string& requested) {
    std::string name = requested;
    void* handle = nullptr;
    if (requested.empty()) {
        handle = find_runtime(name);
    } else {
        // A path must name a regular file: dlopen would wait forever on a
        // FIFO. A bare name is left to the dynamic loader's search.
        if (requested.find('/') != std::string::npos && !is_regular_file(requested)) {
            throw Error(ErrorCode::load, "the tvm-ffi runtime " + requested +
                                             " (named by KERNHUB_TVM_FFI_LIBRARY or Options::tvm_ffi_library) "
                                             "does not exist or is not a regular file; " +
                                             k_install_hint);
        }
        // A runtime already in the process (a host application's, or
        // Python's) is the one every kernel library would bind to.
        std::string reason;
        if (void* loaded = open_global(k_soname, RTLD_NOLOAD, reason)) {
            const std::string file = opened_file(::dlsym(loaded, "TVMFFIGetVersion"), k_soname);
            if (!names_loaded(requested, loaded, file)) {
                ::dlclose(loaded);
                throw Error(ErrorCode::load, "this process already holds the tvm-ffi runtime " + file +
                                                 ", and a process can use only one; " + requested +
                                                 " (named by KERNHUB_TVM_FFI_LIBRARY or "
                                                 "Options::tvm_ffi_library) cannot be used as well");
            }
            handle = loaded;
        } else {
            handle = open_global(requested, 0, reason);
        }
        if (handle == nullptr) {
            throw Error(ErrorCode::load,
                        "cannot load the tvm-ffi runtime " + requested +
                            " (named by KERNHUB_TVM_FFI_LIBRARY or Options::tvm_ffi_library); " + k_install_hint,
                        reason);
        }
    }
    try {
        std::unique_ptr<Runtime> runtime = describe(handle, name);
        // A kernel library's NEEDED libtvm_ffi.so must find this very copy
        // (by its SONAME); otherwise the loader would bring in a second
        // runtime, and the version read here would not be the kernel's.
        void* by_soname = ::dlopen(k_soname, RTLD_NOW | RTLD_NOLOAD);
        if (by_soname != nullptr) ::dlclose(by_soname);
        if (by_soname != handle) {
            throw Error(ErrorCode::load, runtime->library +
                                             " does not carry the SONAME libtvm_ffi.so, so a kernel library would "
                                             "load a second tvm-ffi runtime beside it; name the libtvm_ffi.so of "
                                             "the apache-tvm-ffi package");
        }
        runtime->handle = handle;
        return runtime;
    } catch (const Error&) {
        ::dlclose(handle);
        throw;
    }
}

}  // namespace

std::string Runtime::version_text() const {
    return std::to_string(version.major) + "." + std::to_string(version.minor) + "." + std::to_string(version.patch);
}

const Runtime& bind(const std::string& requested) {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.runtime) {
        if (!requested.empty() && !names_loaded(requested, s.runtime->handle, s.runtime->library)) {
            throw Error(ErrorCode::load, "this process already uses the tvm-ffi runtime " + s.runtime->library +
                                             ", and a process can hold only one; " + requested +
                                             " (named by KERNHUB_TVM_FFI_LIBRARY or Options::tvm_ffi_library) "
                                             "cannot be used as well");
        }
        return *s.runtime;
    }
    if (auto it = s.failures.find(requested); it != s.failures.end()) std::rethrow_exception(it->second);
    try {
        s.runtime = bind_now(requested);
    } catch (const Error&) {
        if (s.failures.size() < k_max_failures) s.failures.emplace(requested, std::current_exception());
        throw;
    }
    g_bound.store(s.runtime.get(), std::memory_order_release);
    return *s.runtime;
}

Probe probe(const std::string& requested) {
    Probe result;
    try {
        const Runtime& runtime = bind(requested);
        // A version beyond what a variant name can carry stays unmatched.
        const auto clamp = [](std::uint32_t value) { return static_cast<int>(std::min<std::uint32_t>(value, 9999)); };
        result.version = std::make_pair(clamp(runtime.version.major), clamp(runtime.version.minor));
    } catch (const Error& e) {
        result.problem = e.plain_message();
    } catch (const std::exception& e) {
        result.problem = e.what();
    }
    return result;
}

const Runtime* bound() noexcept {
    return g_bound.load(std::memory_order_acquire);
}

namespace {

std::string copy_bytes(const ByteArray& bytes) {
    if (bytes.data == nullptr) return {};
    return std::string(bytes.data, std::min(bytes.size, k_max_error_text));
}

}  // namespace

Raised take_raised(const Runtime& runtime) {
    void* object = nullptr;
    runtime.api.error_move_from_raised(&object);
    Raised raised;
    if (object == nullptr) return raised;
    const auto* header = static_cast<const ObjectHeader*>(object);
    if (header->type_index == k_type_error) {
        const auto* cell = reinterpret_cast<const ErrorCell*>(static_cast<const char*>(object) + sizeof(ObjectHeader));
        raised.kind = copy_bytes(cell->kind);
        raised.message = copy_bytes(cell->message);
        raised.backtrace = copy_bytes(cell->backtrace);
    } else {
        raised.kind = "an object of type index " + std::to_string(header->type_index);
    }
    runtime.api.object_dec_ref(object);
    return raised;
}

std::vector<std::string> function_names(const std::vector<std::string>& exported_functions) {
    std::vector<std::string> names;
    const std::size_t prefix = std::strlen(k_function_prefix);
    for (const auto& symbol : exported_functions) {
        if (symbol.rfind(k_function_prefix, 0) != 0 || symbol.rfind(k_internal_prefix, 0) == 0) continue;
        if (symbol.size() > prefix) names.push_back(symbol.substr(prefix));
    }
    return names;
}

std::string symbol_of(const std::string& name) {
    return name.rfind(k_function_prefix, 0) == 0 ? name : k_function_prefix + name;
}

}  // namespace kernhub::tvmffi
