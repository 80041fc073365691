// The one-time binding to libcuda: dlopen, resolve entry points through
// cuGetProcAddress at fixed ABI versions, cuInit. The outcome, success or
// the reason for failure, is computed once and kept for the process.
#include <dlfcn.h>
#include <sys/stat.h>

#include <atomic>
#include <cstdlib>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "cuda/driver.hpp"
#include "cuda/entry_points.hpp"
#include "kernhub/error.hpp"
#include "loader/loader.hpp"

namespace kernhub::cuda {

namespace {

constexpr const char* k_default_library = "libcuda.so.1";
constexpr const char* k_library_variable = "KERNHUB_CUDA_DRIVER";

// Published once binding has succeeded, so error_name() can use the
// driver's names without ever starting a binding itself.
std::atomic<const api::EntryPoints*> g_bound_entry_points{nullptr};

// Binding failures are load failures whatever the code (cuGetProcAddress
// can answer NOT_FOUND, which elsewhere means a missing kernel).
Error binding_error(const api::EntryPoints* api, api::Result code, const std::string& what) {
    const Error error = api::make_error(api, code, what);
    return Error(ErrorCode::load, error.plain_message(), error.hint(), error.context());
}

// dlopen handle that is closed unless binding succeeds; a bound driver is
// never closed, as entry points into it live for the whole process.
class HandleGuard {
public:
    explicit HandleGuard(void* handle) : m_handle(handle) {}
    ~HandleGuard() {
        if (m_handle != nullptr) ::dlclose(m_handle);
    }
    HandleGuard(const HandleGuard&) = delete;
    HandleGuard& operator=(const HandleGuard&) = delete;
    void* get() const { return m_handle; }
    void keep() { m_handle = nullptr; }

private:
    void* m_handle;
};

// Where the NVIDIA kernel driver shows itself: /proc/driver/nvidia on
// Linux (the NVIDIA container toolkit mounts it), /dev/nvidiactl (a
// container given the device nodes by hand), /dev/dxg under WSL.
constexpr const char* k_kernel_driver_markers[] = {"/proc/driver/nvidia", "/dev/nvidiactl", "/dev/dxg"};

// Without the kernel driver libcuda can find no device, and searching the
// library path for it costs the dynamic loader dozens of failed opens on
// every start of a CPU-only host (docs/embedding.md, "Start-up cost and
// the network stack"); two stat calls answer the same question. The
// failure is returned, not thrown: on a CPU-only host this runs on every
// warm start, and a first exception costs a process the unwinder's set-up.
std::optional<Error> missing_kernel_driver() {
    struct stat st {};
    for (const char* marker : k_kernel_driver_markers) {
        if (::stat(marker, &st) == 0) return std::nullopt;
    }
    return Error(ErrorCode::load,
                 std::string("no CUDA driver: none of /proc/driver/nvidia, /dev/nvidiactl and /dev/dxg exists, so no "
                             "NVIDIA kernel driver is loaded and ") +
                     k_default_library +
                     " was not tried; install the NVIDIA driver, use a CPU variant, or name a "
                     "driver library in KERNHUB_CUDA_DRIVER");
}

}  // namespace

// Friend of Driver: the only code that constructs one.
struct Binding {
    std::string library;  // the file the dynamic loader actually opened
    api::GetProcAddressV2 get_proc_v2 = nullptr;
    api::GetProcAddressV1 get_proc_v1 = nullptr;
    api::EntryPoints entry_points;

    static std::unique_ptr<Driver> bind();

    void find_get_proc_address(void* handle);

    // Asks the driver for `symbol` with the ABI introduced in `version`.
    template <class Fn>
    void resolve(const char* symbol, int version, Fn& slot) {
        void* address = nullptr;
        const api::Result result =
            get_proc_v2 ? get_proc_v2(symbol, &address, version, api::k_proc_address_legacy_stream, nullptr)
                        : get_proc_v1(symbol, &address, version, api::k_proc_address_legacy_stream);
        if (result == api::k_success && address != nullptr) {
            slot = reinterpret_cast<Fn>(address);
            return;
        }
        const std::string call = "binding the CUDA driver " + library + " (cuGetProcAddress of " + symbol +
                                 " at ABI version " + std::to_string(version) + ")";
        if (result != api::k_success) throw binding_error(&entry_points, result, call);
        throw Error(ErrorCode::load, call +
                                         " found no such entry point; the driver is too old or damaged: "
                                         "update the NVIDIA driver, or use a CPU variant");
    }

    void resolve_device_entry_points(int version);
};

void Binding::find_get_proc_address(void* handle) {
    // cuGetProcAddress_v2 (CUDA 12.0+) adds a status argument; 11.3-11.8
    // drivers export only the 4-argument form under the plain name.
    if (void* v2 = ::dlsym(handle, "cuGetProcAddress_v2")) {
        get_proc_v2 = reinterpret_cast<api::GetProcAddressV2>(v2);
    } else if (void* v1 = ::dlsym(handle, "cuGetProcAddress")) {
        get_proc_v1 = reinterpret_cast<api::GetProcAddressV1>(v1);
    } else {
        throw Error(ErrorCode::load, library +
                                         " is not a usable CUDA driver: it exports no cuGetProcAddress "
                                         "(drivers before CUDA 11.3 lack it); update the NVIDIA driver "
                                         "or use a CPU variant");
    }
    // Name the file the loader really found, so a stub picked up through
    // LD_LIBRARY_PATH is recognisable in messages.
    Dl_info where{};
    const void* probe =
        get_proc_v2 ? reinterpret_cast<const void*>(get_proc_v2) : reinterpret_cast<const void*>(get_proc_v1);
    if (::dladdr(probe, &where) != 0 && where.dli_fname != nullptr) library = where.dli_fname;
}

void Binding::resolve_device_entry_points(int version) {
    api::EntryPoints& e = entry_points;
    resolve("cuDeviceGet", 2000, e.device_get);
    resolve("cuDeviceGetCount", 2000, e.device_get_count);
    resolve("cuDeviceGetName", 2000, e.device_get_name);
    resolve("cuDeviceGetAttribute", 2000, e.device_get_attribute);
    resolve("cuDevicePrimaryCtxRetain", 7000, e.primary_ctx_retain);
    resolve("cuCtxSetCurrent", 4000, e.ctx_set_current);
    resolve("cuCtxSynchronize", 2000, e.ctx_synchronize);  // not the 13.0 one taking a context
    resolve("cuModuleLoadData", 2000, e.module_load_data);
    resolve("cuModuleGetFunction", 2000, e.module_get_function);
    resolve("cuLaunchKernel", 4000, e.launch_kernel);
    resolve("cuMemAlloc", 3020, e.mem_alloc);  // the _v2 ABI: 64-bit device pointers and sizes
    resolve("cuMemFree", 3020, e.mem_free);
    resolve("cuMemcpyHtoD", 3020, e.memcpy_htod);
    resolve("cuMemcpyDtoH", 3020, e.memcpy_dtoh);
    // Asking for a version newer than the driver is an error, not a null.
    if (version >= api::k_library_api_version) {
        resolve("cuLibraryLoadData", 12000, e.library_load_data);
        resolve("cuLibraryGetKernel", 12000, e.library_get_kernel);
        resolve("cuKernelGetFunction", 12000, e.kernel_get_function);
    }
}

std::unique_ptr<Driver> Binding::bind() {
    Binding binding;
    const char* configured = std::getenv(k_library_variable);
    const bool from_variable = configured != nullptr && *configured != '\0';
    binding.library = from_variable ? configured : k_default_library;
    loader::take_dlerror();
    HandleGuard handle(::dlopen(binding.library.c_str(), RTLD_NOW | RTLD_LOCAL));
    if (handle.get() == nullptr) {
        throw Error(ErrorCode::load, "no CUDA driver: cannot load " + binding.library +
                                         (from_variable ? std::string(", named by KERNHUB_CUDA_DRIVER") : "") + " (" +
                                         loader::take_dlerror() + "); install the NVIDIA driver or use a CPU variant");
    }
    binding.find_get_proc_address(handle.get());

    // Error names first, so that even cuInit's failure is reported by name.
    api::EntryPoints& e = binding.entry_points;
    binding.resolve("cuGetErrorName", 6000, e.get_error_name);
    binding.resolve("cuGetErrorString", 6000, e.get_error_string);
    binding.resolve("cuInit", 2000, e.init);
    binding.resolve("cuDriverGetVersion", 2020, e.driver_get_version);
    if (const api::Result result = e.init(0); result != api::k_success) {
        throw binding_error(&e, result, "cuInit(0) in the CUDA driver " + binding.library);
    }
    int version = 0;
    if (const api::Result result = e.driver_get_version(&version); result != api::k_success) {
        throw binding_error(&e, result, "cuDriverGetVersion in the CUDA driver " + binding.library);
    }
    binding.resolve_device_entry_points(version);
    handle.keep();
    return std::unique_ptr<Driver>(new Driver(e, version, binding.library));
}

namespace {

struct BindingState {
    std::unique_ptr<Driver> driver;
    // Rethrown as is: std::rethrow_exception copies nothing, so no second
    // exception can arise while throwing it.
    std::exception_ptr failure;
};

const BindingState& binding_state() {
    // Function-local static: bound on first use, once, even when several
    // threads ask at the same moment; a failure is kept and reported again.
    static const BindingState state = [] {
        BindingState outcome;
        const char* configured = std::getenv(k_library_variable);
        if (configured == nullptr || *configured == '\0') {
            if (std::optional<Error> missing = missing_kernel_driver()) {
                outcome.failure = std::make_exception_ptr(*missing);
                return outcome;
            }
        }
        try {
            outcome.driver = Binding::bind();
            g_bound_entry_points.store(&outcome.driver->api(), std::memory_order_release);
        } catch (const Error&) {
            outcome.failure = std::current_exception();
        }
        return outcome;
    }();
    return state;
}

}  // namespace

Driver& Driver::instance() {
    const BindingState& state = binding_state();
    if (!state.driver) std::rethrow_exception(state.failure);
    return *state.driver;
}

bool Driver::available() noexcept {
    try {
        return binding_state().driver != nullptr;
    } catch (...) {
        // Only allocation failure can get here; "unavailable" is the safe answer.
        return false;
    }
}

const api::EntryPoints* api::bound_entry_points() noexcept {
    return g_bound_entry_points.load(std::memory_order_acquire);
}

}  // namespace kernhub::cuda
