// The tvm-ffi fixture kernels (tests/fixtures/tvm_ffi) are real tvm-ffi
// libraries: called here without kernhub, through plain dlopen/dlsym and the
// C calling convention of the wheel's own headers, they compute and raise
// errors as the TVM FFI ABI says. The kernhub tests of tvm-ffi variants build
// on these facts.
#include <dlfcn.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "elf/elf_inspect.hpp"
#include "support/requirements.hpp"
#include "support/tvm_ffi_fixture.hpp"

// The wheel's C ABI headers, on the include path of this executable only
// when the build found the wheel (tests/CMakeLists.txt).
#if KERNHUB_TVM_FFI_HEADERS
#include <dlpack/dlpack.h>
#include <tvm/ffi/c_api.h>

namespace fs = std::filesystem;
using namespace kernhub::test;

namespace {

KERNHUB_TEST_REQUIREMENT("needs:tvm-ffi-cuda-fixture", []() -> std::string {
    return tvm_ffi_cuda_fixture_so().empty() ? "the CUDA tvm-ffi fixture was not built (no nvcc or no tvm-ffi)" : "";
});

// A library opened for the rest of the process: tvm-ffi keeps global
// registries, and the kernels point into libtvm_ffi.so, so nothing is closed.
void* open_for_good(const fs::path& path, int flags) {
    void* handle = dlopen(path.c_str(), flags);
    if (handle == nullptr) FAIL("dlopen " << path << ": " << dlerror());
    return handle;
}

// libtvm_ffi.so first, RTLD_GLOBAL: the fixtures name it as NEEDED and carry
// no rpath, so the dynamic loader finds it only because it is loaded.
void* runtime() {
    static void* handle = open_for_good(tvm_ffi_runtime_library(), RTLD_NOW | RTLD_GLOBAL);
    return handle;
}

void* cpu_fixture() {
    runtime();
    static void* handle = open_for_good(tvm_ffi_fixture_so(), RTLD_NOW | RTLD_LOCAL);
    return handle;
}

template <typename Fn>
Fn symbol(void* library, const char* name) {
    void* address = dlsym(library, name);
    if (address == nullptr) FAIL("dlsym " << name << ": " << dlerror());
    return reinterpret_cast<Fn>(address);
}

TVMFFISafeCallType tvm_function(void* library, const std::string& name) {
    return symbol<TVMFFISafeCallType>(library, ("__tvm_ffi_" + name).c_str());
}

// A 1-D CPU tensor over `data`, without strides (compact, as DLPack allows).
struct Vector {
    std::vector<char> bytes;
    int64_t shape[1];
    DLTensor tensor{};

    Vector(DLDataTypeCode code, uint8_t bits, int64_t length)
        : bytes(static_cast<size_t>(length) * bits / 8), shape{length} {
        tensor.data = bytes.data();
        tensor.device = DLDevice{kDLCPU, 0};
        tensor.ndim = 1;
        tensor.dtype = DLDataType{static_cast<uint8_t>(code), bits, 1};
        tensor.shape = shape;
    }
    float* floats() { return reinterpret_cast<float*>(bytes.data()); }
    TVMFFIAny any() {
        TVMFFIAny value{};
        value.type_index = kTVMFFIDLTensorPtr;
        value.v_ptr = &tensor;
        return value;
    }
};

TVMFFIAny none() {
    TVMFFIAny value{};
    value.type_index = kTVMFFINone;
    return value;
}

TVMFFIAny int_arg(int64_t v) {
    TVMFFIAny value{};
    value.type_index = kTVMFFIInt;
    value.v_int64 = v;
    return value;
}

TVMFFIAny float_arg(double v) {
    TVMFFIAny value{};
    value.type_index = kTVMFFIFloat;
    value.v_float64 = v;
    return value;
}

struct RaisedError {
    std::string kind;
    std::string message;
};

// The error the last failed call left in tvm-ffi's thread-local slot, taken
// out (so the slot is clear) and released.
RaisedError take_raised_error() {
    using MoveFromRaised = void (*)(TVMFFIObjectHandle*);
    using DecRef = int (*)(TVMFFIObjectHandle);
    TVMFFIObjectHandle error = nullptr;
    symbol<MoveFromRaised>(runtime(), "TVMFFIErrorMoveFromRaised")(&error);
    REQUIRE(error != nullptr);
    REQUIRE(static_cast<TVMFFIObject*>(error)->type_index == kTVMFFIError);
    const TVMFFIErrorCell* cell = TVMFFIErrorGetCellPtr(error);
    RaisedError raised{std::string(cell->kind.data, cell->kind.size),
                       std::string(cell->message.data, cell->message.size)};
    symbol<DecRef>(runtime(), "TVMFFIObjectDecRef")(error);
    return raised;
}

}  // namespace

TEST_CASE("tvm-ffi fixture: a plain shared object named as a tvm-ffi variant ships it", "[tvmffi][needs:tvm-ffi]") {
    const fs::path cpu = tvm_ffi_fixture_so();
    CHECK(cpu.filename() == "_kh_tvm_ops_cpu_4f2a1c9.so");  // no lib prefix
    CHECK(tvm_ffi_runtime_library().filename() == "libtvm_ffi.so");
    const kernhub::elf::ElfFacts facts = kernhub::elf::inspect_elf_file(cpu);
    CHECK(facts.type == "DYN");
    CHECK(std::count(facts.needed.begin(), facts.needed.end(), "libtvm_ffi.so") == 1);
    for (const char* name : {"__tvm_ffi_add_one", "__tvm_ffi_scaled_sum", "__tvm_ffi_add_int",
                             "__tvm_ffi_length_or_minus_one", "__tvm_ffi_greeting", "__tvm_ffi_current_stream"}) {
        CHECK(std::count(facts.exported_functions.begin(), facts.exported_functions.end(), name) == 1);
    }
    // Hidden visibility: no C-named function but the tvm-ffi entry points
    // (C++ names that must stay visible, such as std:: template code, remain).
    for (const std::string& name : facts.exported_functions) {
        if (name.rfind("_Z", 0) != 0) CHECK_THAT(name, Catch::StartsWith("__tvm_ffi_"));
    }
}

TEST_CASE("tvm-ffi fixture: the CUDA library is named for its nvcc and needs no libcudart",
          "[tvmffi][needs:tvm-ffi][needs:tvm-ffi-cuda-fixture]") {
    const fs::path cuda = tvm_ffi_cuda_fixture_so();
    CHECK_THAT(cuda.filename().string(), Catch::StartsWith("_kh_tvm_cuda_cu") && Catch::EndsWith("_4f2a1c9.so"));
    const kernhub::elf::ElfFacts facts = kernhub::elf::inspect_elf_file(cuda);
    CHECK(std::count(facts.needed.begin(), facts.needed.end(), "libtvm_ffi.so") == 1);
    for (const std::string& needed : facts.needed) CHECK_THAT(needed, !Catch::StartsWith("libcudart"));
    CHECK(std::count(facts.exported_functions.begin(), facts.exported_functions.end(), "__tvm_ffi_add_one_cuda") == 1);
    for (const std::string& name : facts.exported_functions) {
        if (name.rfind("_Z", 0) != 0) CHECK_THAT(name, Catch::StartsWith("__tvm_ffi_"));
    }
}

TEST_CASE("tvm-ffi fixture: add_one through the C calling convention", "[tvmffi][needs:tvm-ffi]") {
    TVMFFISafeCallType add_one = tvm_function(cpu_fixture(), "add_one");

    SECTION("float32 tensors: y = x + 1, and the result is None") {
        Vector x(kDLFloat, 32, 5);
        Vector y(kDLFloat, 32, 5);
        for (int i = 0; i < 5; ++i) {
            x.floats()[i] = 0.5F * static_cast<float>(i) - 1.0F;
            y.floats()[i] = -99.0F;
        }
        TVMFFIAny args[] = {x.any(), y.any()};
        TVMFFIAny result = none();
        REQUIRE(add_one(nullptr, args, 2, &result) == 0);
        CHECK(result.type_index == kTVMFFINone);
        for (int i = 0; i < 5; ++i) CHECK(y.floats()[i] == x.floats()[i] + 1.0F);
    }

    SECTION("an int32 tensor: the call fails with a TypeError naming the dtypes") {
        Vector x(kDLInt, 32, 3);
        Vector y(kDLFloat, 32, 3);
        TVMFFIAny args[] = {x.any(), y.any()};
        TVMFFIAny result = none();
        CHECK(add_one(nullptr, args, 2, &result) != 0);
        const RaisedError error = take_raised_error();
        CHECK(error.kind == "TypeError");
        CHECK_THAT(error.message, Catch::Contains("float32"));
        CHECK_THAT(error.message, Catch::Contains("add_one: x must be float32, got int32"));
    }

    SECTION("unequal lengths: ValueError") {
        Vector x(kDLFloat, 32, 3);
        Vector y(kDLFloat, 32, 4);
        TVMFFIAny args[] = {x.any(), y.any()};
        TVMFFIAny result = none();
        CHECK(add_one(nullptr, args, 2, &result) != 0);
        CHECK(take_raised_error().kind == "ValueError");
    }

    SECTION("one argument short: the binding itself refuses the call") {
        Vector x(kDLFloat, 32, 3);
        TVMFFIAny args[] = {x.any()};
        TVMFFIAny result = none();
        CHECK(add_one(nullptr, args, 1, &result) != 0);
        CHECK_FALSE(take_raised_error().message.empty());
    }
}

TEST_CASE("tvm-ffi fixture: scalar arguments, a double result and an optional tensor", "[tvmffi][needs:tvm-ffi]") {
    void* library = cpu_fixture();

    SECTION("add_int(2, 40) is the int 42") {
        TVMFFIAny args[] = {int_arg(2), int_arg(40)};
        TVMFFIAny result = none();
        REQUIRE(tvm_function(library, "add_int")(nullptr, args, 2, &result) == 0);
        CHECK(result.type_index == kTVMFFIInt);
        CHECK(result.v_int64 == 42);
    }

    SECTION("scaled_sum(x, 0.5) is the float half of x's sum") {
        Vector x(kDLFloat, 32, 4);
        for (int i = 0; i < 4; ++i) x.floats()[i] = static_cast<float>(i + 1);  // sum 10
        TVMFFIAny args[] = {x.any(), float_arg(0.5)};
        TVMFFIAny result = none();
        REQUIRE(tvm_function(library, "scaled_sum")(nullptr, args, 2, &result) == 0);
        CHECK(result.type_index == kTVMFFIFloat);
        CHECK(result.v_float64 == 5.0);
    }

    SECTION("length_or_minus_one: -1 for None, the length for a DLTensor*") {
        TVMFFISafeCallType length = tvm_function(library, "length_or_minus_one");
        TVMFFIAny null_arg[] = {none()};
        TVMFFIAny result = none();
        REQUIRE(length(nullptr, null_arg, 1, &result) == 0);
        CHECK(result.type_index == kTVMFFIInt);
        CHECK(result.v_int64 == -1);

        Vector x(kDLFloat, 32, 7);
        TVMFFIAny tensor_arg[] = {x.any()};
        result = none();
        REQUIRE(length(nullptr, tensor_arg, 1, &result) == 0);
        CHECK(result.type_index == kTVMFFIInt);
        CHECK(result.v_int64 == 7);
    }
}

// No GPU needed: add_one_cuda checks its arguments before any CUDA call, and
// loading the library touches no device (cudart is static and starts lazily).
TEST_CASE("tvm-ffi fixture: the CUDA kernel loads and refuses CPU tensors with a TypeError",
          "[tvmffi][needs:tvm-ffi][needs:tvm-ffi-cuda-fixture]") {
    runtime();
    void* library = open_for_good(tvm_ffi_cuda_fixture_so(), RTLD_NOW | RTLD_LOCAL);
    TVMFFISafeCallType add_one_cuda = tvm_function(library, "add_one_cuda");
    Vector x(kDLFloat, 32, 3);
    Vector y(kDLFloat, 32, 3);
    TVMFFIAny args[] = {x.any(), y.any()};
    TVMFFIAny result = none();
    CHECK(add_one_cuda(nullptr, args, 2, &result) != 0);
    const RaisedError error = take_raised_error();
    CHECK(error.kind == "TypeError");
    CHECK_THAT(error.message, Catch::Contains("must be on a CUDA device"));
}

#else
TEST_CASE("tvm-ffi fixture: the wheel's headers were not found", "[tvmffi][needs:tvm-ffi]") {
    // Unreachable where [needs:tvm-ffi] is met: the headers come with the
    // wheel that built the fixture.
    FAIL("test_tvmffi was built without KERNHUB_TVM_FFI_INCLUDE");
}
#endif
