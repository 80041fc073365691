// The enumerations of the public API's results, and their names as the
// CLI's output and kernhub.lock spell them (to_string).
#pragma once

namespace kernhub {

// What a hub repo is: a kernel repo, or a model repo that holds kernels.
enum class RepoType { kernel, model };

// What Client::load resolved, and the handle that takes it.
enum class LoadKind {
    function,     // a C symbol: KernelFn<Sig>::from
    cuda_kernel,  // a CUfunction/CUkernel of a CUDA image: CudaKernel::from (kernhub/cuda.hpp)
    tvm_ffi,      // a tvm-ffi safe call: TvmFunction::from (kernhub/tvm_ffi.hpp)
    torch_op,     // an op in LibTorch's dispatcher: kernhub::torch::op (kernhub/torch.hpp)
};

// The format of a lock file Client::prewarm read.
enum class LockFormat {
    kernhub_lock,       // kernhub.lock
    kernels_lock,       // kernels.lock of the Python kernels library 0.17 and later
    kernels_lock_0_16,  // kernels.lock of kernels 0.16 and earlier
};

// The compression of a cache archive, chosen by its file name.
enum class Compression { none, gzip, xz, zstd };

// "kernel", "model".
inline const char* to_string(RepoType type) noexcept {
    return type == RepoType::kernel ? "kernel" : "model";
}

// "function", "cuda-kernel", "tvm-ffi", "torch-op".
inline const char* to_string(LoadKind kind) noexcept {
    switch (kind) {
        case LoadKind::function:
            return "function";
        case LoadKind::cuda_kernel:
            return "cuda-kernel";
        case LoadKind::tvm_ffi:
            return "tvm-ffi";
        case LoadKind::torch_op:
            return "torch-op";
    }
    return "function";
}

// "kernhub.lock", "kernels.lock", "kernels.lock (0.16)".
inline const char* to_string(LockFormat format) noexcept {
    switch (format) {
        case LockFormat::kernhub_lock:
            return "kernhub.lock";
        case LockFormat::kernels_lock:
            return "kernels.lock";
        case LockFormat::kernels_lock_0_16:
            return "kernels.lock (0.16)";
    }
    return "kernhub.lock";
}

// "none", "gzip", "xz", "zstd".
inline const char* to_string(Compression compression) noexcept {
    switch (compression) {
        case Compression::none:
            return "none";
        case Compression::gzip:
            return "gzip";
        case Compression::xz:
            return "xz";
        case Compression::zstd:
            return "zstd";
    }
    return "none";
}

}  // namespace kernhub
