#include "loader/sealed_image.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "kernhub/error.hpp"

namespace kernhub::loader {

namespace {

// MFD_EXEC (Linux 6.3): with vm.memfd_noexec=2 a memfd without it cannot be
// mapped executable. Older kernels refuse the unknown flag with EINVAL, so
// the plain call is the fallback.
constexpr unsigned k_mfd_exec = 0x0010U;

int make_memfd(const std::string& name) {
    int fd = ::memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING | k_mfd_exec);
    if (fd < 0 && errno == EINVAL) fd = ::memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
    return fd;
}

}  // namespace

SealedImage::SealedImage(const std::string& name) : m_fd(make_memfd("kernhub:" + name)) {
    if (m_fd < 0) {
        throw Error(ErrorCode::load,
                    "cannot make an in-memory copy of " + name +
                        " to load exactly the verified bytes (memfd_create failed); unset KERNHUB_VERIFY_ON_LOAD "
                        "or allow memfds on this host",
                    std::strerror(errno));
    }
}

SealedImage::~SealedImage() {
    if (m_fd >= 0) ::close(m_fd);
}

SealedImage::SealedImage(SealedImage&& other) noexcept
    : m_fd(other.m_fd), m_size(other.m_size), m_sealed(other.m_sealed) {
    other.m_fd = -1;
}

void SealedImage::append(const void* data, std::size_t size) {
    if (m_sealed) throw Error(ErrorCode::internal, "a sealed kernel image cannot grow");
    const char* bytes = static_cast<const char*>(data);
    while (size > 0) {
        const ssize_t n = ::write(m_fd, bytes, size);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            throw Error(ErrorCode::load, "cannot copy a kernel into memory before loading it; check free memory",
                        std::strerror(n < 0 ? errno : ENOSPC));
        }
        bytes += n;
        size -= static_cast<std::size_t>(n);
        m_size += static_cast<std::uint64_t>(n);
    }
}

void SealedImage::seal() {
    if (::fcntl(m_fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
        throw Error(ErrorCode::load, "cannot seal the in-memory copy of a kernel; unset KERNHUB_VERIFY_ON_LOAD",
                    std::strerror(errno));
    }
    m_sealed = true;
}

std::string SealedImage::proc_path() const {
    return "/proc/self/fd/" + std::to_string(m_fd);
}

int SealedImage::release() noexcept {
    const int fd = m_fd;
    m_fd = -1;
    return fd;
}

}  // namespace kernhub::loader
