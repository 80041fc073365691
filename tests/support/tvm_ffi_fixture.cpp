#include "support/tvm_ffi_fixture.hpp"
#include "support/build_paths.hpp"

#include <system_error>

namespace kernhub::test {

std::filesystem::path tvm_ffi_fixture_so() {
    return KERNHUB_TVM_FFI_FIXTURE;
}

std::filesystem::path tvm_ffi_cuda_fixture_so() {
    return KERNHUB_TVM_FFI_CUDA_FIXTURE;
}

std::filesystem::path tvm_ffi_runtime_library() {
    return KERNHUB_TVM_FFI_LIBRARY;
}

std::string why_no_tvm_ffi() {
    const std::filesystem::path fixture = tvm_ffi_fixture_so();
    const std::filesystem::path runtime = tvm_ffi_runtime_library();
    if (fixture.empty() || runtime.empty()) {
        return std::string("the build found no apache-tvm-ffi in KERNHUB_TEST_PYTHON (") + KERNHUB_TEST_PYTHON +
               "), so the tvm-ffi fixtures were not built (pip install -r tests/requirements.txt)";
    }
    // The wheel may have been uninstalled since the build, or the fixture
    // target not built (a partial build).
    std::error_code ec;
    if (!std::filesystem::is_regular_file(runtime, ec)) return "the tvm-ffi runtime " + runtime.string() + " is gone";
    if (!std::filesystem::is_regular_file(fixture, ec)) {
        return "the tvm-ffi fixture " + fixture.string() + " was not built (target kernhub_fixtures)";
    }
    return {};
}

}  // namespace kernhub::test
