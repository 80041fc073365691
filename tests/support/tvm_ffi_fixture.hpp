// The tvm-ffi fixture kernels (tests/fixtures/tvm_ffi) and the tvm-ffi
// runtime they need, as the build found them in KERNHUB_TEST_PYTHON's
// apache-tvm-ffi wheel (tests/fixtures/CMakeLists.txt). A test case that
// uses them carries the tag [needs:tvm-ffi] (registered in catch_main.cpp):
// without the wheel it is skipped before it starts.
#pragma once

#include <filesystem>
#include <string>

namespace kernhub::test {

// _kh_tvm_ops_cpu_4f2a1c9.so: a `tvm-ffi*-cpu` variant's library. It exports,
// in the TVM FFI C calling convention (__tvm_ffi_<name>):
//   add_one(TensorView x, TensorView y)          y[i] = x[i] + 1, 1-D float32 CPU;
//                                                TypeError naming the argument and
//                                                dtype ("add_one: x must be float32,
//                                                got int32"), ValueError for unequal
//                                                lengths
//   scaled_sum(TensorView x, double f) -> double f * sum(x), x 1-D float32 CPU
//   add_int(int64_t a, int64_t b) -> int64_t
//   length_or_minus_one(Optional<TensorView> x) -> int64_t
//                                                -1 for None, else x's length
//   greeting(bool long_form) -> String           "hi" (a small string in the
//                                                result cell) or a string object
//   current_stream(int64_t device) -> void*     TVMFFIEnvGetStream(kDLCUDA, device),
//                                                an opaque pointer (no GPU needed)
// and a data object __tvm_ffi_not_code (char[16]), named like a function.
// Empty when the build did not make it.
std::filesystem::path tvm_ffi_fixture_so();

// _kh_tvm_cuda_cu<MAJ><MIN>_4f2a1c9.so (nvcc's version): exports
// add_one_cuda(TensorView x, TensorView y), float32 on a CUDA device, launched
// on TVMFFIEnvGetStream(kDLCUDA, device id); TypeError for another dtype or
// device. cudart is linked in statically. Empty when not built (no nvcc).
std::filesystem::path tvm_ffi_cuda_fixture_so();

// The wheel's tvm_ffi/lib/libtvm_ffi.so, which the fixtures name as NEEDED
// without an rpath: load it (RTLD_GLOBAL) before them. Empty when not found.
std::filesystem::path tvm_ffi_runtime_library();

// Why [needs:tvm-ffi] is unmet ("" when the CPU fixture and the runtime
// library both exist).
std::string why_no_tvm_ffi();

}  // namespace kernhub::test
