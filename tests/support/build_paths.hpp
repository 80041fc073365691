// Where the build put what the tests use: the source and build folders, the
// CLI, the fixtures, the Python interpreters. The values live in one
// generated file (build_paths.cpp in the build folder, tests/CMakeLists.txt),
// not in every test's compile command, so that the compiler cache serves a
// clone at another path: only that one file differs between two clones.
#pragma once

namespace kernhub::test::build {

extern const char* const source_dir;
extern const char* const binary_dir;
extern const char* const python;       // the interpreter CMake found
extern const char* const test_python;  // the one with the test-only PyPI peers
extern const char* const cli_path;
// The kernhub program the tests run: KERNHUB_TEST_CLI when set (ctest points
// the crash-point tests at a program built without the test hooks), else
// the build's own.
const char* cli();
extern const char* const demo_hub;
extern const char* const fixture_dir;
extern const bool have_nvcc;
extern const char* const tvm_ffi_fixture;
extern const char* const tvm_ffi_cuda_fixture;
extern const char* const tvm_ffi_library;
extern const char* const tvm_ffi_include;
// The torch op fixtures' folder (tests/fixtures/torch), "" when not built,
// and why not; the torch package folder (KERNHUB_TEST_TORCH_DIR) and the
// folder of the CUDA runtime libraries its libtorch_cpu.so needs.
extern const char* const torch_fixture_dir;
extern const char* const torch_why_not;
extern const char* const torch_dir;
extern const char* const torch_runtime_dir;
// What `import torch` needs beyond the wheel (tests/requirements-torch-python.txt); "" when not installed.
extern const char* const torch_python_site;
// The CUDA tag (cu130) of the CUDA torch op fixture, _kh_torch_cuda_<hash>,
// built where nvcc is installed and the torch wheel is a CUDA build; ""
// when it is not built.
extern const char* const torch_cuda_tag;

}  // namespace kernhub::test::build

#define KERNHUB_SOURCE_DIR (::kernhub::test::build::source_dir)
#define KERNHUB_BINARY_DIR (::kernhub::test::build::binary_dir)
#define KERNHUB_PYTHON (::kernhub::test::build::python)
#define KERNHUB_TEST_PYTHON (::kernhub::test::build::test_python)
#define KERNHUB_CLI_PATH (::kernhub::test::build::cli())
#define KERNHUB_DEMO_HUB (::kernhub::test::build::demo_hub)
#define KERNHUB_FIXTURE_DIR (::kernhub::test::build::fixture_dir)
#define KERNHUB_HAVE_NVCC (::kernhub::test::build::have_nvcc)
#define KERNHUB_TVM_FFI_FIXTURE (::kernhub::test::build::tvm_ffi_fixture)
#define KERNHUB_TVM_FFI_CUDA_FIXTURE (::kernhub::test::build::tvm_ffi_cuda_fixture)
#define KERNHUB_TVM_FFI_LIBRARY (::kernhub::test::build::tvm_ffi_library)
#define KERNHUB_TVM_FFI_INCLUDE (::kernhub::test::build::tvm_ffi_include)
