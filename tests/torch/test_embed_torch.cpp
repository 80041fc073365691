// examples/embed/embed_torch.cpp run as a program against the torch test
// hub: it loads each layout's add_one and checks the result itself; its
// exit codes when the kernel is missing or does not fit its torch.
#include <catch2/catch.hpp>

#include "cli/cli_support.hpp"
#include "torch/torch_hub.hpp"

using namespace kernhub::test;
using namespace kernhub::test::torch_hub;

namespace {

ProcessResult run_example(const cli::Sandbox& box, const std::string& endpoint, const fs::path& registry,
                          const std::vector<std::string>& args) {
    std::vector<std::string> argv{KERNHUB_EMBED_TORCH};
    argv.insert(argv.end(), args.begin(), args.end());
    return run_process(argv,
                       box.env({{"KERNHUB_ENDPOINT", endpoint},
                                {"KERNHUB_REGISTRY", registry.string()},
                                {"KERNHUB_CACHE", box.cache.string()},
                                {"LD_BIND_NOW", std::nullopt}}),
                       box.dir.path().string());
}

}  // namespace

TEST_CASE("examples: embed_torch loads add_one and checks its result", "[torch][needs:torch]") {
    cli::Sandbox box;
    TorchHub hub;
    const fs::path registry = write_registry(box.dir.path());
    const std::string variant = GENERATE(cxx11_variant(), untagged_variant(), stable_variant());
    const ProcessResult r = run_example(box, hub.server().endpoint(), registry, {"--target", variant});
    INFO(cli::describe(r));
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("from " + variant) != std::string::npos);
    CHECK(r.out.find("add_one([1.5, -2, 0]) = [2.5, -1, 1]") != std::string::npos);
}

TEST_CASE("examples: embed_torch exits with kernhub's codes", "[torch][needs:torch]") {
    cli::Sandbox box;
    TorchHub hub;
    const fs::path registry = write_registry(box.dir.path());
    const ProcessResult missing =
        run_example(box, hub.server().endpoint(), registry, {"--target", cxx11_variant(), "torch-missing"});
    INFO(cli::describe(missing));
    CHECK(missing.exit_code == 3);
    const ProcessResult unfit =
        run_example(box, hub.server().endpoint(), registry, {"--target", older_torch_variant()});
    INFO(cli::describe(unfit));
    CHECK(unfit.exit_code == 7);
    CHECK(run_example(box, hub.server().endpoint(), registry, {"--bogus"}).exit_code == 2);
}
