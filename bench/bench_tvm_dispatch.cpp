// tvm-ffi dispatch cost: what one call of a tvm-ffi function costs through
// kernhub next to a plain C function of the same work, in the same run.
//
//   BM_TvmDispatch_PlainPointer  khbench_add_i64(a, b) (bench/kernels/add_i64.c)
//                                through a dlsym'd pointer: the baseline
//   BM_TvmDispatch_RawSafeCall   the fixture's add_int through its TVM FFI safe
//                                call (__tvm_ffi_add_int), arguments packed once
//                                into two TvmAny cells; only the status is
//                                checked per call: what the C ABI costs at least
//   BM_TvmDispatch_TvmFunction   TvmFunction::from(client.load("tvm-add-int")), then
//                                fn(a, b).as_int(): packing, call and checks
//   BM_TvmDispatch_KhTvmCall     the C API: kh_tvm_call(hub, kh_symbol(...), ...)
//                                with pre-packed kh_tvm_any arguments
//   BM_TvmDispatch_TensorPlainPointer/N  kh_vector_add (out = a + b) on N floats,
//                                through a dlsym'd pointer into the demo cache
//   BM_TvmDispatch_TensorTvmFunction/N   the fixture's add_one (y = x + 1) on
//                                N-float DLTensors through TvmFunction
//
// The tvm-ffi functions come through kernhub's real path: Client::load (or
// kh_load) from a cache warmed once from a file:// hub that the build
// lays out with the tvm-ffi fixture (bench/CMakeLists.txt). Without the
// fixture or the runtime the tvm-ffi cases skip, saying why.
#include <dlfcn.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "kernhub/kernhub.h"
#include "kernhub/tvm_ffi.hpp"

namespace {

using AddI64 = std::int64_t(std::int64_t, std::int64_t);
using VectorAdd = void(const float*, const float*, float*, std::size_t);

constexpr std::int64_t k_a = 40;
constexpr std::int64_t k_b = 2;

// A cache holding the tvm-ffi variant, fetched once from the bench hub's
// file:// endpoint; every case then loads offline. Built on first use.
struct TvmCache {
    khbench::ScratchDir cache{"tvm-cache"};
    khbench::ScratchDir project{"tvm-project"};

    TvmCache() {
        kernhub::Client online(options(false));
        online.fetch("tvm-add-int");
    }
    kernhub::Options options(bool offline) const {
        kernhub::Options o = khbench::client_options(cache.path(), project.path(), offline,
                                                     offline ? std::string() : "file://" KERNHUB_BENCH_TVM_HUB);
        o.registries = {KERNHUB_BENCH_TVM_REGISTRY};
        o.tvm_ffi_library = KERNHUB_BENCH_TVM_FFI_LIBRARY;
        return o;
    }
};

TvmCache& tvm_cache() {
    static TvmCache cache;
    return cache;
}

// Why the tvm-ffi cases cannot run here, or "".
std::string why_no_tvm() {
    const std::string why = KERNHUB_BENCH_TVM_WHY_NOT;
    if (!why.empty()) return why;
    std::error_code ec;
    if (!khbench::fs::is_regular_file(KERNHUB_BENCH_TVM_FFI_LIBRARY, ec)) {
        return "the tvm-ffi runtime " KERNHUB_BENCH_TVM_FFI_LIBRARY " is gone";
    }
    if (!khbench::fs::is_regular_file(KERNHUB_BENCH_TVM_HUB "/_hub.json", ec)) {
        return "the tvm-ffi bench hub " KERNHUB_BENCH_TVM_HUB " was not laid out (target bench_tvm_hub)";
    }
    return {};
}

// Skips the case, naming the reason, when tvm-ffi is not at hand.
bool tvm_ready(benchmark::State& state) {
    const std::string why = why_no_tvm();
    if (why.empty()) return true;
    state.SkipWithError(("tvm-ffi not available: " + why).c_str());
    return false;
}

// The safe call `ref` resolved to, through Client::load offline.
kernhub::TvmFunction load_tvm(const std::string& ref) {
    kernhub::Client client(tvm_cache().options(true));
    const kernhub::LoadResult loaded = client.load(ref);
    if (loaded.kind != kernhub::LoadKind::tvm_ffi) {
        throw std::runtime_error(ref + " loaded as " + kernhub::to_string(loaded.kind) + ", not tvm-ffi");
    }
    return kernhub::TvmFunction::from(loaded);
}

kernhub::TvmAny int_cell(std::int64_t value) {
    kernhub::TvmAny any;
    any.type_index = static_cast<std::int32_t>(kernhub::TvmType::integer);
    any.value.v_int64 = value;
    return any;
}

// The integer cases hand each result to DoNotOptimize as a const value and
// only then keep it for the check after the loop. With GCC 12 at -O2,
// Google Benchmark 1.7.1's DoNotOptimize(T&) on the variable that the check
// then reads leaves it 0 after the loop: a plain C function called through a
// pointer into a 16-byte result struct shows the same, with no kernhub code
// involved, so the fault is in that DoNotOptimize overload, not in the call.
void report_calls(benchmark::State& state) {
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));  // calls per second
}

void BM_TvmDispatch_PlainPointer(benchmark::State& state) {
    AddI64* fn = nullptr;
    if (!khbench::guarded(state, [&] {
            void* handle = ::dlopen(KERNHUB_BENCH_ADD_I64_SO, RTLD_NOW | RTLD_LOCAL);
            if (handle == nullptr) throw std::runtime_error(std::string("dlopen: ") + ::dlerror());
            fn = reinterpret_cast<AddI64*>(::dlsym(handle, "khbench_add_i64"));
            if (fn == nullptr) throw std::runtime_error("dlsym khbench_add_i64 failed");
        })) {
        return;
    }
    std::int64_t a = k_a;
    std::int64_t b = k_b;
    std::int64_t sum = 0;
    for (auto _ : state) {
        benchmark::DoNotOptimize(a);
        benchmark::DoNotOptimize(b);
        const std::int64_t returned = fn(a, b);
        benchmark::DoNotOptimize(returned);
        sum = returned;
    }
    if (sum != k_a + k_b) state.SkipWithError("the baseline computed a wrong sum");
    report_calls(state);
}

void BM_TvmDispatch_RawSafeCall(benchmark::State& state) {
    if (!tvm_ready(state)) return;
    kernhub::TvmFunction::SafeCall fn = nullptr;
    if (!khbench::guarded(state, [&] { fn = load_tvm("tvm-add-int").get(); })) return;
    const kernhub::TvmAny args[2] = {int_cell(k_a), int_cell(k_b)};
    const kernhub::TvmAny* packed = args;
    kernhub::TvmAny result;
    for (auto _ : state) {
        benchmark::DoNotOptimize(packed);
        result = kernhub::TvmAny{};  // kTVMFFINone, as the convention requires
        if (fn(nullptr, packed, 2, &result) != 0) {
            // The runtime now holds the raised error; only its own
            // TVMFFIErrorMoveFromRaised could take it. Stop here.
            state.SkipWithError("__tvm_ffi_add_int returned a non-zero status");
            break;
        }
        benchmark::DoNotOptimize(result);
    }
    if (result.type_index != static_cast<std::int32_t>(kernhub::TvmType::integer) ||
        result.value.v_int64 != k_a + k_b) {
        state.SkipWithError("add_int returned something other than the sum");
    }
    report_calls(state);
}

void BM_TvmDispatch_TvmFunction(benchmark::State& state) {
    if (!tvm_ready(state)) return;
    kernhub::TvmFunction fn;
    if (!khbench::guarded(state, [&] { fn = load_tvm("tvm-add-int"); })) return;
    std::int64_t a = k_a;
    std::int64_t b = k_b;
    std::int64_t sum = 0;
    const bool ran = khbench::guarded(state, [&] {
        for (auto _ : state) {
            benchmark::DoNotOptimize(a);
            benchmark::DoNotOptimize(b);
            const std::int64_t returned = fn(a, b).as_int();
            benchmark::DoNotOptimize(returned);
            sum = returned;
        }
    });
    if (ran && sum != k_a + k_b) state.SkipWithError("add_int computed a wrong sum");
    report_calls(state);
}

void BM_TvmDispatch_KhTvmCall(benchmark::State& state) {
    if (!tvm_ready(state)) return;
    kh_hub* hub = nullptr;
    void* fn = nullptr;
    if (!khbench::guarded(state, [&] {
            const TvmCache& tvm = tvm_cache();
            hub = kh_hub_new();
            if (hub == nullptr) throw std::runtime_error("kh_hub_new: out of memory");
            const bool set = kh_hub_set(hub, "cache_dir", tvm.cache.path().c_str()) == 0 &&
                             kh_hub_set(hub, "project", tvm.project.path().c_str()) == 0 &&
                             kh_hub_set(hub, "registry", KERNHUB_BENCH_TVM_REGISTRY) == 0 &&
                             kh_hub_set(hub, "tvm_ffi_library", KERNHUB_BENCH_TVM_FFI_LIBRARY) == 0 &&
                             kh_hub_set(hub, "offline", "1") == 0;
            const int rc = set ? kh_load(hub, "tvm-add-int") : 2;
            fn = rc == 0 ? kh_symbol(hub, "tvm-add-int") : nullptr;
            if (fn == nullptr) {
                const std::string error = kh_last_error(hub) != nullptr ? kh_last_error(hub) : "";
                throw std::runtime_error("kh_load/kh_symbol failed: " + error);
            }
        })) {
        kh_hub_free(hub);
        return;
    }
    kh_tvm_any args[2] = {};
    args[0].type_index = KH_TVM_INT;
    args[0].value.v_int64 = k_a;
    args[1].type_index = KH_TVM_INT;
    args[1].value.v_int64 = k_b;
    const kh_tvm_any* packed = args;
    kh_tvm_any result = {};
    for (auto _ : state) {
        benchmark::DoNotOptimize(packed);
        if (kh_tvm_call(hub, fn, packed, 2, &result) != 0) {
            state.SkipWithError((std::string("kh_tvm_call failed: ") + kh_last_error(hub)).c_str());
            break;
        }
        benchmark::DoNotOptimize(result);
    }
    if (result.type_index != KH_TVM_INT || result.value.v_int64 != k_a + k_b) {
        state.SkipWithError("kh_tvm_call returned something other than the sum");
    }
    kh_hub_free(hub);  // the handle carries the error text, so it lives through the loop
    report_calls(state);
}

// DLPack's tensor descriptor (kernhub's headers do not ship dlpack.h; TvmArg
// takes any struct of this 48-byte layout as a DLTensor*).
struct Tensor {
    void* data;
    std::int32_t device_type;  // kDLCPU = 1
    std::int32_t device_id;
    std::int32_t ndim;
    std::uint8_t dtype_code;  // kDLFloat = 2
    std::uint8_t dtype_bits;
    std::uint16_t dtype_lanes;
    std::int64_t* shape;
    std::int64_t* strides;
    std::uint64_t byte_offset;
};
static_assert(sizeof(Tensor) == 48, "Tensor must have DLTensor's layout");

// N floats per buffer, each buffer on a 64-byte boundary as in
// bench_dispatch, so both tensor cases see the same alignment.
struct Buffers {
    std::vector<float> storage;
    float* a = nullptr;
    float* b = nullptr;
    float* out = nullptr;
    std::int64_t n = 0;

    explicit Buffers(std::int64_t count) : n(count) {
        const auto size = static_cast<std::size_t>(count);
        const std::size_t stride = (size + 15) / 16 * 16;
        storage.resize(3 * stride + 16);
        auto* base =
            reinterpret_cast<float*>((reinterpret_cast<std::uintptr_t>(storage.data()) + 63) & ~std::uintptr_t{63});
        a = base;
        b = base + stride;
        out = base + 2 * stride;
        for (std::size_t i = 0; i < size; ++i) {
            a[i] = static_cast<float>(i);
            b[i] = 0.5F * static_cast<float>(i);
        }
    }
    Tensor tensor(float* data) { return Tensor{data, 1, 0, 1, 2, 32, 1, &n, nullptr, 0}; }
};

void BM_TvmDispatch_TensorPlainPointer(benchmark::State& state) {
    VectorAdd* fn = nullptr;
    if (!khbench::guarded(state, [&] { fn = khbench::demo_function<VectorAdd>("kh_vector_add"); })) return;
    Buffers buffers(state.range(0));
    const float* pa = buffers.a;
    const float* pb = buffers.b;
    float* po = buffers.out;
    const auto n = static_cast<std::size_t>(buffers.n);
    for (auto _ : state) {
        benchmark::DoNotOptimize(pa);
        benchmark::DoNotOptimize(pb);
        fn(pa, pb, po, n);
        benchmark::DoNotOptimize(po);
        benchmark::ClobberMemory();
    }
    if (po[n - 1] != pa[n - 1] + pb[n - 1]) state.SkipWithError("kh_vector_add computed a wrong sum");
    report_calls(state);
    state.counters["floats"] = static_cast<double>(n);
}

void BM_TvmDispatch_TensorTvmFunction(benchmark::State& state) {
    if (!tvm_ready(state)) return;
    kernhub::TvmFunction fn;
    if (!khbench::guarded(state, [&] { fn = load_tvm("tvm-add-one"); })) return;
    Buffers buffers(state.range(0));
    Tensor x = buffers.tensor(buffers.a);
    Tensor y = buffers.tensor(buffers.out);
    Tensor* px = &x;
    Tensor* py = &y;
    const bool ran = khbench::guarded(state, [&] {
        for (auto _ : state) {
            benchmark::DoNotOptimize(px);
            benchmark::DoNotOptimize(py);
            fn(px, py);
            benchmark::ClobberMemory();
        }
    });
    const auto last = static_cast<std::size_t>(buffers.n - 1);
    if (ran && buffers.out[last] != buffers.a[last] + 1.0F) state.SkipWithError("add_one computed a wrong sum");
    report_calls(state);
    state.counters["floats"] = static_cast<double>(buffers.n);
}

}  // namespace

BENCHMARK(BM_TvmDispatch_PlainPointer);
BENCHMARK(BM_TvmDispatch_RawSafeCall);
BENCHMARK(BM_TvmDispatch_TvmFunction);
BENCHMARK(BM_TvmDispatch_KhTvmCall);
BENCHMARK(BM_TvmDispatch_TensorPlainPointer)->Arg(16)->Arg(4096);
BENCHMARK(BM_TvmDispatch_TensorTvmFunction)->Arg(16)->Arg(4096);

KHBENCH_MAIN()
