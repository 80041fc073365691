// Whole-test preconditions. A tag such as [needs:nvcc] on a TEST_CASE names
// something this machine must have for the test to mean anything: a tool, a
// device, or the absence of one. The test main (catch_main.cpp) checks the
// requirements of the selected test cases before any of them runs. When none
// of them can run, it prints one line "SKIPPED: <reason>" and exits with
// k_skip_exit_code, which ctest reports as skipped (SKIP_RETURN_CODE). A
// skipped test therefore never ran a single check; a test that started runs
// to its verdict. There is no way to skip from inside a test.
//
// Requirements every test executable knows (catch_main.cpp):
//   [gpu]               a CUDA driver that reports at least one device
//   [needs:nvcc]        the CUDA fixtures (tests/fixtures, built with nvcc)
//   [needs:sm_80]       GPU 0 runs the fixtures' code (compute capability >= 8.0)
//   [needs:no-cuda]     no usable CUDA device (to show the path without one)
//   [needs:cuda-stub]   the CUDA toolkit's stub libcuda.so
//   [needs:tvm-ffi]     the tvm-ffi CPU fixture and libtvm_ffi.so (tvm_ffi_fixture.hpp)
//   [needs:nginx]       an nginx binary (registered by test_static_nginx.cpp)
// A test file adds its own with KERNHUB_TEST_REQUIREMENT.
#pragma once

#include <filesystem>
#include <functional>
#include <string>

namespace kernhub::test {

// The exit code of a test executable whose selected tests cannot run here.
inline constexpr int k_skip_exit_code = 77;

// Says why the requirement is not met, or "" when it is. Called at most
// once per process, before any test runs; must not throw.
using Requirement = std::function<std::string()>;

// Registers the requirement behind a tag (without brackets, as "needs:nvcc").
// Returns true, so it can initialise a namespace-scope constant.
bool register_requirement(const std::string& tag, Requirement why_unmet);

// The toolkit's stub driver: links like libcuda but answers every call with
// CUDA_ERROR_STUB_LIBRARY (34).
inline const std::filesystem::path k_cuda_stub_driver = "/usr/local/cuda/lib64/stubs/libcuda.so";

}  // namespace kernhub::test

#define KERNHUB_TEST_CONCAT_(a, b) a##b
#define KERNHUB_TEST_CONCAT(a, b) KERNHUB_TEST_CONCAT_(a, b)
// KERNHUB_TEST_REQUIREMENT("needs:clang", [] { return have_clang() ? "" : "no clang"; });
#define KERNHUB_TEST_REQUIREMENT(tag, why_unmet)                                                  \
    static const bool KERNHUB_TEST_CONCAT(kernhub_test_requirement_, __LINE__) [[maybe_unused]] = \
        ::kernhub::test::register_requirement(tag, why_unmet)
