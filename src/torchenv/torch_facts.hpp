// Which torch a program uses, read from that torch's files and never by
// running Python (docs/kernels.md, "Torch kernels"): a torch package folder
// (site-packages/torch: version.py, lib/libc10.so) or a LibTorch
// distribution root (build-version, include/, lib/). The facts decide the
// torch families' variants and, as in `kernels`, the backend.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <utility>

#include "kernhub/kernhub.hpp"

namespace kernhub::torchenv {

struct FoundTorch {
    TorchInfo info;                 // info.source: the file the version came from
    std::filesystem::path lib_dir;  // the folder holding libc10.so and libtorch_cpu.so
    std::string abi_source;         // the file the ABI flag came from; empty when unknown
};

// The first two numbers of a version as torch's files and builds spell it:
// "2.15.0+cu132", "13.2", "6.3.42131-fa1d09cbd", "2.15a0" -> (major,
// minor); nullopt unless it starts with digits.digits (1 to 4 each), or
// when it is over 64 bytes.
std::optional<std::pair<int, int>> major_minor(const std::string& version);

// Reads the torch package folder or LibTorch root `dir`. Error(usage)
// naming `named_by` (the setting that named it) when it is neither, or
// when its version cannot be read.
FoundTorch read_torch_dir(const std::filesystem::path& dir, const std::string& named_by);

// The torch package of the first Python environment that has one
// (python_env::package_folders order); nullopt when none has. A package
// whose files cannot be read is passed over, and `problem` says why.
std::optional<FoundTorch> find_in_python_envs(std::string& problem);

// The torch of a program's settings: Options::torch as given, else the
// folder named by Options::torch_dir / KERNHUB_TORCH_DIR (`dir`, with the
// setting's name), else the Python environments.
std::optional<FoundTorch> find_torch(const std::optional<TorchInfo>& stated, const std::string& dir,
                                     const std::string& named_by, std::string& problem);

}  // namespace kernhub::torchenv
