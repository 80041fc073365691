#include "api/head_first_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "kernhub/error.hpp"

namespace kernhub::api {

HeadFirstFile::HeadFirstFile(const std::string& path) : m_path(path) {
    m_fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (m_fd < 0) {
        const int err = errno;
        if (err == ENOENT || err == ENOTDIR) {
            throw Error(ErrorCode::not_found, "file " + path + " does not exist or is not a regular file");
        }
        throw Error(ErrorCode::internal, "cannot open " + path + "; check permissions", std::strerror(err));
    }
    struct stat st {};
    if (::fstat(m_fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(m_fd);
        throw Error(ErrorCode::not_found, "file " + path + " does not exist or is not a regular file");
    }
    m_size = static_cast<std::uint64_t>(st.st_size);
}

HeadFirstFile::~HeadFirstFile() {
    ::close(m_fd);
}

std::size_t HeadFirstFile::read_at(std::uint8_t* out, std::size_t n, std::uint64_t offset) const {
    std::size_t have = 0;
    while (have < n) {
        const ssize_t got = ::pread(m_fd, out + have, n - have, static_cast<off_t>(offset + have));
        if (got < 0 && errno == EINTR) continue;
        if (got < 0)
            throw Error(ErrorCode::internal, "cannot read " + m_path + "; check the disk", std::strerror(errno));
        if (got == 0) break;  // shrank since fstat
        have += static_cast<std::size_t>(got);
    }
    return have;
}

std::vector<std::uint8_t> HeadFirstFile::head(std::size_t n) const {
    std::vector<std::uint8_t> out(static_cast<std::size_t>(std::min<std::uint64_t>(n, m_size)));
    out.resize(read_at(out.data(), out.size(), 0));
    return out;
}

const std::vector<std::uint8_t>& HeadFirstFile::read_all() {
    if (m_read) return m_bytes;
    if (m_size > k_max_inspect_bytes) {
        throw Error(ErrorCode::usage, m_path + " has " + std::to_string(m_size) + " bytes, more than the " +
                                          std::to_string(k_max_inspect_bytes >> 30) +
                                          " GiB kernhub inspects (k_max_inspect_bytes); inspect a smaller file");
    }
    m_bytes.resize(static_cast<std::size_t>(m_size));
    m_bytes.resize(read_at(m_bytes.data(), m_bytes.size(), 0));
    m_read = true;
    return m_bytes;
}

}  // namespace kernhub::api
