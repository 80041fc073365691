// The tvm-ffi runtime (libtvm_ffi.so), bound at run time like the CUDA
// driver: dlopen'ed RTLD_GLOBAL on first need, never linked, so kernhub
// builds and runs without it and reports its absence as an Error. The
// tvmffi module is its only owner.
//
// The slice of the TVM FFI C ABI kernhub uses is declared here rather than
// taken from tvm/ffi/c_api.h (tests/tvmffi checks it against that header).
//
// Error policy: functions throw kernhub::Error; ErrorCode::load for a
// runtime that is missing, unusable or of another version.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kernhub/tvm_ffi.hpp"

namespace kernhub::tvmffi {

// TVMFFIVersion.
struct AbiVersion {
    std::uint32_t major = 0;
    std::uint32_t minor = 0;
    std::uint32_t patch = 0;
};

// TVMFFIByteArray.
struct ByteArray {
    const char* data;
    std::size_t size;
};

// TVMFFIObject: the header of every reference-counted object.
struct ObjectHeader {
    std::uint64_t combined_ref_count;
    std::int32_t type_index;
    std::uint32_t padding;
    void (*deleter)(void* self, int flags);
};

// TVMFFIErrorCell: follows the header of an error object
// (TVMFFIErrorGetCellPtr).
struct ErrorCell {
    ByteArray kind;
    ByteArray message;
    ByteArray backtrace;
    void (*update_backtrace)(void* self, const ByteArray* backtrace, std::int32_t update_mode);
    void* cause_chain;
    void* extra_context;
};

// DLDeviceType values kernhub passes (dlpack.h).
constexpr std::int32_t k_device_cpu = 1;
constexpr std::int32_t k_device_cuda = 2;
// TVMFFITypeIndex of an error object.
constexpr std::int32_t k_type_error = 67;

// The runtime entry points kernhub calls, typed as c_api.h and
// extra/c_env_api.h declare them.
struct EntryPoints {
    void (*get_version)(AbiVersion* out) = nullptr;
    void (*error_move_from_raised)(void** out) = nullptr;
    int (*object_dec_ref)(void* object) = nullptr;
    int (*env_set_stream)(std::int32_t device_type, std::int32_t device_id, void* stream,
                          void** opt_out_original) = nullptr;
};

struct Runtime {
    std::string library;  // the file the dynamic loader opened
    void* handle = nullptr;
    AbiVersion version;
    EntryPoints api;
    // "0.1.15"
    std::string version_text() const;
};

// Where the runtime is looked for when nothing names it: first a
// libtvm_ffi.so already in the process, then the dynamic loader's search
// path, then the apache-tvm-ffi package (tvm_ffi/lib/libtvm_ffi.so) in the
// active virtual environment ($VIRTUAL_ENV), conda environment
// ($CONDA_PREFIX), the user's site-packages (~/.local) and /usr/local.
// `requested` (Options::tvm_ffi_library, else KERNHUB_TVM_FFI_LIBRARY)
// names the file instead; it is passed here already resolved.
//
// Binds once per process; later calls return the same Runtime. A call that
// names another file than the bound one (or than a libtvm_ffi.so already
// in the process) is Error(load). A failure is kept
// per `requested` value and thrown again. Thread-safe.
const Runtime& bind(const std::string& requested);

// The runtime's (major, minor), or the reason none can be bound (the
// message bind would throw). Never throws.
struct Probe {
    std::optional<std::pair<int, int>> version;
    std::string problem;
};
Probe probe(const std::string& requested);

// The runtime bound so far, or nullptr.
const Runtime* bound() noexcept;

// The message of the error the runtime raised (TVMFFIErrorMoveFromRaised),
// released afterwards: "<kind>: <message>", and the backtrace. Empty
// strings when none was raised.
struct Raised {
    std::string kind;
    std::string message;
    std::string backtrace;
};
Raised take_raised(const Runtime& runtime);

// The tvm-ffi functions a library exports: the names after "__tvm_ffi_"
// of its exported symbols, less the runtime's own ("__tvm_ffi__...").
std::vector<std::string> function_names(const std::vector<std::string>& exported_functions);

// The symbol of function `name`: "__tvm_ffi_<name>" (a name that already
// starts with "__tvm_ffi_" is kept as it is).
std::string symbol_of(const std::string& name);

}  // namespace kernhub::tvmffi
