// The public CUDA helpers (kernhub/cuda.hpp) over the cuda module.
#include "cuda/driver.hpp"
#include "kernhub/cuda.hpp"
#include "kernhub/error.hpp"
#include "kernhub/kernhub.hpp"

namespace kernhub {

CudaKernel CudaKernel::from(const LoadResult& result) {
    detail::require_kind(result, "cuda-kernel");
    return CudaKernel(result.address, result.device);
}

void CudaKernel::launch_raw(Dim3 grid, Dim3 block, unsigned shared_bytes, void* stream, void** params) const {
    if (m_handle == nullptr) {
        throw Error(ErrorCode::usage, "launch of an empty CudaKernel; take it from a load first (CudaKernel::from)");
    }
    cuda::launch(m_handle, cuda::Dim3{grid.x, grid.y, grid.z}, cuda::Dim3{block.x, block.y, block.z}, shared_bytes,
                 stream, params, m_device);
}

struct DeviceBuffer::Impl {
    cuda::DeviceBuffer buffer;
};

DeviceBuffer::DeviceBuffer(std::size_t bytes, int device)
    : m_impl(std::make_unique<Impl>(Impl{cuda::DeviceBuffer(bytes, device)})) {}
DeviceBuffer::~DeviceBuffer() = default;
DeviceBuffer::DeviceBuffer(DeviceBuffer&&) noexcept = default;
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&&) noexcept = default;

void DeviceBuffer::copy_from_host(const void* source, std::size_t bytes) {
    cuda::copy_to_device(m_impl->buffer, source, bytes);
}
void DeviceBuffer::copy_to_host(void* target, std::size_t bytes) const {
    cuda::copy_to_host(target, m_impl->buffer, bytes);
}
unsigned long long DeviceBuffer::device_pointer() const noexcept {
    return m_impl ? m_impl->buffer.address() : 0;
}
std::size_t DeviceBuffer::size() const noexcept {
    return m_impl ? m_impl->buffer.size() : 0;
}

void cuda_synchronize(int device) {
    cuda::synchronize(device);
}

bool cuda_available() noexcept {
    if (!cuda::Driver::available()) return false;
    try {
        return !cuda::Driver::instance().info().devices.empty();
    } catch (...) {
        return false;
    }
}

}  // namespace kernhub
