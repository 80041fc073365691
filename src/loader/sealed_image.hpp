// A private, sealed in-memory copy of a file for loading exactly the bytes
// that were verified (docs/cache.md "Loading exactly the verified bytes"): the copy is a memfd
// that nothing can change once sealed, so dlopen of /proc/self/fd/<memfd>
// maps the bytes that were hashed while they were copied.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace kernhub::loader {

class SealedImage {
public:
    // memfd_create(name): the name shows in /proc/<pid>/maps as
    // "/memfd:<name>". Throws Error(load) when the kernel refuses memfds.
    explicit SealedImage(const std::string& name);
    ~SealedImage();
    SealedImage(SealedImage&& other) noexcept;
    SealedImage& operator=(SealedImage&&) = delete;
    SealedImage(const SealedImage&) = delete;
    SealedImage& operator=(const SealedImage&) = delete;

    // Appends bytes; only before seal(). Throws Error(load) when the write fails.
    void append(const void* data, std::size_t size);
    // F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL: from here on
    // no one, this process included, can change the bytes or the size.
    void seal();
    std::uint64_t size() const noexcept { return m_size; }
    int fd() const noexcept { return m_fd; }
    // "/proc/self/fd/<fd>": the name the dynamic loader opens it by.
    std::string proc_path() const;
    // Gives up ownership: the descriptor stays open for the process's life.
    int release() noexcept;

private:
    int m_fd = -1;
    std::uint64_t m_size = 0;
    bool m_sealed = false;
};

}  // namespace kernhub::loader
