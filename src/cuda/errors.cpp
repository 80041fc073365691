// Turning CUresult codes into kernhub::Error: the driver's name for the code,
// what it means for someone loading a kernel, and what to do next.
#include <string>

#include "common/hint.hpp"
#include "cuda/driver.hpp"
#include "cuda/entry_points.hpp"
#include "kernhub/error.hpp"

namespace kernhub::cuda {

namespace {

struct KnownCode {
    api::Result code;
    const char* name;
    const char* advice;
    const char* action = nullptr;  // the operation the advice refers to (ErrorHint)
};

// The codes a user loading a kernel meets, with advice. Names are
// cuda.h's, so messages read the same with or without a bound driver.
constexpr KnownCode k_known_codes[] = {
    {1, "CUDA_ERROR_INVALID_VALUE", "the driver rejected an argument (launch dimensions, sizes or a null handle)"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY", "the GPU is out of memory; free device memory or use a smaller problem"},
    {3, "CUDA_ERROR_NOT_INITIALIZED", "the driver was not initialised; this is a kernhub bug, please report it"},
    {34, "CUDA_ERROR_STUB_LIBRARY",
     "the CUDA driver found is the toolkit's stub library (lib64/stubs/libcuda.so), which only exists for "
     "linking; install the NVIDIA driver, take the stubs directory out of LD_LIBRARY_PATH and "
     "KERNHUB_CUDA_DRIVER, or use a CPU variant"},
    {35, "CUDA_ERROR_INSUFFICIENT_DRIVER", "the NVIDIA driver is too old for this request; update the driver"},
    {46, "CUDA_ERROR_DEVICE_UNAVAILABLE",
     "the GPU is busy or its compute mode forbids this process (exclusive or prohibited); check nvidia-smi"},
    {100, "CUDA_ERROR_NO_DEVICE",
     "no CUDA-capable GPU is visible to this process; check nvidia-smi and CUDA_VISIBLE_DEVICES, or use a CPU "
     "variant"},
    {101, "CUDA_ERROR_INVALID_DEVICE", "there is no GPU with that index; check nvidia-smi and CUDA_VISIBLE_DEVICES"},
    {200, "CUDA_ERROR_INVALID_IMAGE",
     "the file is not a usable fatbin, cubin or PTX image (damaged, or not a CUDA binary); fetch it again, or see "
     "what it is",
     "inspect"},
    {209, "CUDA_ERROR_NO_BINARY_FOR_GPU",
     "the image has no SASS for this GPU and no PTX the driver can compile for it; fetch a variant built for this "
     "GPU, or see what the image holds for its compute capability",
     "inspect"},
    {218, "CUDA_ERROR_INVALID_PTX",
     "the driver's JIT compiler rejected the PTX in the image; fetch a variant with SASS for this GPU"},
    {221, "CUDA_ERROR_JIT_COMPILER_NOT_FOUND",
     "the image needs JIT compilation but the driver's PTX compiler is missing; reinstall the NVIDIA driver or "
     "fetch a variant with SASS for this GPU"},
    {222, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
     "the PTX was made by a newer CUDA toolkit than this driver supports; update the NVIDIA driver, or fetch a "
     "variant with SASS for this GPU"},
    {400, "CUDA_ERROR_INVALID_HANDLE", "a kernel or buffer handle is stale or from another context"},
    {500, "CUDA_ERROR_NOT_FOUND", "the named kernel is not in the image; check the registry's \"symbol\""},
    {700, "CUDA_ERROR_ILLEGAL_ADDRESS",
     "the kernel accessed memory it does not own; the context is now unusable, restart the process"},
    {701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
     "the launch asks for more registers or shared memory per block than the GPU has; use smaller blocks"},
    {719, "CUDA_ERROR_LAUNCH_FAILED", "the kernel faulted; the context is now unusable, restart the process"},
    {803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
     "the loaded kernel module and user-space libcuda come from different driver versions; reboot or reinstall "
     "the NVIDIA driver"},
    {804, "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
     "the CUDA forward-compatibility libcuda in use does not support this GPU; use the system driver's libcuda"},
    {999, "CUDA_ERROR_UNKNOWN", "the driver reported an unknown error; check dmesg and nvidia-smi"},
};

const KnownCode* find_known(api::Result code) {
    for (const KnownCode& known : k_known_codes) {
        if (known.code == code) return &known;
    }
    return nullptr;
}

// cuGetErrorString's sentence, which says more than the name for codes
// kernhub has no advice for; empty when unavailable.
std::string driver_description(const api::EntryPoints* api, api::Result code) {
    const char* text = nullptr;
    if (api == nullptr || api->get_error_string == nullptr) return {};
    if (api->get_error_string(code, &text) != api::k_success || text == nullptr) return {};
    return text;
}

}  // namespace

namespace api {

std::string error_name(const EntryPoints* api, Result code) {
    const char* name = nullptr;
    if (api != nullptr && api->get_error_name != nullptr && api->get_error_name(code, &name) == k_success &&
        name != nullptr) {
        return name;
    }
    const KnownCode* known = find_known(code);
    return known ? known->name : "unrecognised CUresult";
}

Error make_error(const EntryPoints* api, Result code, const std::string& what) {
    const KnownCode* known = find_known(code);
    std::string message = what + " failed with CUDA error " + std::to_string(code) + " " + error_name(api, code);
    message += known ? std::string(": ") + known->advice : std::string("; see the CUDA Driver API documentation");
    const ErrorCode kind = code == k_error_not_found ? ErrorCode::not_found : ErrorCode::load;
    const ErrorHint hint = known != nullptr && known->action != nullptr ? hint::action(known->action) : ErrorHint{};
    return Error(kind, message, hint, driver_description(api, code));
}

}  // namespace api

std::string error_name(int code) {
    return api::error_name(api::bound_entry_points(), code);
}

void fail(int code, const std::string& what) {
    throw api::make_error(api::bound_entry_points(), code, what);
}

}  // namespace kernhub::cuda
