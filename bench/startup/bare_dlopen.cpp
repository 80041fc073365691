// bare_dlopen.c as a C++ program: the same work, but the executable needs
// the shared C++ runtime (libstdc++, libgcc_s) as any C++ embedder does; the
// exception path makes the link keep them.
#include <dlfcn.h>

#include <cstdio>
#include <stdexcept>
#include <string>

int main(int argc, char** argv) {
    try {
        if (argc != 3) throw std::invalid_argument(std::string("usage: ") + argv[0] + " FILE SYMBOL");
        void* handle = ::dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
        if (handle == nullptr) throw std::runtime_error(::dlerror());
        return ::dlsym(handle, argv[2]) != nullptr ? 0 : 1;
    } catch (const std::exception& error) {
        std::fprintf(stderr, "%s\n", error.what());
        return 1;
    }
}
