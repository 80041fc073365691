// Device memory for tests and examples: one owner per allocation, and
// synchronous copies on the legacy default stream.
#include <string>
#include <utility>

#include "cuda/driver.hpp"
#include "cuda/entry_points.hpp"
#include "kernhub/error.hpp"

namespace kernhub::cuda {

DeviceBuffer::DeviceBuffer(std::size_t bytes, int device) : m_size(bytes), m_device(device) {
    // cuMemAlloc refuses 0 bytes; an empty buffer needs no device memory.
    if (bytes == 0) return;
    Driver& driver = Driver::instance();
    driver.make_current(device);
    api::DevicePtr address = 0;
    if (const api::Result r = driver.api().mem_alloc(&address, bytes); r != api::k_success) {
        fail(r, "cuMemAlloc of " + std::to_string(bytes) + " bytes on " + driver.describe_device(device));
    }
    m_address = address;
}

DeviceBuffer::~DeviceBuffer() {
    release();
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : m_address(std::exchange(other.m_address, 0)), m_size(std::exchange(other.m_size, 0)), m_device(other.m_device) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
        release();
        m_address = std::exchange(other.m_address, 0);
        m_size = std::exchange(other.m_size, 0);
        m_device = other.m_device;
    }
    return *this;
}

void DeviceBuffer::release() noexcept {
    if (m_address == 0) return;
    try {
        Driver& driver = Driver::instance();
        driver.make_current(m_device);
        driver.api().mem_free(m_address);
    } catch (...) {
        // A destructor cannot report; the memory goes when the context does.
    }
    m_address = 0;
}

namespace {

void check_fits(std::size_t bytes, const DeviceBuffer& buffer, const char* direction) {
    if (bytes > buffer.size()) {
        throw Error(ErrorCode::usage, std::string("copy ") + direction + " of " + std::to_string(bytes) +
                                          " bytes exceeds the device buffer of " + std::to_string(buffer.size()) +
                                          " bytes");
    }
}

}  // namespace

void copy_to_device(DeviceBuffer& destination, const void* source, std::size_t bytes) {
    check_fits(bytes, destination, "to the device");
    if (bytes == 0) return;
    Driver& driver = Driver::instance();
    driver.make_current(destination.device());
    if (const api::Result r = driver.api().memcpy_htod(destination.address(), source, bytes); r != api::k_success) {
        fail(r,
             "cuMemcpyHtoD of " + std::to_string(bytes) + " bytes to " + driver.describe_device(destination.device()));
    }
}

void copy_to_host(void* destination, const DeviceBuffer& source, std::size_t bytes) {
    check_fits(bytes, source, "to the host");
    if (bytes == 0) return;
    Driver& driver = Driver::instance();
    driver.make_current(source.device());
    if (const api::Result r = driver.api().memcpy_dtoh(destination, source.address(), bytes); r != api::k_success) {
        fail(r, "cuMemcpyDtoH of " + std::to_string(bytes) + " bytes from " + driver.describe_device(source.device()));
    }
}

void synchronize(int device) {
    Driver& driver = Driver::instance();
    driver.make_current(device);
    // Errors of earlier asynchronous launches (a faulting kernel) surface here.
    if (const api::Result r = driver.api().ctx_synchronize(); r != api::k_success) {
        fail(r, "synchronising " + driver.describe_device(device));
    }
}

}  // namespace kernhub::cuda
