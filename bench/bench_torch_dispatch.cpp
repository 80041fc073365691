// Torch op dispatch cost: one call of a torch op that kernhub loaded,
// through the typed handle kernhub/torch.hpp resolves once, next to a
// dispatcher lookup on every call and a direct C++ call of the same
// function, in the same run.
//
//   BM_TorchDispatch_Direct/N         kh_torch_fixture::add_one(x) called
//                                     directly (tests/fixtures/torch/add_one.hpp,
//                                     the op library's own code): the baseline
//   BM_TorchDispatch_TypedHandle/N    kernhub::torch::op<Sig>(client.load(...))
//                                     once, then handle.call(x): the
//                                     dispatcher's call, no name lookup
//   BM_TorchDispatch_LookupEachCall/N findSchemaOrThrow(name, overload)
//                                     .typed<Sig>().call(x) on every call
//
// On N float32 CPU elements (y = x + 1, a fresh output each call). The op
// comes through kernhub's real path: Client::load from a cache fetched once
// from a file:// hub that the build lays out with the torch op fixture
// (bench/CMakeLists.txt); the program links LibTorch, as any program using
// torch ops does.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <kernhub/torch.hpp>

#include <optional>
#include <string>

#include "../tests/fixtures/torch/add_one.hpp"
#include "bench_common.hpp"

namespace {

using UnaryOp = at::Tensor(const at::Tensor&);

// The loaded op, fetched once into a scratch cache; offline afterwards.
struct TorchOp {
    khbench::ScratchDir cache{"torch-cache"};
    khbench::ScratchDir project{"torch-project"};
    std::string qualified;

    TorchOp() {
        kernhub::Options options =
            khbench::client_options(cache.path(), project.path(), false, "file://" KERNHUB_BENCH_TORCH_HUB);
        options.registries = {KERNHUB_BENCH_TORCH_REGISTRY};
        options.no_default_registry = true;
        options.targets = {KERNHUB_BENCH_TORCH_VARIANT};
        kernhub::Client client(options);
        qualified = client.load("torch-add-one").torch_op;
    }
};

const TorchOp& torch_op() {
    static const TorchOp op;
    return op;
}

at::Tensor input(std::int64_t n) {
    at::Tensor x = at::empty({n}, at::kFloat);
    float* data = x.data_ptr<float>();
    for (std::int64_t i = 0; i < n; ++i) data[i] = static_cast<float>(i);
    return x;
}

// Runs `call` per iteration and checks the last result's last element.
template <class Call>
void run(benchmark::State& state, Call&& call) {
    const at::Tensor x = input(state.range(0));
    at::Tensor y;
    const bool ran = khbench::guarded(state, [&] {
        for (auto _ : state) {
            y = call(x);
            benchmark::DoNotOptimize(y.data_ptr());
        }
    });
    const std::int64_t last = state.range(0) - 1;
    if (ran && y.data_ptr<float>()[last] != static_cast<float>(last) + 1.0F) {
        state.SkipWithError("add_one computed a wrong value");
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));  // calls per second
    state.counters["floats"] = static_cast<double>(state.range(0));
}

void BM_TorchDispatch_Direct(benchmark::State& state) {
    run(state, [](const at::Tensor& x) { return kh_torch_fixture::add_one(x); });
}

void BM_TorchDispatch_TypedHandle(benchmark::State& state) {
    std::optional<c10::TypedOperatorHandle<UnaryOp>> handle;
    if (!khbench::guarded(state, [&] { handle = kernhub::torch::op<UnaryOp>(torch_op().qualified); })) return;
    run(state, [&](const at::Tensor& x) { return handle->call(x); });
}

void BM_TorchDispatch_LookupEachCall(benchmark::State& state) {
    std::string name;
    if (!khbench::guarded(state, [&] { name = torch_op().qualified; })) return;
    run(state, [&](const at::Tensor& x) {
        return c10::Dispatcher::singleton().findSchemaOrThrow(name.c_str(), "").typed<UnaryOp>().call(x);
    });
}

}  // namespace

BENCHMARK(BM_TorchDispatch_Direct)->Arg(16)->Arg(4096);
BENCHMARK(BM_TorchDispatch_TypedHandle)->Arg(16)->Arg(4096);
BENCHMARK(BM_TorchDispatch_LookupEachCall)->Arg(16)->Arg(4096);

KHBENCH_MAIN()
