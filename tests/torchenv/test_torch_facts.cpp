// Torch facts from a torch package folder, a LibTorch root and the Python
// environments: real files laid out in a temporary folder, with real
// shared objects standing in for libc10.so.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "kernhub/error.hpp"
#include "support/build_paths.hpp"
#include "support/temp_dir.hpp"
#include "torchenv/torch_facts.hpp"

using namespace kernhub;
namespace fs = std::filesystem;

namespace {

// torch 2.15.0's own version.py from PyPI (the generated file, verbatim in form).
const char* const k_version_py =
    "from typing import Optional\n\n"
    "__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip', 'rocm', 'xpu']\n"
    "__version__ = '2.15.0+cu132'\n"
    "debug = False\n"
    "cuda: Optional[str] = '13.2'\n"
    "git_version = 'd0f2af8b66b20da4baa50644c0cd3f887a2eae2e'\n"
    "hip: Optional[str] = None\n"
    "rocm: Optional[str] = None\n"
    "xpu: Optional[str] = None\n";

void write(const fs::path& path, const std::string& text) {
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << text;
}

// A torch package folder; `c10` names the fixture copied in as lib/libc10.so.
fs::path torch_package(const fs::path& site, const std::string& version_py, const char* c10) {
    const fs::path dir = site / "torch";
    write(dir / "version.py", version_py);
    if (c10 != nullptr) {
        fs::create_directories(dir / "lib");
        fs::copy_file(fs::path(KERNHUB_FIXTURE_DIR) / c10, dir / "lib" / "libc10.so");
    }
    return dir;
}

std::string refusal(const fs::path& dir) {
    try {
        torchenv::read_torch_dir(dir, "KERNHUB_TORCH_DIR");
    } catch (const Error& error) {
        CHECK(error.code() == ErrorCode::usage);
        return error.plain_message();
    }
    return "(accepted)";
}

}  // namespace

TEST_CASE("a torch package folder gives torch's version, CUDA and C++11 ABI", "[torchenv]") {
    test::TempDir tmp;
    const fs::path dir = torch_package(tmp.path(), k_version_py, "libkh_cxx11.so");
    const torchenv::FoundTorch found = torchenv::read_torch_dir(dir, "KERNHUB_TORCH_DIR");
    CHECK(found.info.major == 2);
    CHECK(found.info.minor == 15);
    CHECK(found.info.cuda == "13.2");
    CHECK(found.info.hip.empty());
    CHECK(found.info.xpu.empty());
    CHECK(found.info.cxx11_abi == std::make_optional(true));
    CHECK(found.info.source == (dir / "version.py").string());
    CHECK(found.abi_source == (dir / "lib" / "libc10.so").string());
    CHECK(found.lib_dir == dir / "lib");
}

TEST_CASE("the C++11 ABI flag is read from libc10.so's exports, and unknown without one", "[torchenv]") {
    test::TempDir tmp;
    const fs::path old_abi = torch_package(tmp.path() / "a", k_version_py, "libkh_cxx98.so");
    CHECK(torchenv::read_torch_dir(old_abi, "x").info.cxx11_abi == std::make_optional(false));
    const fs::path no_lib = torch_package(tmp.path() / "b", k_version_py, nullptr);
    CHECK_FALSE(torchenv::read_torch_dir(no_lib, "x").info.cxx11_abi.has_value());
    const fs::path cpu = torch_package(tmp.path() / "c", "__version__ = \"2.9.1+cpu\"\ncuda = None\n", nullptr);
    const torchenv::FoundTorch found = torchenv::read_torch_dir(cpu, "x");
    CHECK(found.info.minor == 9);
    CHECK(found.info.cuda.empty());
}

TEST_CASE("a LibTorch root gives its version and CUDA from build-version", "[torchenv]") {
    test::TempDir tmp;
    write(tmp.path() / "cu" / "build-version", "2.15.0+cu130\n");
    const torchenv::FoundTorch cuda = torchenv::read_torch_dir(tmp.path() / "cu", "x");
    CHECK(cuda.info.major == 2);
    CHECK(cuda.info.minor == 15);
    CHECK(cuda.info.cuda == "13.0");
    CHECK(cuda.lib_dir == tmp.path() / "cu" / "lib");
    write(tmp.path() / "cpu" / "build-version", "2.12.1+cpu");
    CHECK(torchenv::read_torch_dir(tmp.path() / "cpu", "x").info.cuda.empty());
    write(tmp.path() / "rocm" / "build-version", "2.12.0+rocm6.3");
    CHECK(torchenv::read_torch_dir(tmp.path() / "rocm", "x").info.hip == "6.3");
}

TEST_CASE("a torch folder that is not one is a usage error naming the setting", "[torchenv]") {
    test::TempDir tmp;
    CHECK(refusal(tmp.path()).find("KERNHUB_TORCH_DIR names '") == 0);
    CHECK(refusal(tmp.path()).find("neither a torch package folder") != std::string::npos);
    write(tmp.path() / "p" / "version.py", "cuda = '13.0'\n");
    CHECK(refusal(tmp.path() / "p").find("has no __version__ of the form X.Y") != std::string::npos);
    write(tmp.path() / "big" / "version.py", std::string(70 * 1024, '#'));
    CHECK(refusal(tmp.path() / "big").find("over 64 KiB") != std::string::npos);
    write(tmp.path() / "r" / "build-version", "nightly\n");
    CHECK(refusal(tmp.path() / "r").find("does not start with a version X.Y") != std::string::npos);
    // Long values under the size cap are refused, not matched by a
    // recursive regex that would overflow the stack.
    write(tmp.path() / "long" / "version.py", "__version__ = '2.15.0" + std::string(60000, 'a') + "'\n");
    CHECK(refusal(tmp.path() / "long").find("has no __version__ of the form X.Y") != std::string::npos);
    write(tmp.path() / "longer" / "build-version", "2.15." + std::string(60000, 'a'));
    CHECK(refusal(tmp.path() / "longer").find("does not start with a version X.Y") != std::string::npos);
}

TEST_CASE("the Python environments' torch is found, and a broken one is passed over with its problem", "[torchenv]") {
    test::TempDir tmp;
    const fs::path venv = tmp.path() / "venv";
    const fs::path site = venv / "lib" / "python3.11" / "site-packages";
    torch_package(site, k_version_py, "libkh_cxx11.so");
    ::setenv("VIRTUAL_ENV", venv.c_str(), 1);
    ::setenv("HOME", (tmp.path() / "home").c_str(), 1);
    std::string problem;
    const auto found = torchenv::find_in_python_envs(problem);
    REQUIRE(found.has_value());
    CHECK(found->info.minor == 15);
    CHECK(found->info.source == (site / "torch" / "version.py").string());
    CHECK(problem.empty());

    // Options::torch wins over everything, and a named folder over the environments.
    TorchInfo stated;
    stated.major = 2;
    stated.minor = 12;
    CHECK(torchenv::find_torch(stated, {}, {}, problem)->info.minor == 12);
    CHECK(torchenv::find_torch(stated, {}, {}, problem)->info.source == "Options::torch");
    CHECK_THROWS_AS(torchenv::find_torch(std::nullopt, (tmp.path() / "nothing").string(), "KERNHUB_TORCH_DIR", problem),
                    Error);

    write(site / "torch" / "version.py", "broken\n");
    problem.clear();
    const auto broken = torchenv::find_in_python_envs(problem);
    // Passed over: another environment's torch (if this machine has one) or none.
    CHECK((!broken || broken->info.source != (site / "torch" / "version.py").string()));
    CHECK(problem.find("has no __version__") != std::string::npos);
}
