// kernhub declares the slice of the TVM FFI C ABI it uses (src/tvmffi,
// kernhub/tvm_ffi.hpp, kernhub.h) instead of including tvm-ffi's headers.
// Here those declarations meet the wheel's own c_api.h: every size, offset
// and type index must agree, or this file does not compile.
#include <catch2/catch.hpp>
#include <cstddef>
#include <type_traits>

#include "kernhub/kernhub.h"
#include "kernhub/tvm_ffi.hpp"
#include "support/requirements.hpp"
#include "tvmffi/runtime.hpp"

#if KERNHUB_TVM_FFI_HEADERS
#include <tvm/ffi/c_api.h>
#include <tvm/ffi/extra/c_env_api.h>

namespace k = kernhub::tvmffi;

#define KERNHUB_SAME_FIELD(ours, theirs, ours_field, theirs_field)                \
    static_assert(offsetof(ours, ours_field) == offsetof(theirs, theirs_field) && \
                      sizeof(ours::ours_field) == sizeof(theirs::theirs_field),   \
                  #ours "::" #ours_field " differs from " #theirs "::" #theirs_field)

static_assert(sizeof(kernhub::TvmAny) == sizeof(TVMFFIAny), "TvmAny");
KERNHUB_SAME_FIELD(kernhub::TvmAny, TVMFFIAny, type_index, type_index);
KERNHUB_SAME_FIELD(kernhub::TvmAny, TVMFFIAny, zero_padding, zero_padding);
static_assert(offsetof(kernhub::TvmAny, value) == offsetof(TVMFFIAny, v_int64), "TvmAny payload");
static_assert(sizeof(kh_tvm_any) == sizeof(TVMFFIAny) && offsetof(kh_tvm_any, value) == offsetof(TVMFFIAny, v_int64),
              "kh_tvm_any");

static_assert(sizeof(k::AbiVersion) == sizeof(TVMFFIVersion), "AbiVersion");
KERNHUB_SAME_FIELD(k::AbiVersion, TVMFFIVersion, major, major);
KERNHUB_SAME_FIELD(k::AbiVersion, TVMFFIVersion, minor, minor);
KERNHUB_SAME_FIELD(k::AbiVersion, TVMFFIVersion, patch, patch);

static_assert(sizeof(k::ObjectHeader) == sizeof(TVMFFIObject), "ObjectHeader");
KERNHUB_SAME_FIELD(k::ObjectHeader, TVMFFIObject, type_index, type_index);

static_assert(sizeof(k::ErrorCell) == sizeof(TVMFFIErrorCell), "ErrorCell");
KERNHUB_SAME_FIELD(k::ErrorCell, TVMFFIErrorCell, kind, kind);
KERNHUB_SAME_FIELD(k::ErrorCell, TVMFFIErrorCell, message, message);
KERNHUB_SAME_FIELD(k::ErrorCell, TVMFFIErrorCell, backtrace, backtrace);
static_assert(sizeof(k::ByteArray) == sizeof(TVMFFIByteArray), "ByteArray");

static_assert(static_cast<int>(kernhub::TvmType::none) == kTVMFFINone, "none");
static_assert(static_cast<int>(kernhub::TvmType::integer) == kTVMFFIInt, "int");
static_assert(static_cast<int>(kernhub::TvmType::boolean) == kTVMFFIBool, "bool");
static_assert(static_cast<int>(kernhub::TvmType::floating) == kTVMFFIFloat, "float");
static_assert(static_cast<int>(kernhub::TvmType::opaque_pointer) == kTVMFFIOpaquePtr, "opaque");
static_assert(static_cast<int>(kernhub::TvmType::dl_tensor) == kTVMFFIDLTensorPtr, "DLTensor*");
static_assert(static_cast<int>(kernhub::TvmType::first_object) == kTVMFFIStaticObjectBegin, "objects");
static_assert(k::k_type_error == kTVMFFIError, "error type index");
static_assert(KH_TVM_NONE == kTVMFFINone && KH_TVM_INT == kTVMFFIInt && KH_TVM_BOOL == kTVMFFIBool &&
                  KH_TVM_FLOAT == kTVMFFIFloat && KH_TVM_OPAQUE_PTR == kTVMFFIOpaquePtr &&
                  KH_TVM_DLTENSOR == kTVMFFIDLTensorPtr,
              "KH_TVM_* type indices");
static_assert(k::k_device_cuda == kDLCUDA && k::k_device_cpu == kDLCPU, "device types");

// The entry points kernhub calls have the signatures c_api.h declares.
static_assert(std::is_same<decltype(&TVMFFIObjectDecRef), decltype(k::EntryPoints::object_dec_ref)>::value, "DecRef");
static_assert(std::is_same<decltype(&TVMFFIErrorMoveFromRaised), void (*)(TVMFFIObjectHandle*)>::value &&
                  std::is_same<decltype(k::EntryPoints::error_move_from_raised), void (*)(void**)>::value,
              "ErrorMoveFromRaised");
static_assert(std::is_same<decltype(&TVMFFIEnvSetStream), decltype(k::EntryPoints::env_set_stream)>::value,
              "EnvSetStream");
static_assert(std::is_same<TVMFFISafeCallType, int (*)(void*, const TVMFFIAny*, int32_t, TVMFFIAny*)>::value,
              "safe call");

TEST_CASE("kernhub's TVM FFI declarations match the wheel's c_api.h", "[tvm-ffi][needs:tvm-ffi]") {
    // The checks above ran at compile time; at run time the function names
    // kernhub lists agree with the symbols the convention exports.
    CHECK(k::symbol_of("add_one") == "__tvm_ffi_add_one");
    CHECK(k::symbol_of("__tvm_ffi_add_one") == "__tvm_ffi_add_one");
    CHECK(k::function_names({"__tvm_ffi_add_one", "__tvm_ffi__library_ctx", "__tvm_ffi__metadata_add_one", "__tvm_ffi_",
                             "kh_other", "__tvm_ffi_b"}) == std::vector<std::string>{"add_one", "b"});
}
#endif

// A raw pointer or an enum is no argument: only a DLTensor-shaped struct
// pointer converts implicitly (TvmArg::tensor and TvmArg::opaque wrap the
// rest), and only a real bool becomes a bool.
enum Plain { plain_value };
static_assert(!std::is_convertible<float*, kernhub::TvmArg>::value, "float*");
static_assert(!std::is_convertible<void*, kernhub::TvmArg>::value, "void*");
static_assert(!std::is_convertible<const char*, kernhub::TvmArg>::value, "const char*");
static_assert(!std::is_convertible<Plain, kernhub::TvmArg>::value, "unscoped enum");
struct FortyEight {
    char bytes[48];
};
static_assert(std::is_convertible<FortyEight*, kernhub::TvmArg>::value, "DLTensor-shaped struct");
static_assert(std::is_convertible<bool, kernhub::TvmArg>::value && std::is_convertible<int, kernhub::TvmArg>::value &&
                  std::is_convertible<double, kernhub::TvmArg>::value &&
                  std::is_convertible<std::nullptr_t, kernhub::TvmArg>::value,
              "scalars and null");
