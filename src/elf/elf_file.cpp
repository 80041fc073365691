// inspect_elf over a file, mapped rather than read: a kernel .so can be
// hundreds of MiB, and the inspector touches only its headers, dynamic
// segment and version tables.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "elf/elf_inspect.hpp"
#include "kernhub/error.hpp"

namespace kernhub::elf {

ElfFacts inspect_elf_file(const std::filesystem::path& path) {
    const std::string name = path.string();
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        throw Error(errno == ENOENT ? ErrorCode::not_found : ErrorCode::internal,
                    "cannot open " + name + ": " + std::strerror(errno));
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 || st.st_size <= 0) {
        ::close(fd);
        return inspect_elf(nullptr, 0, name);  // reports the empty file as malformed
    }
    const auto size = static_cast<std::size_t>(st.st_size);
    void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (map == MAP_FAILED) throw Error(ErrorCode::internal, "cannot map " + name + ": " + std::strerror(errno));
    try {
        ElfFacts facts = inspect_elf(static_cast<const std::uint8_t*>(map), size, name);
        ::munmap(map, size);
        return facts;
    } catch (...) {
        ::munmap(map, size);
        throw;
    }
}

}  // namespace kernhub::elf
