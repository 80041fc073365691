// ELF files mapped rather than read: a kernel .so can be hundreds of MiB,
// and the readers touch only its headers, dynamic segment, version tables
// and the sections they are asked for.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "elf/elf_binding.hpp"
#include "elf/elf_inspect.hpp"
#include "kernhub/error.hpp"

namespace kernhub::elf {

void with_mapped_file(const std::filesystem::path& path,
                      const std::function<void(const std::uint8_t* data, std::size_t size)>& read) {
    const std::string name = path.string();
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        throw Error(errno == ENOENT ? ErrorCode::not_found : ErrorCode::internal,
                    "cannot open " + name + ": " + std::strerror(errno));
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 || st.st_size <= 0) {
        ::close(fd);
        read(nullptr, 0);  // the readers report the empty file as malformed
        return;
    }
    const auto size = static_cast<std::size_t>(st.st_size);
    void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (map == MAP_FAILED) throw Error(ErrorCode::internal, "cannot map " + name + ": " + std::strerror(errno));
    try {
        read(static_cast<const std::uint8_t*>(map), size);
        ::munmap(map, size);
    } catch (...) {
        ::munmap(map, size);
        throw;
    }
}

ElfFacts inspect_elf_file(const std::filesystem::path& path) {
    ElfFacts facts;
    with_mapped_file(
        path, [&](const std::uint8_t* data, std::size_t size) { facts = inspect_elf(data, size, path.string()); });
    return facts;
}

}  // namespace kernhub::elf
