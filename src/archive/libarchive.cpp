#include "archive/libarchive.hpp"

#include "common/dynlib.hpp"

namespace kernhub::archive::detail {

namespace {

LibArchive bind_libarchive() {
    const dynlib::Library lib =
        dynlib::open_first({"libarchive.so.13"}, "to read or write cache archives (cache export, cache import)",
                           "install libarchive13 (Debian, Ubuntu) or libarchive (other systems)");
    LibArchive api;
#define KERNHUB_LIBARCHIVE_RESOLVE(name) dynlib::resolve(lib, #name, api.name);
    KERNHUB_LIBARCHIVE_FUNCTIONS(KERNHUB_LIBARCHIVE_RESOLVE)
#undef KERNHUB_LIBARCHIVE_RESOLVE
    return api;
}

}  // namespace

const LibArchive& libarchive() {
    return dynlib::bound<LibArchive, bind_libarchive>();
}

}  // namespace kernhub::archive::detail
