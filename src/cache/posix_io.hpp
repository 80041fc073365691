// Small POSIX helpers shared by the store module's files. Internal to store:
// they return errno values so each caller can phrase its own message.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>

namespace kernhub::cache::detail {

// `chars` lowercase hex characters from the OS random source. Not a seeded
// PRNG on purpose: forked processes must not pick the same temp names.
std::string random_hex(std::size_t chars);

// Writes all of `size` bytes, retrying short writes and EINTR.
// Returns 0 or the errno that stopped it.
int write_all(int fd, const void* data, std::size_t size);

// Makes a rename or create inside `dir` durable. Returns 0 or an errno;
// filesystems that cannot fsync a directory (EINVAL) count as success.
int fsync_directory(const std::filesystem::path& dir);

// Creates `dir` and its parents. Returns 0 or an errno.
int make_directories(const std::filesystem::path& dir);

std::string errno_text(int err);

// Owns one file descriptor (or none, -1) and closes it.
class UniqueFd {
public:
    explicit UniqueFd(int fd) : m_fd(fd) {}
    ~UniqueFd();
    UniqueFd(const UniqueFd&) = delete;
    UniqueFd& operator=(const UniqueFd&) = delete;
    int get() const { return m_fd; }

private:
    int m_fd;
};

}  // namespace kernhub::cache::detail
