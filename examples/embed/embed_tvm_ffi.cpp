// A tvm-ffi kernel from the hub, called from C++ with no Python. A
// `tvm-ffi01-<backend>-<cpu>-<os>` variant ships a library whose functions
// follow the TVM FFI C calling convention (exported as __tvm_ffi_<name>);
// kernhub fetches and verifies the variant, binds the tvm-ffi runtime
// (libtvm_ffi.so), loads the library and resolves the function at start-up.
// After that a call packs its arguments on the stack and makes one indirect
// call.
//
// The kernel named here must be an `add_one(x, y)` with y[i] = x[i] + 1 on
// 1-D float32 CPU tensors that raises an error for any other dtype, as
// kernhub's test fixture tests/fixtures/tvm_ffi/kh_tvm_ops.cc does. The
// program calls it once with good input and checks the sums, then once with
// an int32 tensor and checks that the kernel's error arrives as a
// kernhub::Error with code kernel.
//
//   export KERNHUB_ENDPOINT=URL KERNHUB_REGISTRY=FILE KERNHUB_TVM_FFI_LIBRARY=.../libtvm_ffi.so
//   ./build/examples/embed_tvm_ffi [NAME]
//   ./build/examples/embed_tvm_ffi [--endpoint URL] [--registry FILE]... [--cache-dir DIR]
//                                  [--tvm-ffi-library FILE] [NAME]
//
// NAME defaults to "tvm-add-one". Everything not given as a flag comes from
// the environment, as for the kernhub command (docs/configuration.md, "Settings"). Exit
// codes: 0 when both calls behaved as expected; kernhub's code (docs/commands.md,
// "Exit codes") when fetching, loading or a call failed; 2 for bad
// arguments; 1 for a wrong result.
#include <kernhub/kernhub.hpp>
#include <kernhub/tvm_ffi.hpp>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

// DLPack's tensor descriptor (dlpack.h's DLTensor), written out here because
// kernhub's public headers do not ship dlpack.h. TvmArg takes a pointer to
// any struct of this 48-byte layout as a DLTensor*.
struct DLTensor {
    void* data;
    struct {
        std::int32_t device_type;  // kDLCPU = 1
        std::int32_t device_id;
    } device;
    std::int32_t ndim;
    struct {
        std::uint8_t code;  // kDLInt = 0, kDLFloat = 2
        std::uint8_t bits;
        std::uint16_t lanes;
    } dtype;
    std::int64_t* shape;
    std::int64_t* strides;  // null: compact, row-major
    std::uint64_t byte_offset;
};
static_assert(sizeof(DLTensor) == 48, "DLTensor must have DLPack's layout");

constexpr std::int32_t k_dl_cpu = 1;
constexpr std::uint8_t k_dl_int = 0;
constexpr std::uint8_t k_dl_float = 2;

// A 1-D CPU tensor that describes a vector it does not own. The vector must
// outlive it and keep its size.
class Vector1d {
public:
    template <class T>
    Vector1d(std::vector<T>& values, std::uint8_t type_code) : m_length(static_cast<std::int64_t>(values.size())) {
        m_tensor.data = values.data();
        m_tensor.device.device_type = k_dl_cpu;
        m_tensor.device.device_id = 0;
        m_tensor.ndim = 1;
        m_tensor.dtype.code = type_code;
        m_tensor.dtype.bits = static_cast<std::uint8_t>(8 * sizeof(T));
        m_tensor.dtype.lanes = 1;
        m_tensor.shape = &m_length;  // the tensor points at its own member: not copyable
        m_tensor.strides = nullptr;
        m_tensor.byte_offset = 0;
    }
    Vector1d(const Vector1d&) = delete;
    Vector1d& operator=(const Vector1d&) = delete;

    DLTensor* get() { return &m_tensor; }

private:
    std::int64_t m_length;
    DLTensor m_tensor{};
};

std::string join(const std::vector<float>& values) {
    std::string out = "[";
    for (std::size_t i = 0; i < values.size(); ++i) {
        char number[32];
        std::snprintf(number, sizeof number, "%g", static_cast<double>(values[i]));
        out += (i == 0 ? "" : ", ") + std::string(number);
    }
    return out + "]";
}

int usage(const char* message) {
    std::fprintf(stderr,
                 "embed_tvm_ffi: %s\n"
                 "usage: embed_tvm_ffi [--endpoint URL] [--registry FILE]... [--cache-dir DIR] "
                 "[--tvm-ffi-library FILE] [NAME]\n",
                 message);
    return static_cast<int>(kernhub::ErrorCode::usage);
}

}  // namespace

int main(int argc, char** argv) {
    // Flags override the environment; the Options left empty fall back to
    // it (KERNHUB_ENDPOINT, KERNHUB_REGISTRY, KERNHUB_CACHE,
    // KERNHUB_TVM_FFI_LIBRARY, ...).
    kernhub::Options options;
    std::string name;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg == "--endpoint" || arg == "--registry" || arg == "--cache-dir" || arg == "--tvm-ffi-library") {
            if (i + 1 == argc) return usage((arg + " needs a value").c_str());
            const std::string value = argv[++i];
            if (arg == "--endpoint") options.endpoint = value;
            if (arg == "--registry") options.registries.push_back(value);
            if (arg == "--cache-dir") options.cache_dir = value;
            if (arg == "--tvm-ffi-library") options.tvm_ffi_library = value;
        } else if (arg.rfind("-", 0) == 0) {
            return usage(("unknown option '" + kernhub::printable(arg) + "'").c_str());
        } else if (!name.empty()) {
            return usage("give one kernel name");
        } else {
            name = arg;
        }
    }
    if (name.empty()) name = "tvm-add-one";

    try {
        // Start-up: fetch (or find in the cache) and verify the variant, bind
        // the tvm-ffi runtime, load the library and resolve the function.
        // Everything that can fail for lack of the kernel fails here, before
        // the first call.
        kernhub::Client client(options);
        const kernhub::LoadResult loaded = client.load(name);
        const kernhub::TvmFunction add_one = kernhub::TvmFunction::from(loaded);
        const kernhub::TvmFfiRuntimeInfo runtime = kernhub::tvm_ffi_runtime();
        // Names from the hub and paths are shown through printable(): they
        // are text from outside this program.
        std::printf("%s: variant %s, tvm-ffi function %s, runtime %s (%s)\n", kernhub::printable(name).c_str(),
                    kernhub::printable(loaded.fetch.variant).c_str(), kernhub::printable(add_one.name()).c_str(),
                    kernhub::printable(runtime.version).c_str(), kernhub::printable(runtime.library).c_str());

        // The hot path: DLTensors over memory this program owns. The call
        // packs two TVMFFIAny cells on the stack and calls the kernel.
        std::vector<float> x_values = {1.5F, -2.0F, 10.0F, 0.25F, 1023.0F};
        std::vector<float> y_values(x_values.size(), 0.0F);
        Vector1d x(x_values, k_dl_float);
        Vector1d y(y_values, k_dl_float);
        const kernhub::TvmResult result = add_one(x.get(), y.get());
        bool sums_ok = result.is_none();  // add_one returns nothing
        for (std::size_t i = 0; i < x_values.size(); ++i) {
            // Exact: each x + 1 is representable in float32.
            if (y_values[i] != x_values[i] + 1.0F) sums_ok = false;
        }
        std::printf("add_one(%s) = %s -> %s\n", join(x_values).c_str(), join(y_values).c_str(),
                    sums_ok ? "ok" : "WRONG");

        // An error the kernel raises (here a TypeError for int32 input)
        // crosses the C ABI as a status; TvmFunction takes the error from the
        // runtime and throws it as Error(kernel) with the kernel's message.
        // y must be left as it was.
        std::vector<std::int32_t> int_values = {1, 2, 3, 4, 5};
        Vector1d ints(int_values, k_dl_int);
        const std::vector<float> y_before = y_values;
        bool error_ok = false;
        try {
            add_one(ints.get(), y.get());
            std::printf("add_one(int32) returned instead of raising -> WRONG\n");
        } catch (const kernhub::Error& error) {
            error_ok = error.code() == kernhub::ErrorCode::kernel && y_values == y_before;
            std::printf("add_one(int32) raised %s: %s -> %s\n", kernhub::to_string(error.code()),
                        error.message().c_str(), error_ok ? "ok" : "WRONG");
        }
        return sums_ok && error_ok ? 0 : 1;
    } catch (const kernhub::Error& error) {
        std::fprintf(stderr, "embed_tvm_ffi: %s\n", error.what());
        return static_cast<int>(error.code());
    }
}
