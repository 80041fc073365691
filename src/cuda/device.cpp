// Devices and their primary contexts.
#include <mutex>
#include <string>

#include "cuda/driver.hpp"
#include "cuda/entry_points.hpp"

namespace kernhub::cuda {

namespace {

// cuDeviceGetName's buffer; real names are well under 100 characters.
constexpr int k_device_name_capacity = 256;

Device query_device(const api::EntryPoints& api, int index) {
    const std::string where = "device " + std::to_string(index);
    api::DeviceOrdinal handle = 0;
    if (const api::Result r = api.device_get(&handle, index); r != api::k_success) fail(r, "cuDeviceGet for " + where);
    Device device;
    device.index = index;
    char name[k_device_name_capacity] = {};
    if (const api::Result r = api.device_get_name(name, k_device_name_capacity, handle); r != api::k_success) {
        fail(r, "cuDeviceGetName for " + where);
    }
    device.name = name;
    if (const api::Result r = api.device_get_attribute(&device.cc_major, api::k_attribute_cc_major, handle);
        r != api::k_success) {
        fail(r, "reading the compute capability of " + where);
    }
    if (const api::Result r = api.device_get_attribute(&device.cc_minor, api::k_attribute_cc_minor, handle);
        r != api::k_success) {
        fail(r, "reading the compute capability of " + where);
    }
    return device;
}

}  // namespace

DriverInfo Driver::info() const {
    DriverInfo info;
    info.version = m_version;
    int count = 0;
    if (const api::Result r = m_api.device_get_count(&count); r != api::k_success) {
        fail(r, "cuDeviceGetCount in the CUDA driver " + m_library_path);
    }
    for (int index = 0; index < count; ++index) info.devices.push_back(query_device(m_api, index));
    return info;
}

std::string Driver::describe_device(int device) const {
    try {
        const Device facts = query_device(m_api, device);
        return "device " + std::to_string(device) + " (" + facts.name + ", compute capability " +
               std::to_string(facts.cc_major) + "." + std::to_string(facts.cc_minor) + ")";
    } catch (const Error&) {
        // Describing is for an error message already being built; a device
        // the driver cannot describe is named by its index alone.
        return "device " + std::to_string(device);
    }
}

void Driver::make_current(int device) {
    if (device < 0 || device >= k_max_devices) {
        throw Error(ErrorCode::usage, "CUDA device " + std::to_string(device) + " is out of range");
    }
    api::Context context = m_primary_contexts[device].load(std::memory_order_acquire);
    if (context == nullptr) {
        std::lock_guard<std::mutex> lock(m_context_mutex);
        context = m_primary_contexts[device].load(std::memory_order_relaxed);
        if (context == nullptr) {
            api::DeviceOrdinal handle = 0;
            if (const api::Result r = m_api.device_get(&handle, device); r != api::k_success) {
                fail(r, "selecting device " + std::to_string(device));
            }
            // Retained once and never released: releasing the last
            // reference destroys the context, and with it every loaded
            // module and buffer other code may still be using.
            if (const api::Result r = m_api.primary_ctx_retain(&context, handle); r != api::k_success) {
                fail(r, "retaining the primary context of " + describe_device(device));
            }
            m_primary_contexts[device].store(context, std::memory_order_release);
        }
    }
    if (const api::Result r = m_api.ctx_set_current(context); r != api::k_success) {
        fail(r, "making the primary context of " + describe_device(device) + " current");
    }
}

}  // namespace kernhub::cuda
