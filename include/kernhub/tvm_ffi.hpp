// Calling the functions of tvm-ffi variants (tvm-ffi{MM}-<backend>-<cpu>-<os>)
// through the TVM FFI C calling convention, with no Python. kernhub binds the
// tvm-ffi runtime (libtvm_ffi.so) at run time, loads the variant's library
// and resolves the function before any call (docs/kernels.md, "tvm-ffi variants").
//
//   auto add_one = kernhub::TvmFunction::from(client.load("add-one"));  // at start-up
//   add_one(&x, &y);                                     // DLTensor* x, y
//
// A call packs its arguments into an array on the stack and makes one
// indirect call: no lookup, lock or allocation unless the kernel raises.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include "kernhub/error.hpp"
#include "kernhub/export.hpp"

namespace kernhub {

struct LoadResult;  // kernhub.hpp

// The 16-byte value cell of the TVM FFI C ABI (TVMFFIAny): a type index and
// a payload. Arguments and results travel as arrays of it.
struct TvmAny {
    std::int32_t type_index = 0;  // TvmType
    std::uint32_t zero_padding = 0;
    union Payload {
        std::int64_t v_int64;
        double v_float64;
        void* v_ptr;
    } value{0};
};
static_assert(sizeof(TvmAny) == 16, "TvmAny must have the layout of TVMFFIAny");

// The type indices kernhub packs and reads (TVMFFITypeIndex). Indices from
// 64 up are reference-counted objects.
enum class TvmType : std::int32_t {
    none = 0,
    integer = 1,
    boolean = 2,
    floating = 3,
    opaque_pointer = 4,
    dl_tensor = 7,  // DLTensor*
    first_object = 64,
};

// One argument: null, a bool, an integer, a floating-point number, a
// DLTensor* (DLPack's tensor descriptor; any struct of its 48-byte layout)
// or an opaque pointer. Implicit, so a call reads f(&x, &y, 2.0, 3). A
// pointer to anything but such a struct does not compile (a float* is no
// tensor): wrap it with TvmArg::tensor or TvmArg::opaque.
class TvmArg {
public:
    TvmArg(std::nullptr_t) noexcept {}  // NOLINT(google-explicit-constructor)
    // Exactly bool: a pointer or an enum must not become `true`.
    template <class T, std::enable_if_t<std::is_same<T, bool>::value, int> = 0>
    TvmArg(T value) noexcept {  // NOLINT(google-explicit-constructor)
        m_any.type_index = static_cast<std::int32_t>(TvmType::boolean);
        m_any.value.v_int64 = value ? 1 : 0;
    }
    template <class T, std::enable_if_t<std::is_integral<T>::value && !std::is_same<T, bool>::value, int> = 0>
    TvmArg(T value) noexcept {  // NOLINT(google-explicit-constructor)
        m_any.type_index = static_cast<std::int32_t>(TvmType::integer);
        m_any.value.v_int64 = static_cast<std::int64_t>(value);
    }
    template <class T, std::enable_if_t<std::is_floating_point<T>::value, int> = 0>
    TvmArg(T value) noexcept {  // NOLINT(google-explicit-constructor)
        m_any.type_index = static_cast<std::int32_t>(TvmType::floating);
        m_any.value.v_float64 = static_cast<double>(value);
    }
    // A DLTensor* (dlpack.h declares DLTensor as an unnamed struct, so it is
    // taken by its layout).
    template <class T, std::enable_if_t<std::is_class<T>::value, int> = 0>
    TvmArg(T* dl_tensor) noexcept {  // NOLINT(google-explicit-constructor)
        static_assert(sizeof(T) == 48, "pass a DLTensor* (DLPack's tensor descriptor), or use TvmArg::opaque");
        m_any.type_index = static_cast<std::int32_t>(TvmType::dl_tensor);
        m_any.value.v_ptr = const_cast<std::remove_const_t<T>*>(dl_tensor);
    }
    template <class T, std::enable_if_t<!std::is_class<T>::value, int> = 0>
    TvmArg(T* pointer) = delete;  // use TvmArg::tensor or TvmArg::opaque
    static TvmArg tensor(void* dl_tensor) noexcept {
        TvmArg arg(nullptr);
        arg.m_any.type_index = static_cast<std::int32_t>(TvmType::dl_tensor);
        arg.m_any.value.v_ptr = dl_tensor;
        return arg;
    }
    static TvmArg opaque(void* pointer) noexcept {
        TvmArg arg(nullptr);
        arg.m_any.type_index = static_cast<std::int32_t>(TvmType::opaque_pointer);
        arg.m_any.value.v_ptr = pointer;
        return arg;
    }
    const TvmAny& any() const noexcept { return m_any; }

private:
    TvmAny m_any;
};

// What a function returned: none, a bool, an integer, a floating-point
// number or an opaque pointer. (A function that returns anything else, such
// as a string or a tensor, fails after the call with Error(usage); a
// returned object is released: kernhub does not hold tvm-ffi objects.)
class TvmResult {
public:
    TvmResult() = default;
    explicit TvmResult(const TvmAny& any) noexcept : m_any(any) {}
    TvmType type() const noexcept { return static_cast<TvmType>(m_any.type_index); }
    bool is_none() const noexcept { return type() == TvmType::none; }
    // Error(usage) naming the type when the result is something else; an
    // integer converts to double, a bool to an integer.
    std::int64_t as_int() const {
        if (type() != TvmType::integer && type() != TvmType::boolean) wrong_type("an integer");
        return m_any.value.v_int64;
    }
    double as_double() const {
        if (type() == TvmType::integer) return static_cast<double>(m_any.value.v_int64);
        if (type() != TvmType::floating) wrong_type("a floating-point number");
        return m_any.value.v_float64;
    }
    bool as_bool() const {
        if (type() != TvmType::boolean) wrong_type("a bool");
        return m_any.value.v_int64 != 0;
    }
    void* as_pointer() const {
        if (type() != TvmType::opaque_pointer) wrong_type("an opaque pointer");
        return m_any.value.v_ptr;
    }
    const TvmAny& any() const noexcept { return m_any; }

private:
    friend class TvmFunction;  // its call writes m_any in place
    [[noreturn]] void wrong_type(const char* wanted) const {
        throw Error(ErrorCode::usage, std::string("the tvm-ffi function returned type index ") +
                                          std::to_string(m_any.type_index) + ", not " + wanted);
    }
    TvmAny m_any;
};

// A resolved tvm-ffi function. Copyable; valid for the life of the process
// (kernhub never unloads a kernel).
class KERNHUB_API TvmFunction {
public:
    // TVMFFISafeCallType: int(void* self, const TVMFFIAny* args, int32_t
    // num_args, TVMFFIAny* result); 0 on success.
    using SafeCall = int (*)(void* self, const TvmAny* args, std::int32_t num_args, TvmAny* result);

    TvmFunction() = default;
    // The function a load resolved (Client::load, Client::loaded).
    // Error(usage) when it is not a tvm-ffi function (a C function, a CUDA
    // kernel or a torch op).
    static TvmFunction from(const LoadResult& result);

    // Calls with the current stream of the runtime (for a CUDA variant, the
    // one set with set_tvm_ffi_stream, else the default stream). A raised
    // error is Error(kernel) with the kernel's message; Error(usage) for a
    // default-constructed TvmFunction or a result of a type kernhub does
    // not keep (a string, a tensor).
    template <class... Args>
    TvmResult operator()(Args&&... args) const {
        const TvmAny packed[sizeof...(Args) + 1] = {TvmArg(std::forward<Args>(args)).any()..., TvmAny{}};
        return call(packed, sizeof...(Args));
    }
    // `count` cells at `args` (TvmArg(x).any() makes one); operator()'s
    // errors.
    TvmResult call(const TvmAny* args, std::size_t count) const {
        if (m_fn == nullptr) empty();
        // The callee writes its result straight into the returned object
        // (kTVMFFINone before the call, as the convention requires): a copy
        // of the 16-byte cell would read it back wider than it was written.
        TvmResult result;
        const int status = m_fn(nullptr, args, static_cast<std::int32_t>(count), &result.m_any);
        // Only none, bool, integer, float and opaque pointer results are
        // kept; anything else (an object, a small string) fails.
        if (status != 0 ||
            static_cast<std::uint32_t>(result.m_any.type_index) > static_cast<std::uint32_t>(TvmType::opaque_pointer)) {
            fail(status, result.m_any);
        }
        return result;
    }
    // A CUDA variant's call on `stream` of CUDA device `device` (0 to
    // 1023, else Error(usage)): the runtime's current stream for that
    // device is `stream` during the call and the previous one again
    // afterwards, also when the call raises. operator()'s errors, and
    // Error(load) when the runtime refuses the stream.
    template <class... Args>
    TvmResult on_stream(int device, void* stream, Args&&... args) const {
        const TvmAny packed[sizeof...(Args) + 1] = {TvmArg(std::forward<Args>(args)).any()..., TvmAny{}};
        return call_on_stream(device, stream, packed, sizeof...(Args));
    }
    // on_stream() with `count` cells at `args`; on_stream()'s errors.
    TvmResult call_on_stream(int device, void* stream, const TvmAny* args, std::size_t count) const;

    SafeCall get() const noexcept { return m_fn; }
    // The function's name, e.g. "add_one" (its symbol is __tvm_ffi_add_one).
    const std::string& name() const noexcept { return m_name; }
    explicit operator bool() const noexcept { return m_fn != nullptr; }

private:
    TvmFunction(SafeCall fn, std::string name) : m_fn(fn), m_name(std::move(name)) {}
    // Throws for a non-zero status (the raised error, moved out of the
    // runtime and released) or a result kernhub does not keep (an object
    // result is released first).
    [[noreturn]] void fail(int status, const TvmAny& result) const;
    // Error(usage): a call of a default-constructed TvmFunction.
    [[noreturn]] static void empty();

    SafeCall m_fn = nullptr;
    std::string m_name;
};

// Sets the tvm-ffi runtime's current stream for CUDA device `device` (0 to
// 1023, else Error(usage)) on the calling thread (TVMFFIEnvSetStream) and
// returns the previous one. The runtime must be bound (a tvm-ffi kernel
// loaded); Error(load) otherwise.
KERNHUB_API void* set_tvm_ffi_stream(int device, void* stream);

// The bound runtime's version ("0.1.15") and file, or empty strings when
// no tvm-ffi kernel has been loaded in this process. No error.
struct TvmFfiRuntimeInfo {
    std::string version;
    std::string library;
};
KERNHUB_API TvmFfiRuntimeInfo tvm_ffi_runtime() noexcept;

}  // namespace kernhub
