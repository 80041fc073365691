// dlopen/dlsym and the dynamic loader's error text.
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "common/hint.hpp"
#include "common/text.hpp"
#include "elf/elf_inspect.hpp"
#include "kernhub/error.hpp"
#include "loader/loader.hpp"

namespace kernhub::loader {

// dlerror() is per thread and cleared by reading it; it may hold no text
// even after a failure (dlsym of a symbol whose value is null does that).
std::string take_dlerror() {
    const char* text = ::dlerror();
    return text ? std::string(text) : std::string();
}

bool is_code_symbol(const void* address) {
    Dl_info where{};
    void* entry = nullptr;  // the ElfW(Sym) of the nearest symbol
    if (::dladdr1(address, &where, &entry, RTLD_DL_SYMENT) == 0 || entry == nullptr) {
        return true;
    }
    const unsigned type = ELF64_ST_TYPE(static_cast<const ElfW(Sym)*>(entry)->st_info);
    return type == STT_FUNC || type == STT_GNU_IFUNC;
}

namespace {

// dlopen would refuse an object that needs a newer glibc with a terse
// "version not found"; say which version and what to do instead.
void check_glibc(const std::filesystem::path& path) {
    elf::ElfFacts facts = elf::inspect_elf_file(path);
    const std::string host = elf::host_glibc();
    if (!facts.max_glibc.empty() && !host.empty() && elf::compare_glibc(facts.max_glibc, host) > 0) {
        throw Error(ErrorCode::load, path.string() + " needs " + facts.max_glibc + " but this host has " + host +
                                         "; fetch a variant built for an older glibc or upgrade the host");
    }
}

// dlopen opens whatever the path names and would wait forever on a FIFO
// put there by another local user (or read a device). Opening without
// blocking and looking at the type first costs three system calls.
void require_regular_file(const std::filesystem::path& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        const int err = errno;
        if (err == ENOENT) {
            throw Error(ErrorCode::not_found, "shared object " + path.string() + " does not exist; fetch it again",
                        hint::action("fetch"));
        }
        throw Error(ErrorCode::load, "cannot open " + path.string() + "; check its permissions", std::strerror(err));
    }
    struct stat st {};
    const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
    ::close(fd);
    if (!regular) {
        throw Error(ErrorCode::load,
                    path.string() + " is not a regular file, so kernhub will not load it; remove it and fetch it again",
                    hint::action("fetch"));
    }
}

}  // namespace

std::string renamed(std::string text, const std::string& from, const std::string& to) {
    for (auto at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
        text.replace(at, from.size(), to);
    }
    return text;
}

namespace {
int dlopen_mode(Binding binding) {
    if (binding == Binding::now_global) return RTLD_NOW | RTLD_GLOBAL;
    return (binding == Binding::lazy ? RTLD_LAZY : RTLD_NOW) | RTLD_LOCAL;
}
}  // namespace

Library Library::open(const std::filesystem::path& path, Binding binding) {
    // A name without a slash makes dlopen search the library path instead of
    // opening the file just validated, so anchor it to the current directory.
    const std::filesystem::path load_path = path.has_parent_path() ? path : std::filesystem::path(".") / path;
    require_regular_file(load_path);
    take_dlerror();
    // RTLD_NOW surfaces missing symbols here rather than at the first call
    // on the hot path; RTLD_LOCAL keeps two kernels' symbols from colliding.
    void* handle = ::dlopen(load_path.c_str(), dlopen_mode(binding));
    if (handle != nullptr) return Library(handle, path);
    // The dynamic loader refuses every file our checks would refuse, so they
    // run only to explain a refusal: a wrong-arch, damaged or too-new file
    // gets our reason instead of the loader's terse one, and a load that
    // works pays for no second read of the file.
    const std::string reason = take_dlerror();
    validate_shared_object(path);
    check_glibc(path);
    throw Error(ErrorCode::load,
                "cannot load " + path.string() +
                    "; the dynamic loader refused it, usually because the kernel needs a "
                    "library or symbol this host lacks: install what the reason names, or "
                    "fetch a variant built for this host",
                reason);
}

Library Library::open_sealed(SealedImage image, const std::filesystem::path& label, const std::string& content_id,
                             Binding binding) {
    static std::mutex mutex;
    // content_id -> the handle, and the /proc path of its copy (open for
    // the process's life) that dlopen knows it by.
    static std::map<std::string, std::pair<void*, std::string>> loaded;
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = loaded.find(content_id); it != loaded.end()) {
        // Loaded before, perhaps RTLD_LOCAL; a dependency's load makes its
        // symbols global now (dlopen of a loaded library promotes it).
        if (binding == Binding::now_global) {
            take_dlerror();
            if (::dlopen(it->second.second.c_str(), RTLD_NOW | RTLD_NOLOAD | RTLD_GLOBAL) == nullptr) {
                throw Error(ErrorCode::load, "cannot make the symbols of " + label.string() + " global",
                            renamed(take_dlerror(), it->second.second, label.string()));
            }
        }
        return Library(it->second.first, label);
    }
    const std::string proc_path = image.proc_path();
    take_dlerror();
    void* handle = ::dlopen(proc_path.c_str(), dlopen_mode(binding));
    if (handle != nullptr) {
        loaded.emplace(content_id, std::make_pair(handle, proc_path));
        image.release();
        return Library(handle, label);
    }
    // The loader's text names the /proc path; name the file instead.
    const std::string reason = renamed(take_dlerror(), proc_path, label.string());
    // The checks read the copy that was refused, so they explain those bytes.
    try {
        validate_shared_object(proc_path);
        check_glibc(proc_path);
    } catch (const Error& e) {
        throw Error(e.code(), renamed(e.plain_message(), proc_path, label.string()), e.hint(), e.context());
    }
    throw Error(ErrorCode::load,
                "cannot load " + label.string() +
                    "; the dynamic loader refused it, usually because the kernel needs a "
                    "library or symbol this host lacks: install what the reason names, or "
                    "fetch a variant built for this host",
                reason);
}

void* Library::symbol(const std::string& name) const {
    take_dlerror();
    void* address = ::dlsym(m_handle, name.c_str());
    if (address == nullptr) {
        throw Error(ErrorCode::not_found,
                    "symbol " + quoted_name(name) + " not found in " + m_path.string() +
                        "; check the registry's \"symbol\" (or the symbol given to the load)",
                    take_dlerror());
    }
    return address;
}

}  // namespace kernhub::loader
