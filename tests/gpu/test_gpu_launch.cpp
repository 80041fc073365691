// Loading an nvcc-built fatbin and running it on a real GPU through the
// driver binding. Every case needs a device ([gpu]); on a host without one
// the test main skips them before they start (tests/support/requirements.hpp).
#include <catch2/catch.hpp>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "cuda/driver.hpp"
#include "kernhub/error.hpp"
#include "support/build_paths.hpp"
#include "support/slurp.hpp"

namespace fs = std::filesystem;
using kernhub::Error;
using kernhub::ErrorCode;
using namespace kernhub::cuda;

namespace {

// multi.fatbin: kh_vector_add(const float*, const float*, float*, unsigned long n)
// as sm_80 and sm_90a SASS plus compute_90 PTX.
const fs::path k_fatbin = fs::path(KERNHUB_FIXTURE_DIR) / "multi.fatbin";

std::vector<unsigned char> read_bytes(const fs::path& path) {
    return kernhub::test::slurp_bytes(path);
}

// The fixture has code for compute capability 8.x (sm_80 SASS) and 9.0 and
// newer (sm_90a SASS, compute_90 PTX); older GPUs must be refused. (Tests
// that need it to run carry [needs:sm_80].)
bool fixture_runs_on(const Device& device) {
    return device.cc_major >= 8;
}

}  // namespace

TEST_CASE("an nvcc fatbin loads, launches and adds 1M floats on GPU 0", "[cuda][gpu][needs:nvcc]") {
    const Device device = Driver::instance().info().devices.at(0);
    const std::vector<unsigned char> image = read_bytes(k_fatbin);
    INFO("GPU 0: " << device.name << ", compute capability " << device.cc_major << "." << device.cc_minor);
    if (!fixture_runs_on(device)) {
        const Error error = [&] {
            try {
                Library library = Driver::instance().load(image.data(), k_fatbin.filename().string());
                library.kernel("kh_vector_add");
            } catch (const Error& e) {
                return e;
            }
            FAIL("a GPU older than sm_80 should have no code in the fixture");
            throw std::logic_error("unreachable");
        }();
        CHECK(error.code() == ErrorCode::load);
        CHECK_THAT(error.message(), Catch::Contains("209"));
        return;
    }
    Library library = Driver::instance().load(image.data(), k_fatbin.filename().string());
    void* kernel = library.kernel("kh_vector_add");
    REQUIRE(kernel != nullptr);

    constexpr std::size_t k_count = std::size_t{1} << 20;
    constexpr unsigned k_block = 256;
    // Small integers, so every sum is exact in float.
    std::vector<float> a(k_count), b(k_count), c(k_count, -1.0f);
    for (std::size_t i = 0; i < k_count; ++i) {
        a[i] = static_cast<float>(i % 4096);
        b[i] = static_cast<float>(2 * (i % 1000));
    }
    const std::size_t bytes = k_count * sizeof(float);
    kernhub::cuda::DeviceBuffer da(bytes), db(bytes), dc(bytes);
    copy_to_device(da, a.data(), bytes);
    copy_to_device(db, b.data(), bytes);
    std::uint64_t pa = da.address(), pb = db.address(), pc = dc.address();
    unsigned long n = k_count;
    void* params[] = {&pa, &pb, &pc, &n};
    launch(kernel, kernhub::cuda::Dim3{static_cast<unsigned>(k_count / k_block)}, kernhub::cuda::Dim3{k_block}, 0,
           nullptr, params);
    synchronize();
    copy_to_host(c.data(), dc, bytes);

    std::size_t wrong = 0;
    for (std::size_t i = 0; i < k_count; ++i) wrong += c[i] != a[i] + b[i] ? 1 : 0;
    INFO("first values: " << c[0] << ", " << c[1] << ", " << c[k_count - 1]);
    CHECK(wrong == 0);
}

TEST_CASE("a kernel name the fatbin lacks is not_found, naming kernel and file",
          "[cuda][gpu][needs:nvcc][needs:sm_80]") {
    const std::vector<unsigned char> image = read_bytes(k_fatbin);
    Library library = Driver::instance().load(image.data(), "multi.fatbin");
    try {
        library.kernel("kh_no_such_kernel");
        FAIL("looking up a missing kernel should throw");
    } catch (const Error& e) {
        CHECK(e.code() == ErrorCode::not_found);
        CHECK_THAT(e.message(), Catch::Contains("kernel 'kh_no_such_kernel' not found in multi.fatbin"));
    }
}

TEST_CASE("an image that is not CUDA code is refused with a load error naming it", "[cuda][gpu]") {
    // NUL-terminated, so the driver may read it as (invalid) PTX text.
    const std::string junk = "this is not a fatbin, a cubin or PTX";
    try {
        Library library = Driver::instance().load(junk.c_str(), "junk.fatbin");
        library.kernel("kh_vector_add");
        FAIL("loading junk should throw");
    } catch (const Error& e) {
        INFO(e.what());
        CHECK(e.code() == ErrorCode::load);
        CHECK_THAT(e.message(), Catch::Contains("junk.fatbin"));
    }
}
