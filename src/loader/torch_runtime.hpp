// The LibTorch of this process, found without linking it: libtorch_cpu.so
// by its soname among the loaded objects (dlopen RTLD_NOLOAD), its version
// from the stable C shim's aoti_torch_abi_version() or the files beside
// it, and its C++ ABI from which spelling of a c10 symbol libc10.so
// exports. For the torch-op kind (torch_op.cpp); docs/kernels.md,
// "Torch ops".
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace kernhub::loader {

struct TorchRuntime {
    std::string library;  // libtorch_cpu.so as the dynamic loader loaded it
    int major = 0;
    int minor = 0;
    std::string version;  // "2.15.0"; "" when unknown
    // Where the version came from ("aoti_torch_abi_version()", or a file).
    std::string version_source;
    // _GLIBCXX_USE_CXX11_ABI of its libc10.so; nullopt when not told.
    std::optional<bool> cxx11_abi;
};

// This process's LibTorch, or nullopt when libtorch_cpu.so is not loaded.
std::optional<TorchRuntime> torch_in_process();

// The CUDA version the LibTorch at `library` (libtorch_cpu.so) was built
// with, read from the torch files above its folder (torchenv::read_torch_dir):
// "13.2", "" when version.py says it has none, nullopt when they do not tell.
// Reads files: asked only for a CUDA variant.
std::optional<std::string> torch_cuda_version(const std::string& library);

// Loads LibTorch from a torch package folder or LibTorch root: its lib/
// libc10.so, then lib/libtorch_cpu.so, RTLD_NOW | RTLD_GLOBAL, kept for the
// life of the process. Error(not_found) when `root` has no
// lib/libtorch_cpu.so, Error(load) when the dynamic loader refuses it.
void open_torch(const std::filesystem::path& root);

// Whether LibTorch's CUDA part (libtorch_cuda.so) is loaded in this process.
bool torch_cuda_in_process();

// Loads LibTorch's CUDA part from root/lib, the folder of the process's
// `libtorch_cpu` (its path as loaded): lib/libc10_cuda.so, then
// lib/libtorch_cuda.so, RTLD_NOW | RTLD_GLOBAL, kept for the life of the
// process. Error(load) when `root` is not a CUDA build of torch, when a
// library resolves (symbolic links followed) to another folder than
// `libtorch_cpu` does (parts of two torches), when one is not a regular
// file, or when the dynamic loader refuses one (its reason names what is
// missing).
void open_torch_cuda(const std::filesystem::path& root, const std::string& libtorch_cpu);

}  // namespace kernhub::loader
