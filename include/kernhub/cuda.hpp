// CUDA kernels loaded by kernhub: a typed launch helper over the driver API,
// which kernhub binds at run time (no link-time dependency on libcuda).
//
//   auto add = kernhub::CudaKernel::from(client.load("vector-add-cuda"));  // at start-up
//   add.launch({blocks}, {256}, 0, nullptr, a, b, out, n);  // hot path
#pragma once

#include <cstddef>
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
    // C function, a tvm-ffi function or a torch op).
    static CudaKernel from(const LoadResult& result);

    // Launches on the device the kernel was loaded for, asynchronously on
    // `stream` (nullptr: the default stream). Arguments are passed by value,
    // as the kernel's parameters are declared. Error(load) on a driver error;
    // Error(usage) for an empty CudaKernel.
    template <class... Args>
    void launch(Dim3 grid, Dim3 block, unsigned shared_bytes, void* stream, Args... args) const {
        void* params[] = {static_cast<void*>(&args)..., nullptr};
        launch_raw(grid, block, shared_bytes, stream, params);
    }
    // launch() with the kernel's parameters as cuLaunchKernel takes them
    // (an array of pointers to each); launch()'s errors.
    void launch_raw(Dim3 grid, Dim3 block, unsigned shared_bytes, void* stream, void** params) const;

    void* handle() const noexcept { return m_handle; }
    explicit operator bool() const noexcept { return m_handle != nullptr; }

private:
    CudaKernel(void* handle, int device) : m_handle(handle), m_device(device) {}
    void* m_handle = nullptr;
    int m_device = 0;
};

// True when a CUDA driver is bound and reports at least one device. No
// error.
KERNHUB_API bool cuda_available() noexcept;

}  // namespace kernhub
