// End to end on a GPU: fetch a native-cuda kernel from the loopback hub,
// verify, load it through the driver API, launch it and check the result.
// Every case needs a device ([gpu]) that can run the nvcc-built fixture
// ([needs:nvcc], [needs:sm_80]); without them the test main skips the case before it
// starts (tests/support/requirements.hpp).
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <vector>

#include "kernhub/cuda.hpp"
#include "kernhub/kernhub.hpp"
#include "support/device_buffer.hpp"
#include "support/kernel_hub.hpp"

using namespace kernhub;
using namespace kernhub::test;
namespace fs = std::filesystem;

namespace {

Options options_for(KernelHub& hub, const TempDir& dir) {
    Options o;
    o.endpoint = hub.server().endpoint();
    o.cache_dir = (dir.path() / "cache").string();
    o.registries = {write_standard_registry(dir.path()).string()};
    o.project_dir = dir.path().string();
    o.no_default_registry = true;
    o.offline = false;
    o.token = "";
    return o;
}

}  // namespace

TEST_CASE("a native-cuda kernel from the hub launches and computes vector-add", "[gpu][needs:nvcc][needs:sm_80]") {
    KernelHub hub;
    TempDir dir;
    Options o = options_for(hub, dir);
    // verify_on_load hands the driver the buffer it hashed.
    o.verify_on_load = GENERATE(false, true);
    Client client(o);
    LoadResult loaded = client.load("vector-add-cuda");
    CHECK(loaded.fetch.variant == "native-cuda");
    CHECK(loaded.file.find("vector_add.fatbin") != std::string::npos);

    const unsigned long long n = 1 << 20;
    std::vector<float> a(n), b(n), out(n, -1.0f);
    for (unsigned long long i = 0; i < n; ++i) {
        a[i] = static_cast<float>(i);
        b[i] = 0.5f * static_cast<float>(i);
    }
    DeviceBuffer da(n * sizeof(float)), db(n * sizeof(float)), dout(n * sizeof(float));
    da.copy_from_host(a.data(), n * sizeof(float));
    db.copy_from_host(b.data(), n * sizeof(float));

    auto kernel = CudaKernel::from(client.loaded("vector-add-cuda"));
    CHECK(kernel.handle() == loaded.address);
    const unsigned block = 256;
    const unsigned grid = static_cast<unsigned>((n + block - 1) / block);
    kernel.launch({grid}, {block}, 0, nullptr, da.device_pointer(), db.device_pointer(), dout.device_pointer(), n);
    cuda_synchronize();
    dout.copy_to_host(out.data(), n * sizeof(float));

    std::size_t wrong = 0;
    for (unsigned long long i = 0; i < n; ++i) {
        if (std::fabs(out[i] - 1.5f * static_cast<float>(i)) > 1e-3f * (1.0f + static_cast<float>(i))) ++wrong;
    }
    CHECK(wrong == 0);
    CHECK(out[n - 1] == Approx(1.5 * static_cast<double>(n - 1)));
}

TEST_CASE("a kernel name missing from the fatbin is not found (exit 3)", "[gpu][needs:nvcc][needs:sm_80]") {
    KernelHub hub;
    TempDir dir;
    Client client(options_for(hub, dir));
    try {
        client.load("cuda-missing-kernel");
        FAIL("expected not_found");
    } catch (const Error& e) {
        CHECK(e.code() == ErrorCode::not_found);
        CHECK(std::string(e.what()).find("kh_nope") != std::string::npos);
    }
}
