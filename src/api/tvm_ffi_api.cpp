// The public tvm-ffi calling helpers (kernhub/tvm_ffi.hpp) over the tvmffi
// module: the slow paths only. A call itself is inline in the header.
#include "kernhub/error.hpp"
#include "kernhub/kernhub.hpp"
#include "kernhub/tvm_ffi.hpp"
#include "tvmffi/runtime.hpp"

namespace kernhub {

namespace {

// CUDA device ordinals kernhub passes to the runtime, which sizes a table by
// the number (a negative one would index before it).
constexpr int k_max_device = 1024;

void check_device(int device) {
    if (device < 0 || device >= k_max_device) {
        throw Error(ErrorCode::usage, "CUDA device " + std::to_string(device) + " is out of range (0 to " +
                                          std::to_string(k_max_device - 1) + ")");
    }
}

const tvmffi::Runtime& bound_runtime(const char* what) {
    const tvmffi::Runtime* runtime = tvmffi::bound();
    if (runtime == nullptr) {
        throw Error(ErrorCode::load, std::string(what) +
                                         " needs the tvm-ffi runtime, which no load has bound in this process; "
                                         "call Client::load of a tvm-ffi kernel first");
    }
    return *runtime;
}

// Puts the previous stream back when the call is over, also on a throw.
class StreamScope {
public:
    StreamScope(const tvmffi::Runtime& runtime, int device, void* stream) : m_runtime(runtime), m_device(device) {
        const int status = runtime.api.env_set_stream(tvmffi::k_device_cuda, device, stream, &m_previous);
        if (status != 0) fail_stream(runtime, status, device);
    }
    ~StreamScope() {
        // Setting back a stream that was current a moment ago cannot fail
        // in a way a destructor could report.
        (void)m_runtime.api.env_set_stream(tvmffi::k_device_cuda, m_device, m_previous, nullptr);
    }
    StreamScope(const StreamScope&) = delete;
    StreamScope& operator=(const StreamScope&) = delete;

    [[noreturn]] static void fail_stream(const tvmffi::Runtime& runtime, int status, int device) {
        const tvmffi::Raised raised = tvmffi::take_raised(runtime);
        throw Error(ErrorCode::load,
                    "the tvm-ffi runtime refused the stream for CUDA device " + std::to_string(device) +
                        " (TVMFFIEnvSetStream returned " + std::to_string(status) + ")" +
                        (raised.message.empty() ? std::string() : ": " + raised.kind + ": " + raised.message));
    }

private:
    const tvmffi::Runtime& m_runtime;
    int m_device;
    void* m_previous = nullptr;
};

}  // namespace

TvmFunction TvmFunction::from(const LoadResult& result) {
    expect_kind(result, LoadKind::tvm_ffi);
    // The symbol is __tvm_ffi_<name>; the function goes by its name.
    const std::string prefix = "__tvm_ffi_";
    std::string name = result.symbol.rfind(prefix, 0) == 0 ? result.symbol.substr(prefix.size()) : result.symbol;
    return TvmFunction(reinterpret_cast<SafeCall>(result.address), std::move(name));
}

void TvmFunction::fail(int status, const TvmAny& result) const {
    const tvmffi::Runtime& runtime = bound_runtime("a tvm-ffi call");
    if (status == 0) {
        // An object result (a string, a tensor...) holds a reference the
        // caller owns; kernhub has no use for it, so it goes back at once.
        const bool object = result.type_index >= static_cast<std::int32_t>(TvmType::first_object);
        if (object) runtime.api.object_dec_ref(result.value.v_ptr);
        throw Error(ErrorCode::usage, "tvm-ffi function '" + m_name + "' returned " +
                                          (object ? "an object" : "a value") + " of type index " +
                                          std::to_string(result.type_index) +
                                          ", which kernhub does not read; call functions that return none, a "
                                          "bool, an integer, a float or an opaque pointer");
    }
    const tvmffi::Raised raised = tvmffi::take_raised(runtime);
    if (raised.kind.empty() && raised.message.empty()) {
        throw Error(ErrorCode::kernel, "tvm-ffi function '" + m_name + "' failed with status " +
                                           std::to_string(status) + " and raised no error");
    }
    throw Error(ErrorCode::kernel, "tvm-ffi function '" + m_name + "' raised " + raised.kind + ": " + raised.message,
                raised.backtrace);
}

void TvmFunction::empty() {
    throw Error(ErrorCode::usage, "call of an empty TvmFunction; take it from a load first (TvmFunction::from)");
}

TvmResult TvmFunction::call_on_stream(int device, void* stream, const TvmAny* args, std::size_t count) const {
    if (m_fn == nullptr) empty();
    check_device(device);
    StreamScope scope(bound_runtime("a call on a stream"), device, stream);
    return call(args, count);
}

void* set_tvm_ffi_stream(int device, void* stream) {
    check_device(device);
    const tvmffi::Runtime& runtime = bound_runtime("set_tvm_ffi_stream");
    void* previous = nullptr;
    const int status = runtime.api.env_set_stream(tvmffi::k_device_cuda, device, stream, &previous);
    if (status != 0) StreamScope::fail_stream(runtime, status, device);
    return previous;
}

TvmFfiRuntimeInfo tvm_ffi_runtime() noexcept {
    TvmFfiRuntimeInfo info;
    try {
        if (const tvmffi::Runtime* runtime = tvmffi::bound()) {
            info.version = runtime->version_text();
            info.library = runtime->library;
        }
    } catch (...) {
        // Only allocation failure can get here: report no runtime.
        info = TvmFfiRuntimeInfo{};
    }
    return info;
}

}  // namespace kernhub
