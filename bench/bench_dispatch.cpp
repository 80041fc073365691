// Dispatch cost: what one call through a kernhub::KernelFn costs next to a
// direct call of the same kernel.
//
//   BM_Dispatch_Direct        kh_vector_add from the linked libvector_add.so
//                             (the baseline: a call through the PLT)
//   BM_Dispatch_DlsymPointer  dlopen + dlsym of the cached .so, then calls
//                             through the raw function pointer
//   BM_Dispatch_KernelFn      Client::load("vector-add") offline (cache warmed
//                             once from the demo hub), then calls through
//                             KernelFn<void(const float*, const float*, float*, size_t)>
//   BM_Dispatch_ClientResolve the same, with the KernelFn taken from
//                             Client::resolve (the Client's own table)
//   BM_Dispatch_CSymbol       the C API: kh_load(hub, "vector-add") offline,
//                             then calls through the pointer kh_symbol gave
//
// The argument is n (floats per call). n = 16 keeps the kernel to a few
// nanoseconds so call overhead dominates; n = 4096 shows it vanish.
#include <dlfcn.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "bench_common.hpp"
#include "kernhub/kernhub.h"

extern "C" void kh_vector_add(const float* a, const float* b, float* out, std::size_t n);

namespace {

using VectorAdd = void(const float*, const float*, float*, std::size_t);

// Calls `call` once per iteration on fresh-looking buffers. DoNotOptimize on
// the output and ClobberMemory keep the compiler from dropping or merging
// calls; the callee lives in a shared object, so it cannot be inlined.
template <class Call>
void run_calls(benchmark::State& state, Call call) {
    const auto n = static_cast<std::size_t>(state.range(0));
    // Each buffer starts on a 64-byte boundary, so every case sees the same
    // alignment (a vectorised kernel's speed depends on it at large n).
    const std::size_t stride = (n + 15) / 16 * 16;
    std::vector<float> storage(3 * stride + 16);
    auto* base =
        reinterpret_cast<float*>((reinterpret_cast<std::uintptr_t>(storage.data()) + 63) & ~std::uintptr_t{63});
    float* a = base;
    float* b = base + stride;
    float* out = base + 2 * stride;
    for (std::size_t i = 0; i < n; ++i) {
        a[i] = static_cast<float>(i);
        b[i] = 0.5f * static_cast<float>(i);
    }
    const float* pa = a;
    const float* pb = b;
    float* po = out;
    for (auto _ : state) {
        benchmark::DoNotOptimize(pa);
        benchmark::DoNotOptimize(pb);
        call(pa, pb, po, n);
        benchmark::DoNotOptimize(po);
        benchmark::ClobberMemory();
    }
    if (out[n - 1] != a[n - 1] + b[n - 1]) state.SkipWithError("the kernel computed a wrong sum");
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));  // calls per second
    state.counters["floats"] = static_cast<double>(n);
}

void BM_Dispatch_Direct(benchmark::State& state) {
    run_calls(state, [](const float* a, const float* b, float* out, std::size_t n) { kh_vector_add(a, b, out, n); });
}

void BM_Dispatch_DlsymPointer(benchmark::State& state) {
    VectorAdd* fn = nullptr;
    if (!khbench::guarded(state, [&] { fn = khbench::demo_function<VectorAdd>("kh_vector_add"); })) return;
    run_calls(state, [fn](const float* a, const float* b, float* out, std::size_t n) { fn(a, b, out, n); });
}

void BM_Dispatch_KernelFn(benchmark::State& state) {
    kernhub::KernelFn<VectorAdd> fn;
    if (!khbench::guarded(state, [&] {
            kernhub::Client client(khbench::demo_cache().offline_options());
            fn = kernhub::KernelFn<VectorAdd>::from(client.load("vector-add"));
        })) {
        return;
    }
    run_calls(state, [fn](const float* a, const float* b, float* out, std::size_t n) { fn(a, b, out, n); });
}

void BM_Dispatch_ClientResolve(benchmark::State& state) {
    kernhub::KernelFn<VectorAdd> fn;
    if (!khbench::guarded(state, [&] {
            kernhub::Client client(khbench::demo_cache().offline_options());
            client.load("vector-add");
            fn = client.resolve<VectorAdd>("vector-add");
        })) {
        return;
    }
    run_calls(state, [fn](const float* a, const float* b, float* out, std::size_t n) { fn(a, b, out, n); });
}

void BM_Dispatch_CSymbol(benchmark::State& state) {
    VectorAdd* fn = nullptr;
    if (!khbench::guarded(state, [&] {
            const auto& demo = khbench::demo_cache();
            kh_hub* hub = kh_hub_new();
            const bool set = kh_hub_set(hub, "cache_dir", demo.cache.path().c_str()) == 0 &&
                             kh_hub_set(hub, "project", demo.project.path().c_str()) == 0 &&
                             kh_hub_set(hub, "offline", "1") == 0;
            const int rc = set ? kh_load(hub, "vector-add") : 2;
            void* address = rc == 0 ? kh_symbol(hub, "vector-add") : nullptr;
            const std::string error = kh_last_error(hub) != nullptr ? kh_last_error(hub) : "";
            kh_hub_free(hub);  // the pointer outlives the handle
            if (address == nullptr) throw std::runtime_error("kh_load/kh_symbol failed: " + error);
            fn = reinterpret_cast<VectorAdd*>(address);
        })) {
        return;
    }
    run_calls(state, [fn](const float* a, const float* b, float* out, std::size_t n) { fn(a, b, out, n); });
}

}  // namespace

BENCHMARK(BM_Dispatch_Direct)->Arg(16)->Arg(4096);
BENCHMARK(BM_Dispatch_DlsymPointer)->Arg(16)->Arg(4096);
BENCHMARK(BM_Dispatch_KernelFn)->Arg(16)->Arg(4096);
BENCHMARK(BM_Dispatch_ClientResolve)->Arg(16)->Arg(4096);
BENCHMARK(BM_Dispatch_CSymbol)->Arg(16)->Arg(4096);

KHBENCH_MAIN()
