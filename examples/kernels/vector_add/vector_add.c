/* A demo compute kernel with C entry points, published on the demo hub as
 * build/native-cpu-<cpu>-linux/libvector_add.so. */
#include <stddef.h>
#include <stdint.h>

#define KH_EXPORT __attribute__((visibility("default")))

/* out[i] = a[i] + b[i] for i in [0, n). The buffers may alias. */
KH_EXPORT void kh_vector_add(const float* a, const float* b, float* out, size_t n) {
    for (size_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

/* out[i] = alpha * x[i] + y[i]. */
KH_EXPORT void kh_saxpy(float alpha, const float* x, const float* y, float* out, size_t n) {
    for (size_t i = 0; i < n; ++i) out[i] = alpha * x[i] + y[i];
}

/* ABI version of this kernel's entry points; callers may check it. */
KH_EXPORT uint32_t kh_abi_version(void) {
    return 1u;
}
