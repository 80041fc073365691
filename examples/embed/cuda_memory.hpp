// Device memory for the CUDA example, through the CUDA driver API bound at
// run time as kernhub binds it (the example links no libcuda either). A
// real program uses its own allocator and streams; kernhub offers none.
#pragma once

#include <dlfcn.h>

#include <cstddef>
#include <stdexcept>
#include <string>

namespace example {

// The driver entry points the example needs, from libcuda.so.1.
class CudaDriver {
public:
    static CudaDriver& get() {
        static CudaDriver driver;
        return driver;
    }

    // Device 0's primary context (the one kernhub loads kernels into) made
    // current on this thread.
    void use_device0() {
        int device = 0;
        void* context = nullptr;
        check(m_init(0), "cuInit");
        check(m_device_get(&device, 0), "cuDeviceGet");
        check(m_primary_ctx_retain(&context, device), "cuDevicePrimaryCtxRetain");
        check(m_ctx_set_current(context), "cuCtxSetCurrent");
    }

    unsigned long long allocate(std::size_t bytes) {
        unsigned long long pointer = 0;
        check(m_mem_alloc(&pointer, bytes), "cuMemAlloc");
        return pointer;
    }
    void release(unsigned long long pointer) noexcept { (void)m_mem_free(pointer); }
    void to_device(unsigned long long target, const void* source, std::size_t bytes) {
        check(m_memcpy_htod(target, source, bytes), "cuMemcpyHtoD");
    }
    void to_host(void* target, unsigned long long source, std::size_t bytes) {
        check(m_memcpy_dtoh(target, source, bytes), "cuMemcpyDtoH");
    }
    void synchronize() { check(m_ctx_synchronize(), "cuCtxSynchronize"); }

private:
    CudaDriver() {
        void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (library == nullptr) throw std::runtime_error("libcuda.so.1 cannot be opened");
        bind(library, m_init, "cuInit");
        bind(library, m_device_get, "cuDeviceGet");
        bind(library, m_primary_ctx_retain, "cuDevicePrimaryCtxRetain");
        bind(library, m_ctx_set_current, "cuCtxSetCurrent");
        bind(library, m_mem_alloc, "cuMemAlloc_v2");
        bind(library, m_mem_free, "cuMemFree_v2");
        bind(library, m_memcpy_htod, "cuMemcpyHtoD_v2");
        bind(library, m_memcpy_dtoh, "cuMemcpyDtoH_v2");
        bind(library, m_ctx_synchronize, "cuCtxSynchronize");
    }

    template <class F>
    static void bind(void* library, F& function, const char* name) {
        function = reinterpret_cast<F>(dlsym(library, name));
        if (function == nullptr) throw std::runtime_error(std::string("libcuda.so.1 lacks ") + name);
    }
    static void check(int status, const char* call) {
        if (status != 0) throw std::runtime_error(std::string(call) + " failed: CUresult " + std::to_string(status));
    }

    int (*m_init)(unsigned) = nullptr;
    int (*m_device_get)(int*, int) = nullptr;
    int (*m_primary_ctx_retain)(void**, int) = nullptr;
    int (*m_ctx_set_current)(void*) = nullptr;
    int (*m_mem_alloc)(unsigned long long*, std::size_t) = nullptr;
    int (*m_mem_free)(unsigned long long) = nullptr;
    int (*m_memcpy_htod)(unsigned long long, const void*, std::size_t) = nullptr;
    int (*m_memcpy_dtoh)(void*, unsigned long long, std::size_t) = nullptr;
    int (*m_ctx_synchronize)() = nullptr;
};

// One allocation on device 0, freed with the object.
class DeviceBuffer {
public:
    explicit DeviceBuffer(std::size_t bytes) : m_pointer(CudaDriver::get().allocate(bytes)) {}
    ~DeviceBuffer() { CudaDriver::get().release(m_pointer); }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;

    void copy_from_host(const void* source, std::size_t bytes) {
        CudaDriver::get().to_device(m_pointer, source, bytes);
    }
    void copy_to_host(void* target, std::size_t bytes) const { CudaDriver::get().to_host(target, m_pointer, bytes); }
    unsigned long long device_pointer() const noexcept { return m_pointer; }

private:
    unsigned long long m_pointer = 0;
};

}  // namespace example
