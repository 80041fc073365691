// A CUDA tvm-ffi variant on a GPU: fetched from the loopback hub, loaded with
// the tvm-ffi runtime bound, and called on the caller's stream (set with
// TVMFFIEnvSetStream around the call); the kernel's TypeError comes back as
// Error(kernel). Needs a device ([gpu]) whose driver runs the fixture's CUDA
// version, the wheel ([needs:tvm-ffi]) and the nvcc-built fixture.
#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "cuda/driver.hpp"
#include "kernhub/cuda.hpp"
#include "kernhub/kernhub.hpp"
#include "kernhub/tvm_ffi.hpp"
#include "support/device_buffer.hpp"
#include "support/requirements.hpp"
#include "tvmffi/tvm_hub.hpp"

using namespace kernhub;
using namespace kernhub::test;
using namespace kernhub::test::tvm;

namespace {

// cu130 -> 130: the driver must run that CUDA version (the fixture links
// cudart statically).
KERNHUB_TEST_REQUIREMENT("needs:tvm-ffi-cuda", []() -> std::string {
    const std::string variant = cuda_variant();
    if (variant.empty()) return "the CUDA tvm-ffi fixture was not built (no nvcc or no tvm-ffi)";
    const std::string backend = variant.substr(std::string("tvm-ffi01-cu").size(), 3);
    const int needed = std::stoi(backend);
    try {
        const cuda::DriverInfo info = cuda::Driver::instance().info();
        const int has = info.major() * 10 + info.minor();
        if (has < needed) return "the CUDA driver is " + std::to_string(has) + ", the fixture needs " + backend;
    } catch (const Error& e) {
        return e.message();
    }
    return "";
});

// A 1-D float32 tensor of `n` elements at a device pointer (DLPack layout).
struct DeviceTensor {
    void* data;
    std::int32_t device_type;
    std::int32_t device_id;
    std::int32_t ndim;
    std::uint8_t code, bits;
    std::uint16_t lanes;
    std::int64_t* shape;
    std::int64_t* strides;
    std::uint64_t byte_offset;
};
static_assert(sizeof(DeviceTensor) == 48, "DLTensor layout");

DeviceTensor tensor_at(void* data, std::int32_t device_type, std::int64_t* length) {
    return DeviceTensor{data, device_type, 0, 1, 2, 32, 1, length, nullptr, 0};
}

}  // namespace

TEST_CASE("a CUDA tvm-ffi kernel called on_stream (the default stream) computes add_one",
          "[gpu][needs:tvm-ffi][needs:tvm-ffi-cuda][needs:sm_80]") {
    TvmHub hub;
    TempDir dir;
    Options o;
    o.endpoint = hub.server().endpoint();
    o.cache_dir = (dir.path() / "cache").string();
    o.registries = {write_registry(dir.path()).string()};
    o.no_default_registry = true;
    o.tvm_ffi_library = tvm_ffi_runtime_library().string();
    Client client(o);
    // Detection picks the CUDA build on a GPU host.
    const LoadResult loaded = client.load("tvm-cuda-add-one");
    CHECK(loaded.fetch.variant == cuda_variant());
    CHECK(loaded.kind == LoadKind::tvm_ffi);

    std::int64_t n = 1 << 20;
    std::vector<float> host(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i) * 0.5f;
    kernhub::test::DeviceBuffer x(host.size() * sizeof(float));
    kernhub::test::DeviceBuffer y(host.size() * sizeof(float));
    x.copy_from_host(host.data(), host.size() * sizeof(float));
    DeviceTensor tx = tensor_at(reinterpret_cast<void*>(x.device_pointer()), 2, &n);  // kDLCUDA
    DeviceTensor ty = tensor_at(reinterpret_cast<void*>(y.device_pointer()), 2, &n);

    auto add_one = TvmFunction::from(loaded);
    CHECK(add_one.on_stream(0, nullptr, &tx, &ty).is_none());
    cuda_synchronize(0);
    std::vector<float> out(host.size(), -1.0f);
    y.copy_to_host(out.data(), out.size() * sizeof(float));
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < out.size(); ++i) wrong += out[i] == host[i] + 1.0f ? 0 : 1;
    CHECK(wrong == 0);

    // CPU tensors are the kernel's TypeError.
    std::vector<float> cpu(4, 0.0f);
    std::int64_t four = 4;
    DeviceTensor on_cpu = tensor_at(cpu.data(), 1, &four);
    try {
        add_one.on_stream(0, nullptr, &on_cpu, &on_cpu);
        FAIL("a CPU tensor was accepted");
    } catch (const Error& e) {
        CHECK(e.code() == ErrorCode::kernel);
        CHECK(e.message().find("TypeError") != std::string::npos);
    }
}
