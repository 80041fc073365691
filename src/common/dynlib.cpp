#include "common/dynlib.hpp"

#include <dlfcn.h>

namespace kernhub::dynlib {

namespace {

std::string take_dlerror() {
    const char* text = ::dlerror();
    return text != nullptr ? std::string(text) : std::string("no reason given");
}

}  // namespace

Library open_first(std::initializer_list<const char*> sonames, const std::string& needed_for,
                   const std::string& install_hint) {
    std::string tried;
    std::string reason;
    for (const char* soname : sonames) {
        ::dlerror();
        if (void* handle = ::dlopen(soname, RTLD_NOW | RTLD_LOCAL))
            return Library{handle, soname, needed_for, install_hint};
        reason = take_dlerror();
        tried += (tried.empty() ? "" : ", ") + std::string(soname);
    }
    throw Error(ErrorCode::internal, "cannot load " + tried + " " + needed_for + ": " + install_hint, reason);
}

void* find_symbol(const Library& library, const char* symbol) {
    ::dlerror();
    void* address = ::dlsym(library.handle, symbol);
    if (address == nullptr) {
        throw Error(ErrorCode::internal,
                    library.name + " lacks " + symbol + ", needed " + library.needed_for +
                        "; it is too old or not the expected library: " + library.install_hint,
                    take_dlerror());
    }
    return address;
}

}  // namespace kernhub::dynlib
