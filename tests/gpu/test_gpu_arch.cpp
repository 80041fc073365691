// The device arch check on a GPU (docs/kernels.md, "What a load refuses
// that selection accepts"): a native-cuda build whose metadata.json
// declares archs that do not cover device 0 is exit 7 (Error(load)) naming
// them and the device's capability; archs that cover it load; and a build
// chosen for another machine (Options::targets) is not checked. Each case
// needs a device ([gpu]) that runs the nvcc-built fixture ([needs:nvcc],
// [needs:sm_80]); without them the test main skips it before it starts.
#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "cuda/driver.hpp"
#include "kernhub/error.hpp"
#include "kernhub/kernhub.hpp"
#include "support/hub_builder.hpp"
#include "support/kernel_hub.hpp"
#include "support/temp_dir.hpp"

using namespace kernhub;
using namespace kernhub::test;
using nlohmann::json;

namespace {

// A file:// hub of gputest/arch-<name>, one native-cuda variant holding the
// fixture fatbin each, whose metadata.json declares `archs` of type cuda.
Options arch_hub(const TempDir& dir) {
    json repos = json::array();
    for (const auto& [name, archs] : {std::pair<const char*, json>{"foreign", {"1.0a"}},
                                      std::pair<const char*, json>{"covering", {"1.0a", "1.0+PTX"}}}) {
        json commit = {
            {"message", "v1"},
            {"branches", {"main", "v1"}},
            {"metadata", true},
            {"metadata_extra", {{"backend", {{"type", "cuda"}, {"archs", archs}}}}},
            {"files", {{"build/native-cuda/vector_add.fatbin", {{"path", cuda_fixture_fatbin().string()}}}}}};
        repos.push_back({{"repo_id", std::string("gputest/arch-") + name}, {"type", "kernel"}, {"commits", {commit}}});
    }
    make_hub({{"repos", repos}}, dir.path() / "hub");
    return file_hub_options(dir.path());
}

}  // namespace

TEST_CASE("a CUDA build whose archs do not cover device 0 is refused naming them and its capability",
          "[gpu][needs:nvcc][needs:sm_80]") {
    const cuda::Device device = cuda::Driver::instance().info().devices.at(0);
    const std::string capability = std::to_string(device.cc_major) + "." + std::to_string(device.cc_minor);
    TempDir dir;
    Client client(arch_hub(dir));
    try {
        (void)client.load("gputest/arch-foreign@v1", "kh_vector_add");
        FAIL("gputest/arch-foreign loaded on CUDA capability " << capability);
    } catch (const Error& e) {
        CHECK(e.code() == ErrorCode::load);
        const std::string message = e.what();
        CHECK(message.find("CUDA capability " + capability) != std::string::npos);
        CHECK(message.find("(1.0a)") != std::string::npos);
        CHECK(message.find("gputest/arch-foreign") != std::string::npos);
    }
}

TEST_CASE("a CUDA build whose archs cover device 0 loads, and one chosen for another machine is not checked",
          "[gpu][needs:nvcc][needs:sm_80]") {
    TempDir dir;
    Options options = arch_hub(dir);
    {
        Client client(options);
        const LoadResult loaded = client.load("gputest/arch-covering@v1", "kh_vector_add");
        CHECK(loaded.fetch.variant == "native-cuda");
        CHECK(loaded.address != nullptr);
    }
    options.targets = {"native-cuda"};
    Client client(options);
    const LoadResult loaded = client.load("gputest/arch-foreign@v1", "kh_vector_add");
    CHECK(loaded.address != nullptr);
}
