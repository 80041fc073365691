/* The whole-process baseline of bench_startup: start, dlopen + dlsym one
 * kernel file, exit. Built twice: as C, and as C++ linked with the shared
 * C++ runtime (bare_dlopen.cpp), the floor for any C++ embedder. */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char** argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s FILE SYMBOL\n", argv[0]);
        return 2;
    }
    void* handle = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        fprintf(stderr, "%s\n", dlerror());
        return 1;
    }
    return dlsym(handle, argv[2]) != NULL ? 0 : 1;
}
