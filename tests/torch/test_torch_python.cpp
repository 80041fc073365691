// The Python kernels library (tests/requirements.txt) with the real torch
// loads the same torch variant from a cache that kernhub filled, and its
// op gives what kernhub's load gives (label torch-python: `import torch`
// needs about 770 MB more of the CUDA stack, installed only when
// KERNHUB_TEST_TORCH_PYTHON=1, as .ci/run sets).
#include "torch/torch_setup.hpp"  // first: torch's headers before Catch's

#include "cli/cli_support.hpp"
#include "support/requirements.hpp"

using namespace kernhub::test;
using namespace kernhub::test::torch_hub;

namespace {

KERNHUB_TEST_REQUIREMENT("needs:torch-python", []() -> std::string {
    if (std::string why = why_no_torch(); !why.empty()) return why;
    if (*build::torch_python_site == 0 || !fs::is_directory(build::torch_python_site)) {
        return "what `import torch` needs beyond the wheel is not installed (tests/run.sh installs it with "
               "KERNHUB_TEST_TORCH_PYTHON=1, as .ci/run does)";
    }
    return {};
});

constexpr const char* k_load_with_kernels = R"(
import json, sys
import torch
import kernels
module = kernels.get_kernel(sys.argv[1], revision="main", backend="cpu", trust_remote_code=True)
y = module.add_one(torch.tensor([1.5, -2.0, 0.0, 1e6], dtype=torch.float32))
print(json.dumps({"file": module.__file__, "values": y.tolist(), "torch": torch.__version__}))
)";

// The Python child's environment: the torch wheel and its extras on the
// path, the CUDA libraries they need, the cache offline.
EnvChanges python_env(const fs::path& cache, const fs::path& home) {
    const fs::path site = fs::path(build::torch_python_site);
    // What libtorch_cuda.so needs (tests/torch/CMakeLists.txt): the extras'
    // nvidia folders, the CUDA runtime folder, the toolkit.
    const std::string libraries = KERNHUB_TORCH_CUDA_LIBRARIES;
    return {{"PYTHONPATH", fs::path(build::torch_dir).parent_path().string() + ":" + site.string()},
            {"LD_LIBRARY_PATH", libraries},
            {"HF_HUB_OFFLINE", "1"},
            {"HF_HUB_CACHE", cache.string()},
            {"KERNELS_CACHE", std::nullopt},
            {"HF_HOME", home.string()},
            {"HF_TOKEN", std::nullopt},
            {"LD_BIND_NOW", std::nullopt}};
}

}  // namespace

TEST_CASE("the kernels library with torch loads the variant kernhub fetched and gets kernhub's result",
          "[torch-python][needs:torch-python]") {
    Setup setup;
    const fs::path cache = setup.dir.path() / "cache";
    kernhub::Client client(setup.options(cxx11_variant()));
    const kernhub::FetchResult fetched = client.fetch("torch-add-one");

    const ProcessResult python =
        run_process({KERNHUB_TEST_PYTHON, "-c", k_load_with_kernels, k_repo},
                    python_env(cache, setup.dir.path() / "hf-home"), setup.dir.path().string());
    INFO(cli::describe(python));
    REQUIRE(python.exit_code == 0);
    const nlohmann::json out = cli::parse_stdout(python);
    // kernels imported the package of the variant kernhub put in the cache.
    CHECK(fs::equivalent(fs::path(out["file"].get<std::string>()).parent_path(), fetched.path));
    const std::vector<float> expected{2.5f, -1.0f, 1.0f, 1000001.0f};
    CHECK(out["values"].get<std::vector<float>>() == expected);

    // kernhub, offline over the same cache, in this process.
    kernhub::Options offline = setup.options(cxx11_variant());
    offline.offline = true;
    kernhub::Client kernhub_client(offline);
    const auto add_one = kernhub::torch::op<at::Tensor(const at::Tensor&)>(kernhub_client.load("torch-add-one"));
    CHECK(values(add_one.call(tensor({1.5f, -2.0f, 0.0f, 1e6f}))) == out["values"].get<std::vector<float>>());
}
