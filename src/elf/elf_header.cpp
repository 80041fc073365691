// The ELF header checks shared by the loader and the inspector. The dynamic
// loader's own refusals for a foreign or damaged file are terse ("invalid ELF
// header", "wrong ELF class: ELFCLASS32"); checking here lets a message name
// what the file is, what this host needs and what to do about it.
#include "elf/elf_header.hpp"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

#include "common/hint.hpp"
#include "digest/digest.hpp"
#include "kernhub/error.hpp"

namespace kernhub::elf {

namespace {

// Enough for the larger (64-bit) header; a 32-bit header is a prefix of it.
constexpr std::size_t k_header_bytes = sizeof(Elf64_Ehdr);
static_assert(k_header_bytes == 64, "ELF64 header is 64 bytes");
static_assert(sizeof(Elf32_Ehdr) == 52, "ELF32 header is 52 bytes");
// e_type and e_machine sit at the same offsets in both classes.
static_assert(offsetof(Elf64_Ehdr, e_type) == offsetof(Elf32_Ehdr, e_type), "e_type offset");
static_assert(offsetof(Elf64_Ehdr, e_machine) == offsetof(Elf32_Ehdr, e_machine), "e_machine offset");

using HeaderBytes = std::array<unsigned char, k_header_bytes>;

// Names for the machines a kernel build is plausibly made for; others are
// reported as unknown, with their number where a message shows one.
struct MachineName {
    int machine;
    const char* name;
};
constexpr MachineName k_machines[] = {
    {EM_X86_64, "x86_64"}, {EM_AARCH64, "aarch64"}, {EM_CUDA, "CUDA"},       {EM_386, "i386"},
    {EM_ARM, "arm"},       {EM_PPC64, "ppc64"},     {EM_PPC, "ppc"},         {EM_S390, "s390"},
    {EM_RISCV, "riscv"},   {EM_MIPS, "mips"},       {EM_SPARCV9, "sparcv9"}, {EM_AMDGPU, "amdgpu"},
};

struct TypeName {
    int type;
    const char* name;
    const char* meaning;
};
constexpr TypeName k_types[] = {
    {ET_REL, "REL", "an object file"},
    {ET_EXEC, "EXEC", "an executable"},
    {ET_DYN, "DYN", "a shared object"},
    {ET_CORE, "CORE", "a core dump"},
};

const TypeName* find_type(int type) {
    for (const TypeName& entry : k_types) {
        if (entry.type == type) return &entry;
    }
    return nullptr;
}

int read_u16(const std::uint8_t* bytes, std::size_t offset, bool little_endian) {
    unsigned first = bytes[offset];
    unsigned second = bytes[offset + 1];
    return static_cast<int>(little_endian ? (second << 8) | first : (first << 8) | second);
}

HeaderParse refuse(std::string problem, std::uint64_t offset) {
    HeaderParse parse;
    parse.problem = std::move(problem);
    parse.offset = offset;
    return parse;
}

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
           "); the download is damaged or is not a kernel build: fetch it again, or check what it is";
}

[[noreturn]] void throw_open_failure(const std::filesystem::path& path, int err) {
    if (err == ENOENT || err == ENOTDIR) {
        throw Error(ErrorCode::not_found, "shared object " + path.string() + " does not exist; fetch it again",
                    hint::action("fetch"));
    }
    throw Error(ErrorCode::internal, "cannot open " + path.string() + "; check its permissions", std::strerror(err));
}

// Reads up to k_header_bytes; fewer only at end of file. Retries EINTR and
// short reads, which are legal for read(2) even on regular files.
std::size_t read_prefix(const std::filesystem::path& path, HeaderBytes& bytes) {
    FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
    if (fd.get() < 0) throw_open_failure(path, errno);
    struct stat info {};
    if (::fstat(fd.get(), &info) != 0) throw_open_failure(path, errno);
    if (!S_ISREG(info.st_mode)) {
        throw Error(ErrorCode::verification, not_elf(path, "not a regular file"), hint::action("inspect"));
    }
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

}  // namespace

// Checks magic, class, byte order and that the whole header for the file's
// class is present, so the fields read afterwards are real.
HeaderParse parse_elf_header(const std::uint8_t* data, std::size_t size) {
    if (size < SELFMAG || std::memcmp(data, ELFMAG, SELFMAG) != 0) {
        return refuse(size == 0 ? "the file is empty" : "no ELF magic number", 0);
    }
    if (size <= EI_DATA) return refuse("header truncated after " + std::to_string(size) + " bytes", size);
    const int elf_class = data[EI_CLASS];
    if (elf_class != ELFCLASS32 && elf_class != ELFCLASS64) {
        return refuse("unknown EI_CLASS " + std::to_string(elf_class), EI_CLASS);
    }
    const int order = data[EI_DATA];
    if (order != ELFDATA2LSB && order != ELFDATA2MSB) {
        return refuse("unknown byte order EI_DATA " + std::to_string(order), EI_DATA);
    }
    const std::size_t needed = elf_class == ELFCLASS64 ? sizeof(Elf64_Ehdr) : sizeof(Elf32_Ehdr);
    if (size < needed) {
        return refuse("header truncated after " + std::to_string(size) + " of " + std::to_string(needed) + " bytes",
                      size);
    }
    ElfHeaderFacts facts;
    facts.elf_class = elf_class;
    facts.little_endian = order == ELFDATA2LSB;
    facts.os_abi = data[EI_OSABI];
    facts.type = read_u16(data, offsetof(Elf64_Ehdr, e_type), facts.little_endian);
    facts.machine = read_u16(data, offsetof(Elf64_Ehdr, e_machine), facts.little_endian);
    HeaderParse parse;
    parse.header = facts;
    return parse;
}

ElfHeaderFacts read_elf_header(const std::filesystem::path& path) {
    HeaderBytes bytes{};
    const std::size_t got = read_prefix(path, bytes);
    HeaderParse parse = parse_elf_header(bytes.data(), got);
    if (!parse.header) throw Error(ErrorCode::verification, not_elf(path, parse.problem), hint::action("inspect"));
    return *parse.header;
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

std::string machine_name(int machine) {
    for (const MachineName& entry : k_machines) {
        if (entry.machine == machine) return entry.name;
    }
    return "unknown";
}

std::string type_name(int type) {
    const TypeName* entry = find_type(type);
    return entry != nullptr ? entry->name : digest::to_hex_literal(static_cast<std::uint64_t>(type));
}

std::string describe_type(int type) {
    if (type == ET_NONE) return "ET_NONE";
    const TypeName* entry = find_type(type);
    return entry != nullptr ? std::string("ET_") + entry->name + ", " + entry->meaning : "unknown";
}

}  // namespace kernhub::elf
