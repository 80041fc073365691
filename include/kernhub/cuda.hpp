// CUDA kernels loaded by kernhub: a typed launch helper over the driver API,
// which kernhub binds at run time (no link-time dependency on libcuda).
//
//   auto add = kernhub::CudaKernel::from(client.load("vector-add-cuda"));  // at start-up
//   add.launch({blocks}, {256}, 0, nullptr, a, b, out, n);  // hot path
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "kernhub/error.hpp"
#include "kernhub/export.hpp"

namespace kernhub {

struct LoadResult;  // kernhub.hpp

struct Dim3 {
    unsigned x = 1, y = 1, z = 1;
};

class KERNHUB_API CudaKernel {
public:
    CudaKernel() = default;
    // The kernel a load resolved (Client::load, Client::loaded), for the
    // device it was loaded on. Error(usage) when it is not a CUDA kernel (a
    // CPU function or a tvm-ffi function).
    static CudaKernel from(const LoadResult& result);

    // Launches on the device the kernel was loaded for, asynchronously on
    // `stream` (nullptr: the default stream). Arguments are passed by value,
    // as the kernel's parameters are declared. Error(load) on a driver error.
    template <class... Args>
    void launch(Dim3 grid, Dim3 block, unsigned shared_bytes, void* stream, Args... args) const {
        void* params[] = {static_cast<void*>(&args)..., nullptr};
        launch_raw(grid, block, shared_bytes, stream, params);
    }
    void launch_raw(Dim3 grid, Dim3 block, unsigned shared_bytes, void* stream, void** params) const;

    void* handle() const noexcept { return m_handle; }
    explicit operator bool() const noexcept { return m_handle != nullptr; }

private:
    CudaKernel(void* handle, int device) : m_handle(handle), m_device(device) {}
    void* m_handle = nullptr;
    int m_device = 0;
};

// Minimal device memory for examples and tests; real applications use their
// own allocator and streams.
class KERNHUB_API DeviceBuffer {
public:
    explicit DeviceBuffer(std::size_t bytes, int device = 0);
    ~DeviceBuffer();
    DeviceBuffer(DeviceBuffer&& other) noexcept;
    DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;

    void copy_from_host(const void* source, std::size_t bytes);
    void copy_to_host(void* target, std::size_t bytes) const;
    // The device pointer (CUdeviceptr) to pass to a kernel.
    unsigned long long device_pointer() const noexcept;
    std::size_t size() const noexcept;

private:
    struct Impl;
    std::unique_ptr<Impl> m_impl;
};

// Waits for all work on the current device. Error(load) on a driver error.
KERNHUB_API void cuda_synchronize(int device = 0);

// True when a CUDA driver is bound and reports at least one device.
KERNHUB_API bool cuda_available() noexcept;

}  // namespace kernhub
