// The CUDA driver binding where there is no usable driver: a missing file,
// the toolkit's stub library, a shared object that is not a driver, and the
// error mapping. The binding is made once per process, so each driver under
// test gets a fresh process: this test binary re-executed with only the
// hidden "child" test case selected and the driver named by the environment.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "cuda/driver.hpp"
#include "kernhub/error.hpp"
#include "support/build_paths.hpp"
#include "support/process.hpp"
#include "support/requirements.hpp"
#include "support/temp_dir.hpp"

namespace fs = std::filesystem;
using kernhub::Error;
using kernhub::ErrorCode;
using namespace kernhub::cuda;

namespace {

constexpr const char* k_report_variable = "KERNHUB_TEST_CUDA_REPORT";
constexpr const char* k_child_test = "cuda child: report what binding the driver gives";
const fs::path& k_stub_driver = kernhub::test::k_cuda_stub_driver;
const fs::path k_not_a_driver = fs::path(KERNHUB_FIXTURE_DIR) / "libkh_good.so";

// What a child process saw when it tried to bind the driver.
struct BindingReport {
    bool available = true;
    int first_code = 0;   // ErrorCode of instance()'s first throw; 0 when it did not throw
    int second_code = 0;  // the same for a second call
    bool same_text = false;
    std::string message;  // what() of the first Error
};

BindingReport bind_in_child(const fs::path& driver) {
    kernhub::test::TempDir dir;
    const fs::path report_path = dir.path() / "report.txt";
    const std::string self = fs::read_symlink("/proc/self/exe").string();
    const auto child = kernhub::test::run_process(
        {self, k_child_test}, {{"KERNHUB_CUDA_DRIVER", driver.string()}, {k_report_variable, report_path.string()}});
    INFO("child output:\n" << child.out << child.err);
    REQUIRE(child.exit_code == 0);
    std::ifstream in(report_path);
    REQUIRE(in);
    BindingReport report;
    std::string key;
    in >> key >> report.available >> key >> report.first_code >> key >> report.second_code >> key >> report.same_text >>
        key;
    std::getline(in >> std::ws, report.message, '\0');
    return report;
}

// Runs f and returns the kernhub::Error it throws; fails the test otherwise.
template <class F>
Error expect_error(F&& f) {
    try {
        f();
    } catch (const Error& e) {
        return e;
    }
    FAIL("expected a kernhub::Error");
    throw std::logic_error("unreachable");
}

}  // namespace

// Runs only when selected by name from bind_in_child; it reports rather
// than asserts, so the parent's test shows the failure with its context.
TEST_CASE("cuda child: report what binding the driver gives", "[.][cuda-child]") {
    const char* report_path = std::getenv(k_report_variable);
    if (report_path == nullptr) return;
    BindingReport report;
    report.available = Driver::available();
    std::string second_text;
    try {
        Driver::instance();
    } catch (const Error& e) {
        report.first_code = static_cast<int>(e.code());
        report.message = e.what();
    }
    try {
        Driver::instance();
    } catch (const Error& e) {
        report.second_code = static_cast<int>(e.code());
        second_text = e.what();
    }
    std::ofstream out(report_path);
    out << "available " << report.available << "\nfirst_code " << report.first_code << "\nsecond_code "
        << report.second_code << "\nsame_text " << (second_text == report.message) << "\nmessage\n"
        << report.message;
}

TEST_CASE("a driver file that does not exist makes CUDA unavailable with a load error", "[cuda]") {
    kernhub::test::TempDir dir;
    const fs::path missing = dir.path() / "no-such-libcuda.so.1";
    const BindingReport report = bind_in_child(missing);
    INFO(report.message);
    CHECK_FALSE(report.available);
    CHECK(report.first_code == static_cast<int>(ErrorCode::load));
    // The failure is cached: every call reports the same thing.
    CHECK(report.second_code == report.first_code);
    CHECK(report.same_text);
    CHECK_THAT(report.message, Catch::Contains("no CUDA driver"));
    CHECK_THAT(report.message, Catch::Contains(missing.string()));
    CHECK_THAT(report.message, Catch::Contains("KERNHUB_CUDA_DRIVER"));
    CHECK_THAT(report.message, Catch::Contains("install the NVIDIA driver or use a CPU variant"));
}

// Without the NVIDIA kernel driver, the default libcuda.so.1 is not looked
// for at all; the message says why.
KERNHUB_TEST_REQUIREMENT("needs:no-kernel-driver", []() -> std::string {
    for (const char* marker : {"/proc/driver/nvidia", "/dev/nvidiactl", "/dev/dxg"}) {
        if (fs::exists(marker)) return std::string(marker) + " exists";
    }
    return "";
});

TEST_CASE("without a kernel driver the default libcuda is reported missing without a search",
          "[cuda][needs:no-kernel-driver]") {
    // An empty KERNHUB_CUDA_DRIVER counts as unset: the default library.
    const BindingReport report = bind_in_child("");
    INFO(report.message);
    CHECK_FALSE(report.available);
    CHECK(report.first_code == static_cast<int>(ErrorCode::load));
    CHECK(report.same_text);
    CHECK_THAT(report.message, Catch::Contains("no CUDA driver"));
    CHECK_THAT(report.message, Catch::Contains("/proc/driver/nvidia"));
    CHECK_THAT(report.message, Catch::Contains("libcuda.so.1 was not tried"));
}

TEST_CASE("the toolkit's stub libcuda is recognised and reported as the stub", "[cuda][needs:cuda-stub]") {
    const BindingReport report = bind_in_child(k_stub_driver);
    INFO(report.message);
    CHECK_FALSE(report.available);
    CHECK(report.first_code == static_cast<int>(ErrorCode::load));
    CHECK(report.same_text);
    CHECK_THAT(report.message, Catch::Contains("CUDA error 34 CUDA_ERROR_STUB_LIBRARY"));
    CHECK_THAT(report.message, Catch::Contains("stub library"));
    CHECK_THAT(report.message, Catch::Contains("libcuda.so"));
}

TEST_CASE("a shared object that is not a CUDA driver is refused by name", "[cuda]") {
    REQUIRE(fs::exists(k_not_a_driver));
    const BindingReport report = bind_in_child(k_not_a_driver);
    INFO(report.message);
    CHECK_FALSE(report.available);
    CHECK(report.first_code == static_cast<int>(ErrorCode::load));
    CHECK_THAT(report.message, Catch::Contains(k_not_a_driver.string()));
    CHECK_THAT(report.message, Catch::Contains("cuGetProcAddress"));
}

TEST_CASE("available() and instance() agree in this process", "[cuda]") {
    if (Driver::available()) {
        CHECK_NOTHROW(Driver::instance());
        return;
    }
    const Error error = expect_error([] { Driver::instance(); });
    CHECK(error.code() == ErrorCode::load);
    CHECK_THAT(error.what(), Catch::Contains("CUDA"));
}

TEST_CASE("error_name knows the codes a kernel loader meets", "[cuda]") {
    CHECK(error_name(34) == "CUDA_ERROR_STUB_LIBRARY");
    CHECK(error_name(100) == "CUDA_ERROR_NO_DEVICE");
    CHECK(error_name(200) == "CUDA_ERROR_INVALID_IMAGE");
    CHECK(error_name(209) == "CUDA_ERROR_NO_BINARY_FOR_GPU");
    CHECK(error_name(218) == "CUDA_ERROR_INVALID_PTX");
    CHECK(error_name(222) == "CUDA_ERROR_UNSUPPORTED_PTX_VERSION");
    CHECK(error_name(500) == "CUDA_ERROR_NOT_FOUND");
    CHECK(error_name(999) == "CUDA_ERROR_UNKNOWN");
}

TEST_CASE("fail() maps CUDA codes to kernhub errors with the code, its name and advice", "[cuda]") {
    struct Case {
        int code;
        ErrorCode expected;
        const char* name;
        const char* advice;
    };
    const Case cases[] = {
        {34, ErrorCode::load, "CUDA_ERROR_STUB_LIBRARY", "install the NVIDIA driver"},
        {200, ErrorCode::load, "CUDA_ERROR_INVALID_IMAGE", "see what it is (kernhub::inspect_file)"},
        {209, ErrorCode::load, "CUDA_ERROR_NO_BINARY_FOR_GPU", "fetch a variant built for this GPU"},
        {218, ErrorCode::load, "CUDA_ERROR_INVALID_PTX", "SASS"},
        {222, ErrorCode::load, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "update the NVIDIA driver"},
        {500, ErrorCode::not_found, "CUDA_ERROR_NOT_FOUND", "symbol"},
        {999, ErrorCode::load, "CUDA_ERROR_UNKNOWN", "nvidia-smi"},
    };
    for (const Case& c : cases) {
        const std::string what = "cuLibraryLoadData of add.fatbin for device 3";
        const Error error = expect_error([&] { fail(c.code, what); });
        INFO(error.what());
        CHECK(error.code() == c.expected);
        CHECK_THAT(error.message(), Catch::StartsWith(what));
        CHECK_THAT(error.message(), Catch::Contains("CUDA error " + std::to_string(c.code) + " " + c.name));
        CHECK_THAT(error.message(), Catch::Contains(c.advice));
    }
}

TEST_CASE("fail() with a code kernhub has no advice for still names the number", "[cuda]") {
    const Error error = expect_error([] { fail(12345, "cuMemAlloc of 4 bytes on device 0"); });
    CHECK(error.code() == ErrorCode::load);
    CHECK_THAT(error.message(), Catch::Contains("CUDA error 12345"));
    CHECK_THAT(error.message(), Catch::Contains("cuMemAlloc of 4 bytes on device 0"));
}

TEST_CASE("caller mistakes are usage errors, found before the driver is needed", "[cuda]") {
    DeviceBuffer empty(0);
    CHECK(empty.address() == 0);
    const float value = 1.0f;
    float back = 0.0f;
    const Error too_big = expect_error([&] { copy_to_device(empty, &value, sizeof value); });
    CHECK(too_big.code() == ErrorCode::usage);
    CHECK_THAT(too_big.message(), Catch::Contains("exceeds the device buffer of 0 bytes"));
    CHECK(expect_error([&] { copy_to_host(&back, empty, sizeof back); }).code() == ErrorCode::usage);
    CHECK(expect_error([] { launch(nullptr, Dim3{}, Dim3{}, 0, nullptr, nullptr); }).code() == ErrorCode::usage);
}
