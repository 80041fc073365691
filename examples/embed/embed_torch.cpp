// A torch kernel from the hub, called from a C++ program that links
// LibTorch, with no Python. A torch variant (torch{MM}-cxx11-<backend>-...,
// torch-stable-abi{MM}-...) ships an op library that registers its ops in
// torch's dispatcher when it is loaded; kernhub fetches and verifies the
// variant, checks that it fits this program's torch, loads the library and
// names the op. kernhub/torch.hpp then looks the op up once, and each call
// is the dispatcher's own call through the typed handle.
//
// The kernel named here must be an op `add_one(Tensor x) -> Tensor` with
// y = x + 1 on float32 CPU tensors, as kernhub's test kernel
// tests/fixtures/torch/ops.cpp is. The program calls it once and checks the
// result.
//
//   export KERNHUB_ENDPOINT=URL KERNHUB_REGISTRY=FILE
//   ./build/examples/embed_torch [--target VARIANT]... [NAME]
//
// NAME defaults to "torch-add-one". Variants are selected for this
// program's torch (Options::torch from kernhub::torch::this_torch()), or
// named with --target. Everything else comes from the environment, as for
// the kernhub command (docs/configuration.md, "Settings"). Exit codes: 0 when the call
// gave the expected values; kernhub's code (docs/commands.md, "Exit codes") when
// fetching, loading or resolving failed; 2 for bad arguments; 1 for a wrong
// result.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <kernhub/kernhub.hpp>
#include <kernhub/torch.hpp>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

int main(int argc, char** argv) {
    kernhub::Options options;
    options.torch = kernhub::torch::this_torch();
    std::string name = "torch-add-one";
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--target") == 0 && i + 1 < argc) {
            options.targets.emplace_back(argv[++i]);
        } else if (argv[i][0] == '-') {
            std::fprintf(stderr, "usage: embed_torch [--target VARIANT]... [NAME]\n");
            return 2;
        } else {
            name = argv[i];
        }
    }
    try {
        // Start-up: fetch (or find in the cache), check, load, look up once.
        kernhub::Client client(options);
        const kernhub::LoadResult loaded = client.load(name);
        const auto add_one = kernhub::torch::op<at::Tensor(const at::Tensor&)>(loaded);
        std::printf("%s: torch op %s from %s (torch %s)\n", name.c_str(), loaded.torch_op.c_str(),
                    loaded.fetch.variant.c_str(), loaded.torch_version.c_str());

        // The hot path: the dispatcher's call, no name lookup.
        const std::vector<float> in{1.5f, -2.0f, 0.0f};
        at::Tensor x = at::empty({static_cast<int64_t>(in.size())}, at::kFloat);
        std::memcpy(x.data_ptr<float>(), in.data(), in.size() * sizeof(float));
        const at::Tensor y = add_one.call(x);
        const float* out = y.data_ptr<float>();
        for (std::size_t i = 0; i < in.size(); ++i) {
            if (out[i] != in[i] + 1.0f) {
                std::fprintf(stderr, "embed_torch: add_one(%g) gave %g\n", in[i], out[i]);
                return 1;
            }
        }
        std::printf("add_one([1.5, -2, 0]) = [%g, %g, %g]\n", out[0], out[1], out[2]);
        return 0;
    } catch (const kernhub::Error& e) {
        std::fprintf(stderr, "embed_torch: %s\n", e.what());
        return static_cast<int>(e.code());
    }
}
