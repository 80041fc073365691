// ELF header checks that run before dlopen. The dynamic loader's own
// refusals for a foreign or damaged file are terse ("invalid ELF header",
// "wrong ELF class: ELFCLASS32"); checking here lets the message name what
// the file is, what this host needs and what to do about it.
#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "kernhub/error.hpp"
#include "loader/loader.hpp"

namespace kernhub::loader {

namespace {

// Enough for the larger (64-bit) header; a 32-bit header is a prefix of it.
constexpr std::size_t k_header_bytes = sizeof(Elf64_Ehdr);
static_assert(k_header_bytes == 64, "ELF64 header is 64 bytes");
static_assert(sizeof(Elf32_Ehdr) == 52, "ELF32 header is 52 bytes");
// e_type and e_machine sit at the same offsets in both classes.
static_assert(offsetof(Elf64_Ehdr, e_type) == offsetof(Elf32_Ehdr, e_type), "e_type offset");
static_assert(offsetof(Elf64_Ehdr, e_machine) == offsetof(Elf32_Ehdr, e_machine), "e_machine offset");

using HeaderBytes = std::array<unsigned char, k_header_bytes>;

// Owns a file descriptor for the duration of one read.
class FileDescriptor {
public:
    explicit FileDescriptor(int fd) noexcept : m_fd(fd) {}
    ~FileDescriptor() {
        if (m_fd >= 0) ::close(m_fd);
    }
    FileDescriptor(const FileDescriptor&) = delete;
    FileDescriptor& operator=(const FileDescriptor&) = delete;
    int get() const noexcept { return m_fd; }

private:
    int m_fd;
};

std::string not_elf(const std::filesystem::path& path, const std::string& why) {
    return path.string() + " is not an ELF file (" + why +
           "); the download is damaged or is not a kernel build: run `kernhub cache verify` "
           "or `kernhub fetch` again";
}

[[noreturn]] void throw_open_failure(const std::filesystem::path& path, int err) {
    if (err == ENOENT || err == ENOTDIR) {
        throw Error(ErrorCode::not_found,
                    "shared object " + path.string() + " does not exist; run `kernhub fetch` again");
    }
    throw Error(ErrorCode::internal, "cannot open " + path.string() + "; check its permissions", std::strerror(err));
}

// Reads up to k_header_bytes; fewer only at end of file. Retries EINTR and
// short reads, which are legal for read(2) even on regular files.
std::size_t read_prefix(const std::filesystem::path& path, HeaderBytes& bytes) {
    FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) throw_open_failure(path, errno);
    struct stat info {};
    if (::fstat(fd.get(), &info) != 0) throw_open_failure(path, errno);
    if (!S_ISREG(info.st_mode)) throw Error(ErrorCode::verification, not_elf(path, "not a regular file"));
    std::size_t got = 0;
    while (got < bytes.size()) {
        ssize_t n = ::read(fd.get(), bytes.data() + got, bytes.size() - got);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            throw Error(ErrorCode::internal, "cannot read " + path.string() + "; check the disk", std::strerror(errno));
        }
        if (n == 0) break;
        got += static_cast<std::size_t>(n);
    }
    return got;
}

int read_u16(const HeaderBytes& bytes, std::size_t offset, bool little_endian) {
    unsigned first = bytes[offset];
    unsigned second = bytes[offset + 1];
    return static_cast<int>(little_endian ? (second << 8) | first : (first << 8) | second);
}

// Checks magic, class, byte order and that the whole header for the file's
// class is present, so the fields read afterwards are real.
void check_identification(const std::filesystem::path& path, const HeaderBytes& bytes, std::size_t got) {
    if (got < SELFMAG || std::memcmp(bytes.data(), ELFMAG, SELFMAG) != 0) {
        std::string why = got == 0 ? "the file is empty" : "no ELF magic number";
        throw Error(ErrorCode::verification, not_elf(path, why));
    }
    if (got <= EI_DATA) {
        throw Error(ErrorCode::verification, not_elf(path, "header truncated after " + std::to_string(got) + " bytes"));
    }
    int elf_class = bytes[EI_CLASS];
    if (elf_class != ELFCLASS32 && elf_class != ELFCLASS64) {
        throw Error(ErrorCode::verification, not_elf(path, "unknown EI_CLASS " + std::to_string(elf_class)));
    }
    int data = bytes[EI_DATA];
    if (data != ELFDATA2LSB && data != ELFDATA2MSB) {
        throw Error(ErrorCode::verification, not_elf(path, "unknown byte order EI_DATA " + std::to_string(data)));
    }
    std::size_t needed = elf_class == ELFCLASS64 ? sizeof(Elf64_Ehdr) : sizeof(Elf32_Ehdr);
    if (got < needed) {
        throw Error(ErrorCode::verification, not_elf(path, "header truncated after " + std::to_string(got) + " of " +
                                                               std::to_string(needed) + " bytes"));
    }
}

// Names for the machines a kernel build is plausibly made for; others are
// reported by number alone.
std::string machine_name(int machine) {
    switch (machine) {
        case EM_X86_64:
            return "x86_64";
        case EM_AARCH64:
            return "aarch64";
        case EM_CUDA:
            return "CUDA";
        case EM_386:
            return "i386";
        case EM_ARM:
            return "arm";
        case EM_PPC64:
            return "ppc64";
        case EM_S390:
            return "s390x";
        case EM_RISCV:
            return "riscv";
        default:
            return "an unknown machine";
    }
}

std::string type_name(int type) {
    switch (type) {
        case ET_NONE:
            return "ET_NONE";
        case ET_REL:
            return "ET_REL, an object file";
        case ET_EXEC:
            return "ET_EXEC, an executable";
        case ET_DYN:
            return "ET_DYN, a shared object";
        case ET_CORE:
            return "ET_CORE, a core dump";
        default:
            return "unknown";
    }
}

}  // namespace

ElfHeaderFacts read_elf_header(const std::filesystem::path& path) {
    HeaderBytes bytes{};
    std::size_t got = read_prefix(path, bytes);
    check_identification(path, bytes, got);
    ElfHeaderFacts facts;
    facts.elf_class = bytes[EI_CLASS];
    facts.little_endian = bytes[EI_DATA] == ELFDATA2LSB;
    facts.os_abi = bytes[EI_OSABI];
    facts.type = read_u16(bytes, offsetof(Elf64_Ehdr, e_type), facts.little_endian);
    facts.machine = read_u16(bytes, offsetof(Elf64_Ehdr, e_machine), facts.little_endian);
    return facts;
}

int host_elf_machine() {
#if defined(__x86_64__)
    return EM_X86_64;
#elif defined(__aarch64__)
    return EM_AARCH64;
#else
    // Any other architecture: the running executable was built for this host.
    static const int machine = read_elf_header("/proc/self/exe").machine;
    return machine;
#endif
}

void validate_shared_object(const std::filesystem::path& path) {
    const ElfHeaderFacts facts = read_elf_header(path);
    const std::string name = path.string();
    if (facts.elf_class != ELFCLASS64) {
        throw Error(ErrorCode::verification,
                    name + " is a 32-bit ELF object (EI_CLASS " + std::to_string(facts.elf_class) +
                        "), kernhub loads only 64-bit shared objects; fetch the variant for this host");
    }
    if (!facts.little_endian) {
        throw Error(ErrorCode::verification, name +
                                                 " is a big-endian ELF object, this host needs little-endian; "
                                                 "fetch the variant for this host");
    }
    if (facts.type != ET_DYN) {
        throw Error(ErrorCode::verification, name + " is not a shared object (e_type " + std::to_string(facts.type) +
                                                 ", " + type_name(facts.type) + "; expected ET_DYN " +
                                                 std::to_string(ET_DYN) + "); the kernel variant must ship a .so");
    }
    const int host = host_elf_machine();
    if (facts.machine != host) {
        throw Error(ErrorCode::verification, name + " is built for " + machine_name(facts.machine) + " (e_machine " +
                                                 std::to_string(facts.machine) + "), this host is " +
                                                 machine_name(host) + " (e_machine " + std::to_string(host) +
                                                 "); fetch the variant built for this host");
    }
}

}  // namespace kernhub::loader
