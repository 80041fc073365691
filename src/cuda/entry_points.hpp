// The slice of the CUDA Driver API that kernhub calls, declared here rather
// than taken from cuda.h so that kernhub builds and runs where no CUDA
// toolkit or driver is installed. Internal to src/cuda.
//
// Every prototype matches one specific ABI version of its entry point (noted
// beside it as the cudaTypedefs.h PFN_ suffix); binding.cpp asks
// cuGetProcAddress for exactly that version, so a newer driver can never hand
// back a function with a different signature (cuMemAlloc resolves to the
// _v2 ABI with 64-bit sizes, cuCtxSynchronize to the parameterless one).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "kernhub/error.hpp"

namespace kernhub::cuda::api {

using Result = int;                    // CUresult
using DeviceOrdinal = int;             // CUdevice
using DevicePtr = unsigned long long;  // CUdeviceptr (_v2: always 64-bit)

// Opaque driver handles; distinct incomplete types keep them from mixing.
struct ContextObject;
struct ModuleObject;
struct FunctionObject;
struct LibraryObject;
struct KernelObject;
struct StreamObject;
using Context = ContextObject*;        // CUcontext
using Module = ModuleObject*;          // CUmodule
using Function = FunctionObject*;      // CUfunction
using LibraryHandle = LibraryObject*;  // CUlibrary
using Kernel = KernelObject*;          // CUkernel
using Stream = StreamObject*;          // CUstream

// CUresult values kernhub reacts to (cuda.h, enum cudaError_enum).
constexpr Result k_success = 0;
constexpr Result k_error_not_found = 500;

// CUdevice_attribute values.
constexpr int k_attribute_cc_major = 75;
constexpr int k_attribute_cc_minor = 76;

// cuGetProcAddress flag: never the per-thread-default-stream variants,
// because kernhub's stream argument means the legacy default stream.
constexpr std::uint64_t k_proc_address_legacy_stream = 1;

// cuGetProcAddress_v2 (PFN_..._v12000) and its 11.3 predecessor (_v11030).
using GetProcAddressV2 = Result (*)(const char* symbol, void** pfn, int cuda_version, std::uint64_t flags,
                                    int* symbol_status);
using GetProcAddressV1 = Result (*)(const char* symbol, void** pfn, int cuda_version, std::uint64_t flags);

// Versions in which the ABI of each resolved entry point was introduced.
constexpr int k_library_api_version = 12000;  // cuLibrary*, cuKernelGetFunction

struct EntryPoints {
    // Resolved before cuInit, so that cuInit's failure can be named.
    Result (*get_error_name)(Result, const char**) = nullptr;    // v6000
    Result (*get_error_string)(Result, const char**) = nullptr;  // v6000
    Result (*init)(unsigned flags) = nullptr;                    // v2000
    Result (*driver_get_version)(int*) = nullptr;                // v2020

    Result (*device_get)(DeviceOrdinal*, int ordinal) = nullptr;                   // v2000
    Result (*device_get_count)(int*) = nullptr;                                    // v2000
    Result (*device_get_name)(char*, int len, DeviceOrdinal) = nullptr;            // v2000
    Result (*device_get_attribute)(int*, int attribute, DeviceOrdinal) = nullptr;  // v2000
    Result (*primary_ctx_retain)(Context*, DeviceOrdinal) = nullptr;               // v7000
    Result (*ctx_set_current)(Context) = nullptr;                                  // v4000
    Result (*ctx_synchronize)() = nullptr;                                         // v2000

    Result (*module_load_data)(Module*, const void* image) = nullptr;              // v2000
    Result (*module_get_function)(Function*, Module, const char* name) = nullptr;  // v2000
    Result (*launch_kernel)(Function, unsigned grid_x, unsigned grid_y, unsigned grid_z, unsigned block_x,
                            unsigned block_y, unsigned block_z, unsigned shared_bytes, Stream, void** params,
                            void** extra) = nullptr;  // v4000

    Result (*mem_alloc)(DevicePtr*, std::size_t bytes) = nullptr;                        // v3020 (_v2)
    Result (*mem_free)(DevicePtr) = nullptr;                                             // v3020 (_v2)
    Result (*memcpy_htod)(DevicePtr dst, const void* src, std::size_t bytes) = nullptr;  // v3020 (_v2)
    Result (*memcpy_dtoh)(void* dst, DevicePtr src, std::size_t bytes) = nullptr;        // v3020 (_v2)

    // Only on drivers >= 12.0; null otherwise. jit and library options are
    // enum arrays in cuda.h; kernhub always passes none.
    Result (*library_load_data)(LibraryHandle*, const void* code, int* jit_options, void** jit_values,
                                unsigned jit_count, int* library_options, void** library_values,
                                unsigned library_count) = nullptr;                     // v12000
    Result (*library_get_kernel)(Kernel*, LibraryHandle, const char* name) = nullptr;  // v12000
    Result (*kernel_get_function)(Function*, Kernel) = nullptr;                        // v12000
};

// The table of the successful binding, or nullptr when the driver has not
// been bound (yet, or ever). Never triggers binding.
const EntryPoints* bound_entry_points() noexcept;

// "CUDA_ERROR_NO_BINARY_FOR_GPU" for 209: through api->get_error_name when
// api is non-null and knows the code, else from kernhub's own table.
std::string error_name(const EntryPoints* api, Result code);

// The error fail() throws, with names and text taken from api when given;
// usable while binding, before a table is published.
Error make_error(const EntryPoints* api, Result code, const std::string& what);

}  // namespace kernhub::cuda::api
