#include "loader/code_file.hpp"

#include <dlfcn.h>
#include <link.h>
#include <unistd.h>
#include <climits>

#include <string>
#include <system_error>

namespace kernhub::loader {

namespace {

// The link map of the executable itself: dlopen(NULL) is its handle.
const link_map* main_program_map() {
    void* self = ::dlopen(nullptr, RTLD_LAZY | RTLD_NOLOAD);
    if (self == nullptr) return nullptr;
    link_map* map = nullptr;
    if (::dlinfo(self, RTLD_DI_LINKMAP, &map) != 0) map = nullptr;
    ::dlclose(self);
    return map;
}

// The dynamic loader keeps the name it opened a library by. Through a
// relative LD_LIBRARY_PATH entry or dlopen("./libkernhub.so") that name is
// relative, and it means another file once the program changes directory.
// So the working directory is read while the library is being loaded
// (initialisers run before dlopen returns or main starts), and only then.
// noexcept: it runs during static initialisation, where an exception would
// end the process anyway (a failed allocation is the only one possible).
std::string directory_at_load() noexcept {
    static const char anchor = 0;
    Dl_info info{};
    if (::dladdr(&anchor, &info) == 0 || info.dli_fname == nullptr || info.dli_fname[0] == '/') return {};
    char buffer[PATH_MAX];
    return ::getcwd(buffer, sizeof buffer) != nullptr ? std::string(buffer) : std::string();
}

// init_priority: before the default-priority initialisers of this linked
// object, so a Client made by one of them (a static backend table) sees it.
const std::string g_directory_at_load __attribute__((init_priority(101))) = directory_at_load();

std::filesystem::path resolved(const std::filesystem::path& path) {
    std::error_code ec;
    std::filesystem::path real = std::filesystem::weakly_canonical(std::filesystem::absolute(path, ec), ec);
    return ec ? std::filesystem::path() : real;
}

}  // namespace

CodeFile file_containing(const void* address) {
    Dl_info info{};
    link_map* map = nullptr;
    if (::dladdr1(address, &info, reinterpret_cast<void**>(&map), RTLD_DL_LINKMAP) == 0 || map == nullptr) {
        return {};
    }
    CodeFile code;
    code.main_program = map == main_program_map();
    if (code.main_program || info.dli_fname == nullptr || info.dli_fname[0] == '\0') {
        code.main_program = true;
        code.path = resolved("/proc/self/exe");
    } else if (info.dli_fname[0] == '/') {
        code.path = resolved(info.dli_fname);
    } else if (!g_directory_at_load.empty()) {
        code.path = resolved(std::filesystem::path(g_directory_at_load) / info.dli_fname);
    }
    return code;
}

}  // namespace kernhub::loader
