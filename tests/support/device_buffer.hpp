// Device memory for the GPU tests, over the cuda module's buffer: the
// public headers offer none (a program uses its own allocator and streams).
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/driver.hpp"

namespace kernhub::test {

class DeviceBuffer {
public:
    explicit DeviceBuffer(std::size_t bytes, int device = 0) : m_buffer(bytes, device) {}

    void copy_from_host(const void* source, std::size_t bytes) { cuda::copy_to_device(m_buffer, source, bytes); }
    void copy_to_host(void* target, std::size_t bytes) const { cuda::copy_to_host(target, m_buffer, bytes); }
    // The CUdeviceptr, to pass to a kernel.
    unsigned long long device_pointer() const noexcept { return m_buffer.address(); }

private:
    cuda::DeviceBuffer m_buffer;
};

// Waits for all work on `device`.
inline void cuda_synchronize(int device = 0) {
    cuda::synchronize(device);
}

}  // namespace kernhub::test
