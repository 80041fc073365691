// Loading and launching CUDA kernels through the Driver API, bound at run
// time: libcuda is dlopen'ed, never linked, so kernhub builds and runs on
// hosts without CUDA and reports its absence as an Error. The cuda module is
// the only owner of libcuda.
//
// Error policy: like every internal module, functions throw kernhub::Error.
// ErrorCode::load for a missing or refusing driver, an image the GPU cannot
// run, or a failed launch; ErrorCode::not_found for a kernel name the image
// lacks; ErrorCode::usage for a copy larger than its buffer.
//
// Contexts: operations that need a device make that device's primary context
// current on the calling thread and leave it current, as the CUDA runtime
// does; code managing its own contexts should restore its own afterwards.
// Primary contexts are retained once and kept for the life of the process.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "cuda/entry_points.hpp"

namespace kernhub::cuda {

struct Device {
    int index = 0;
    std::string name;
    int cc_major = 0;
    int cc_minor = 0;
};

struct DriverInfo {
    int version = 0;  // as cuDriverGetVersion reports it: 13000 for 13.0
    int major() const { return version / 1000; }
    int minor() const { return (version % 1000) / 10; }
    std::vector<Device> devices;
};

struct Dim3 {
    unsigned x = 1, y = 1, z = 1;
};

class Library;

// The process-wide binding to libcuda: made once, on first use, and kept for
// the life of the process (docs/ARCHITECTURE.md, "Module map").
class Driver {
public:
    // Binds on the first call: dlopen(KERNHUB_CUDA_DRIVER if set, else
    // "libcuda.so.1" once /proc/driver/nvidia, /dev/nvidiactl or /dev/dxg
    // shows a kernel driver; without one no dlopen is tried), resolve
    // every entry point through cuGetProcAddress at the ABI version
    // entry_points.hpp declares, then cuInit(0). Throws
    // Error(load) naming the library and the driver's error code when any
    // step fails, and the same Error on every later call.
    static Driver& instance();
    // True when the binding and cuInit succeeded. Never throws.
    static bool available() noexcept;

    // Driver version and each device's name and compute capability.
    DriverInfo info() const;

    // Loads a fatbin, cubin or NUL-terminated PTX image for `device`. Drivers
    // >= 12.0 use cuLibraryLoadData (context-independent); older ones retain
    // the device's primary context and use cuModuleLoadData. `label` (a file
    // name) appears in error messages. The driver copies the image, so it
    // may be freed once this returns.
    Library load(const void* image, const std::string& label, int device = 0);

    // True when handles are CUlibrary/CUkernel (driver >= 12.0), false when
    // they are CUmodule/CUfunction.
    bool context_independent() const noexcept { return m_api.library_load_data != nullptr; }
    int version() const noexcept { return m_version; }
    // The file the driver was loaded from, as the dynamic loader resolved it.
    const std::string& library_path() const noexcept { return m_library_path; }

    // Retains `device`'s primary context (once) and makes it current on
    // this thread. Throws Error(load) for a device index that does not exist.
    void make_current(int device);
    // "device 0 (NVIDIA H200, compute capability 9.0)", or "device 7" when
    // the driver cannot describe it; for error messages.
    std::string describe_device(int device) const;

    // For the module's own .cpp files.
    const api::EntryPoints& api() const noexcept { return m_api; }

    Driver(const Driver&) = delete;
    Driver& operator=(const Driver&) = delete;

private:
    friend struct Binding;
    Driver(const api::EntryPoints& entry_points, int version, std::string library_path)
        : m_api(entry_points), m_version(version), m_library_path(std::move(library_path)) {}

    api::EntryPoints m_api;
    int m_version = 0;
    std::string m_library_path;
    // Primary contexts by device index, null until retained. Written once
    // (under the mutex), then only read: the launch path loads the atomic
    // and takes no lock.
    static constexpr int k_max_devices = 64;
    std::mutex m_context_mutex;
    std::array<std::atomic<api::Context>, k_max_devices> m_primary_contexts{};
};

// A loaded image. Move-only. The image stays loaded for the life of the
// process, like a dlopen'ed kernel: kernel handles go into the resolved
// table and outlive this object, and unloading while a launch may still be
// running on a stream (launch() does not synchronise) would be unsafe.
class Library {
public:
    Library(Library&& other) noexcept;
    Library& operator=(Library&& other) noexcept;
    Library(const Library&) = delete;
    Library& operator=(const Library&) = delete;
    ~Library() = default;

    // The kernel as a CUfunction of the device's primary context (from
    // cuKernelGetFunction on drivers >= 12.0), ready for launch(). Also makes sure the image can run on this library's
    // device (a lazily loaded library reports "no binary for this GPU"
    // here, not at the first launch). Throws Error(not_found) naming the
    // kernel and the label when the image lacks it.
    void* kernel(const std::string& name);

    const std::string& label() const noexcept { return m_label; }
    int device() const noexcept { return m_device; }

private:
    friend class Driver;
    Library(void* handle, std::string label, int device)
        : m_handle(handle), m_label(std::move(label)), m_device(device) {}

    void* m_handle = nullptr;  // CUlibrary or CUmodule, per Driver::context_independent()
    std::string m_label;
    int m_device = 0;
};

// Makes `device`'s primary context current (no lock once it is retained)
// and enqueues the CUfunction from Library::kernel on `stream`
// (nullptr: the legacy default stream). `params` is what cuLaunchKernel
// wants: one pointer per kernel argument, pointing at the argument's value.
// Returns without synchronising.
void launch(void* kernel, Dim3 grid, Dim3 block, unsigned shared_bytes, void* stream, void** params, int device = 0);

// Device memory owned by one object; freed on destruction. Move-only.
class DeviceBuffer {
public:
    DeviceBuffer(std::size_t bytes, int device = 0);
    ~DeviceBuffer();
    DeviceBuffer(DeviceBuffer&& other) noexcept;
    DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;

    // The CUdeviceptr; pass its address as a pointer-typed kernel argument.
    std::uint64_t address() const noexcept { return m_address; }
    std::size_t size() const noexcept { return m_size; }
    int device() const noexcept { return m_device; }

private:
    void release() noexcept;
    std::uint64_t m_address = 0;
    std::size_t m_size = 0;
    int m_device = 0;
};

// Synchronous copies; throw Error(usage) when `bytes` exceeds the buffer.
void copy_to_device(DeviceBuffer& destination, const void* source, std::size_t bytes);
void copy_to_host(void* destination, const DeviceBuffer& source, std::size_t bytes);
// Waits for all work on `device` (its primary context) to finish.
void synchronize(int device = 0);

// The driver's name for a CUresult ("CUDA_ERROR_NO_BINARY_FOR_GPU"): from
// cuGetErrorName when the driver is bound, else from kernhub's own table of
// the codes kernhub explains. Never binds the driver.
std::string error_name(int code);

// Throws the Error for a failed driver call. `what` names the operation,
// the file or label and the device ("cuLibraryLoadData of add.fatbin for
// device 0 (...)"); the message adds the code, its name and what to do next.
// 500 (NOT_FOUND) gives ErrorCode::not_found, anything else ErrorCode::load.
[[noreturn]] void fail(int code, const std::string& what);

}  // namespace kernhub::cuda
