// Loading images, looking up kernels and launching them.
#include <string>
#include <utility>

#include "cuda/driver.hpp"
#include "cuda/entry_points.hpp"
#include "kernhub/error.hpp"

namespace kernhub::cuda {

Library Driver::load(const void* image, const std::string& label, int device) {
    if (image == nullptr) throw Error(ErrorCode::usage, "no image given to load as " + label);
    if (context_independent()) {
        // Context-independent loading needs no current context, but a device
        // index that does not exist should fail here, not at the first launch.
        api::DeviceOrdinal handle = 0;
        if (const api::Result r = m_api.device_get(&handle, device); r != api::k_success) {
            fail(r, "loading " + label + " for device " + std::to_string(device));
        }
        api::LibraryHandle library = nullptr;
        const api::Result r = m_api.library_load_data(&library, image, nullptr, nullptr, 0, nullptr, nullptr, 0);
        if (r != api::k_success) fail(r, "cuLibraryLoadData of " + label + " for " + describe_device(device));
        return Library(library, label, device);
    }
    make_current(device);
    api::Module module = nullptr;
    if (const api::Result r = m_api.module_load_data(&module, image); r != api::k_success) {
        fail(r, "cuModuleLoadData of " + label + " on " + describe_device(device));
    }
    return Library(module, label, device);
}

Library::Library(Library&& other) noexcept
    : m_handle(std::exchange(other.m_handle, nullptr)), m_label(std::move(other.m_label)), m_device(other.m_device) {}

Library& Library::operator=(Library&& other) noexcept {
    m_handle = std::exchange(other.m_handle, nullptr);
    m_label = std::move(other.m_label);
    m_device = other.m_device;
    return *this;
}

namespace {

Error missing_kernel(const std::string& name, const std::string& label) {
    return Error(ErrorCode::not_found, "kernel '" + name + "' not found in " + label + "; check the registry's symbol");
}

}  // namespace

void* Library::kernel(const std::string& name) {
    if (m_handle == nullptr) throw Error(ErrorCode::usage, "kernel '" + name + "' looked up in a moved-from Library");
    Driver& driver = Driver::instance();
    const api::EntryPoints& api = driver.api();
    const std::string where = "'" + name + "' in " + m_label;
    if (!driver.context_independent()) {
        driver.make_current(m_device);
        api::Function function = nullptr;
        const api::Result r = api.module_get_function(&function, static_cast<api::Module>(m_handle), name.c_str());
        if (r == api::k_error_not_found) throw missing_kernel(name, m_label);
        if (r != api::k_success) fail(r, "cuModuleGetFunction of " + where);
        return function;
    }
    api::Kernel kernel = nullptr;
    const api::Result r = api.library_get_kernel(&kernel, static_cast<api::LibraryHandle>(m_handle), name.c_str());
    if (r == api::k_error_not_found) throw missing_kernel(name, m_label);
    if (r != api::k_success) fail(r, "cuLibraryGetKernel of " + where);
    // With lazy loading (the default since CUDA 12.2) the code for this GPU
    // is only picked when a context first needs it; do that now so "no
    // binary for this GPU" is reported at load time, before any dispatch.
    // The function lives in the device's primary context, which is never
    // released, so launches can use it directly: no per-launch lookup.
    driver.make_current(m_device);
    api::Function function = nullptr;
    if (const api::Result g = api.kernel_get_function(&function, kernel); g != api::k_success) {
        fail(g, "loading kernel " + where + " onto " + driver.describe_device(m_device));
    }
    return function;
}

namespace {

std::string describe_launch(Dim3 grid, Dim3 block, unsigned shared_bytes) {
    auto dims = [](Dim3 d) {
        return "(" + std::to_string(d.x) + "," + std::to_string(d.y) + "," + std::to_string(d.z) + ")";
    };
    return "grid " + dims(grid) + ", block " + dims(block) + ", " + std::to_string(shared_bytes) +
           " bytes of shared memory";
}

}  // namespace

void launch(void* kernel, Dim3 grid, Dim3 block, unsigned shared_bytes, void* stream, void** params, int device) {
    if (kernel == nullptr) throw Error(ErrorCode::usage, "launch of a null kernel handle");
    Driver& driver = Driver::instance();
    const api::EntryPoints& api = driver.api();
    driver.make_current(device);
    auto function = static_cast<api::Function>(kernel);  // Library::kernel hands out CUfunction handles
    const api::Result r = api.launch_kernel(function, grid.x, grid.y, grid.z, block.x, block.y, block.z, shared_bytes,
                                            static_cast<api::Stream>(stream), params, nullptr);
    if (r != api::k_success) {
        fail(r, "cuLaunchKernel with " + describe_launch(grid, block, shared_bytes) + " on " +
                    driver.describe_device(device));
    }
}

}  // namespace kernhub::cuda
