/* The plain-pointer baseline of bench_tvm_dispatch: the work of the tvm-ffi
 * fixture's add_int (tests/fixtures/tvm_ffi/kh_tvm_ops.cc) as a C function
 * in a shared object of its own, so a call cannot be inlined and goes
 * through a dlsym'd pointer exactly as a native kernel's does. */
#include <stdint.h>

__attribute__((visibility("default"))) int64_t khbench_add_i64(int64_t a, int64_t b) {
    return a + b;
}
