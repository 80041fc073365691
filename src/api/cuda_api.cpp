// The public CUDA helpers (kernhub/cuda.hpp) over the cuda module.
#include "cuda/driver.hpp"
#include "kernhub/cuda.hpp"
#include "kernhub/error.hpp"
#include "kernhub/kernhub.hpp"

namespace kernhub {

CudaKernel CudaKernel::from(const LoadResult& result) {
    expect_kind(result, LoadKind::cuda_kernel);
    return CudaKernel(result.address, result.device);
}

void CudaKernel::launch_raw(Dim3 grid, Dim3 block, unsigned shared_bytes, void* stream, void** params) const {
    if (m_handle == nullptr) {
        throw Error(ErrorCode::usage, "launch of an empty CudaKernel; take it from a load first (CudaKernel::from)");
    }
    cuda::launch(m_handle, cuda::Dim3{grid.x, grid.y, grid.z}, cuda::Dim3{block.x, block.y, block.z}, shared_bytes,
                 stream, params, m_device);
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
