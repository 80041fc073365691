// The demo CUDA kernels, published on the demo hub as
// build/native-cuda/vector_add.fatbin (SASS for several GPUs plus PTX for
// newer ones). extern "C" keeps the kernel names unmangled, so the registry's
// "symbol" is the plain name.

// out[i] = a[i] + b[i] for i in [0, n).
extern "C" __global__ void kh_vector_add(const float* a, const float* b, float* out, unsigned long long n) {
    unsigned long long i = blockIdx.x * static_cast<unsigned long long>(blockDim.x) + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}

// out[i] = alpha * x[i] + y[i].
extern "C" __global__ void kh_saxpy(float alpha, const float* x, const float* y, float* out, unsigned long long n) {
    unsigned long long i = blockIdx.x * static_cast<unsigned long long>(blockDim.x) + threadIdx.x;
    if (i < n) out[i] = alpha * x[i] + y[i];
}
