#include "loader/code_file.hpp"

#include <dlfcn.h>
#include <link.h>

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
    } else {
        code.path = resolved(info.dli_fname);
    }
    return code;
}

}  // namespace kernhub::loader
