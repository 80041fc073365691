// Finding and loading LibTorch at run time; libkernhub never links it.
#include "loader/torch_runtime.hpp"

#include <dlfcn.h>
#include <link.h>

#include <cstdint>
#include <fstream>
#include <initializer_list>
#include <sstream>

#include "kernhub/error.hpp"
#include "loader/loader.hpp"
#include "torchenv/torch_facts.hpp"

namespace kernhub::loader {

namespace {

// c10::Error::Error(c10::SourceLocation, std::string) in each C++ ABI: one
// of the two is what libc10.so exports.
constexpr const char* k_c10_error_cxx11 =
    "_ZN3c105ErrorC1ENS_14SourceLocationENSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE";
constexpr const char* k_c10_error_cxx98 = "_ZN3c105ErrorC1ENS_14SourceLocationESs";

// "2.15.0" from "2.15.0+cu132", "2.15.0a0+git..." or "2.15.0\n".
bool parse_version(const std::string& text, TorchRuntime& runtime) {
    int major = 0;
    int minor = 0;
    int patch = 0;
    char dot1 = 0;
    char dot2 = 0;
    std::istringstream in(text);
    if (!(in >> major >> dot1 >> minor) || dot1 != '.') return false;
    if (!(in >> dot2 >> patch) || dot2 != '.') patch = 0;
    runtime.major = major;
    runtime.minor = minor;
    runtime.version = std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
    return true;
}

// The version written beside the library: a torch package's version.py
// (__version__ = '2.15.0+cu132') or a LibTorch zip's build-version.
void version_from_files(const std::filesystem::path& lib_dir, TorchRuntime& runtime) {
    const std::filesystem::path root = lib_dir.parent_path();
    std::ifstream version_py(root / "version.py");
    for (std::string line; std::getline(version_py, line);) {
        const std::size_t quote = line.find_first_of("'\"");
        if (line.rfind("__version__", 0) == 0 && quote != std::string::npos &&
            parse_version(line.substr(quote + 1), runtime)) {
            runtime.version_source = (root / "version.py").string();
            return;
        }
    }
    std::ifstream build_version(root / "build-version");
    std::string text;
    if (std::getline(build_version, text) && parse_version(text, runtime)) {
        runtime.version_source = (root / "build-version").string();
    }
}

std::string loaded_path(void* handle) {
    struct link_map* map = nullptr;
    if (::dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || map == nullptr || map->l_name == nullptr) return {};
    return map->l_name;
}

}  // namespace

std::optional<TorchRuntime> torch_in_process() {
    void* torch = ::dlopen("libtorch_cpu.so", RTLD_LAZY | RTLD_NOLOAD);
    if (torch == nullptr) {
        take_dlerror();
        return std::nullopt;
    }
    TorchRuntime runtime;
    runtime.library = loaded_path(torch);
    // The stable C shim (torch 2.9 and later): TORCH_ABI_VERSION, one byte
    // each of major, minor and patch at the top.
    using AbiVersion = std::uint64_t (*)();
    if (auto* abi_version = reinterpret_cast<AbiVersion>(::dlsym(torch, "aoti_torch_abi_version"))) {
        const std::uint64_t packed = abi_version();
        runtime.major = static_cast<int>(packed >> 56U);
        runtime.minor = static_cast<int>((packed >> 48U) & 0xffU);
        runtime.version = std::to_string(runtime.major) + "." + std::to_string(runtime.minor) + "." +
                          std::to_string((packed >> 40U) & 0xffU);
        runtime.version_source = "aoti_torch_abi_version()";
    } else if (!runtime.library.empty()) {
        version_from_files(std::filesystem::path(runtime.library).parent_path(), runtime);
    }
    if (::dlsym(torch, k_c10_error_cxx11) != nullptr) {
        runtime.cxx11_abi = true;
    } else if (::dlsym(torch, k_c10_error_cxx98) != nullptr) {
        runtime.cxx11_abi = false;
    }
    take_dlerror();
    ::dlclose(torch);  // drops the reference RTLD_NOLOAD took; the library stays
    return runtime;
}

namespace {

// Why `path` (after symbolic links) is not a regular file to open: "" when
// it is one.
std::string not_a_library(const std::filesystem::path& path) {
    std::error_code ec;
    switch (std::filesystem::status(path, ec).type()) {
        case std::filesystem::file_type::regular:
            return {};
        case std::filesystem::file_type::not_found:
            return "it does not exist";
        case std::filesystem::file_type::directory:
            return "it is a folder, not a file";
        case std::filesystem::file_type::fifo:
            return "it is a FIFO, not a file (opening it would wait for a writer)";
        case std::filesystem::file_type::block:
        case std::filesystem::file_type::character:
            return "it is a device, not a file";
        default:
            return ec ? "it cannot be read (" + ec.message() + ")" : "it is not a regular file";
    }
}

// Opens root/lib/<names...> in order, RTLD_NOW | RTLD_GLOBAL: an op
// library's NEEDED entries (no RPATH) resolve to them by their sonames.
// Each must be a regular file (after symbolic links): dlopen would block
// on a FIFO, and a folder of that name only gets a vaguer refusal.
void open_globally(const std::filesystem::path& lib, std::initializer_list<const char*> names, const char* what) {
    for (const char* name : names) {  // all checked before any is opened
        if (const std::string why = not_a_library(lib / name); !why.empty()) {
            throw Error(ErrorCode::load, std::string("cannot load ") + what + " " + (lib / name).string() + ": " + why +
                                             "; name another torch");
        }
    }
    for (const char* name : names) {
        take_dlerror();
        if (::dlopen((lib / name).c_str(), RTLD_NOW | RTLD_GLOBAL) == nullptr) {
            throw Error(ErrorCode::load,
                        std::string("cannot load ") + what + " " + (lib / name).string() +
                            "; install the libraries it needs (the reason names them) or name another torch",
                        take_dlerror());
        }
    }
}

}  // namespace

std::optional<std::string> torch_cuda_version(const std::string& library) {
    if (library.empty()) return std::nullopt;
    try {
        const std::filesystem::path root = std::filesystem::path(library).parent_path().parent_path();
        const torchenv::FoundTorch found = torchenv::read_torch_dir(root, "LibTorch's folder");
        // A version.py says "no CUDA" explicitly (cuda = None); a
        // build-version without a +cu tag says nothing.
        const bool explicit_none = std::filesystem::path(found.info.source).filename() == "version.py";
        if (!found.info.cuda.empty() || explicit_none) return found.info.cuda;
    } catch (const Error&) {
        // Not a torch package or LibTorch root: unknown.
    }
    return std::nullopt;
}

bool torch_cuda_in_process() {
    void* torch_cuda = ::dlopen("libtorch_cuda.so", RTLD_LAZY | RTLD_NOLOAD);
    if (torch_cuda == nullptr) {
        take_dlerror();
        return false;
    }
    ::dlclose(torch_cuda);  // drops the reference RTLD_NOLOAD took
    return true;
}

void open_torch_cuda(const std::filesystem::path& root, const std::string& libtorch_cpu) {
    namespace fs = std::filesystem;
    const fs::path lib = root / "lib";
    std::error_code ec;
    if (!fs::exists(lib / "libtorch_cuda.so", ec)) {
        throw Error(ErrorCode::load, "the torch at " + root.string() + " is not a CUDA build (" +
                                         (lib / "libtorch_cuda.so").string() +
                                         " does not exist), and a CUDA variant's op library needs LibTorch's "
                                         "CUDA part; name a CUDA build of torch, or fetch a CPU variant");
    }
    // The files themselves, symbolic links followed: a folder of links into
    // two torches is not one torch, and the CUDA part of one would bind to
    // the CPU part of the other by soname.
    const fs::path cpu = fs::canonical(libtorch_cpu, ec);
    for (const char* name : {"libc10_cuda.so", "libtorch_cuda.so"}) {
        if (!fs::exists(lib / name, ec)) continue;  // open_globally says it is missing
        const fs::path real = fs::canonical(lib / name, ec);
        if (cpu.empty() || real.parent_path() != cpu.parent_path()) {
            throw Error(ErrorCode::load, "cannot load LibTorch's CUDA library " + (lib / name).string() +
                                             ": its file is in " + real.parent_path().string() +
                                             ", and this process's libtorch_cpu.so (" +
                                             (cpu.empty() ? libtorch_cpu : cpu.string()) +
                                             ") in another folder, so they may be parts of different torches; "
                                             "name a torch whose libraries are in one folder");
        }
    }
    open_globally(lib, {"libc10_cuda.so", "libtorch_cuda.so"}, "LibTorch's CUDA library");
}

void open_torch(const std::filesystem::path& root) {
    const std::filesystem::path lib = root / "lib";
    if (const std::string why = not_a_library(lib / "libtorch_cpu.so"); !why.empty()) {
        throw Error(ErrorCode::not_found, "no LibTorch at " + root.string() + " (" +
                                              (lib / "libtorch_cpu.so").string() + ": " + why +
                                              "); name a torch package folder or a LibTorch root");
    }
    open_globally(lib, {"libc10.so", "libtorch_cpu.so"}, "LibTorch's");
}

}  // namespace kernhub::loader
