// A CUDA torch variant (tests/fixtures/torch/cuda_ops.cpp, an nvcc-built
// kernel registered for the CUDA dispatch key) beside a CPU one of the same
// kernel. Without a GPU: a CUDA build of torch selects the CUDA variant, as
// kernels does, and loading it is a load error before LibTorch's CUDA
// part is touched. With a GPU ([gpu]): kernhub opens LibTorch's CUDA part
// from the torch folder it was given, loads the variant, and the typed op
// computes on device tensors.
#include "torch/torch_setup.hpp"  // first: torch's headers before Catch's

#include <dlfcn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include "cuda/driver.hpp"
#include "loader/torch_runtime.hpp"
#include "support/requirements.hpp"

using namespace kernhub::test;
using namespace kernhub::test::torch_hub;
using kernhub::ErrorCode;

namespace {

KERNHUB_TEST_REQUIREMENT("needs:torch-cuda", []() -> std::string {
    if (std::string why = why_no_torch(); !why.empty()) return why;
    if (cuda_variant().empty()) {
        return "the CUDA torch fixture was not built (it needs nvcc and a CUDA build of torch at configure time)";
    }
    return {};
});

// The fixture's CUDA version must run on the driver (its cudart is torch's).
KERNHUB_TEST_REQUIREMENT("needs:torch-cuda-driver", []() -> std::string {
    if (cuda_variant().empty()) return "the CUDA torch fixture was not built";
    try {
        const kernhub::cuda::DriverInfo info = kernhub::cuda::Driver::instance().info();
        const int needed = std::stoi(std::string(build::torch_cuda_tag).substr(2));
        const int has = info.major() * 10 + info.minor();
        if (has < needed)
            return "the CUDA driver runs " + std::to_string(has) + ", the fixture needs " + std::to_string(needed);
    } catch (const kernhub::Error& e) {
        return e.message();
    }
    return {};
});

// LibTorch's CUDA part must load here: libtorch_cuda.so needs cuBLAS,
// cuDNN, NCCL and more, which a pip-installed torch finds through its
// rpath and this test through the LD_LIBRARY_PATH ctest gives it. Tried in
// a child, so this process stays as it was.
KERNHUB_TEST_REQUIREMENT("needs:torch-cuda-runtime", []() -> std::string {
    int pipe_fds[2];
    if (::pipe(pipe_fds) != 0) return "pipe failed";
    const pid_t child = ::fork();
    if (child < 0) return "fork failed";
    if (child == 0) {
        ::close(pipe_fds[0]);
        for (const char* name : {"libc10_cuda.so", "libtorch_cuda.so"}) {
            const std::string path = (fs::path(build::torch_dir) / "lib" / name).string();
            if (::dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL) == nullptr) {
                const char* why = ::dlerror();
                const std::string text = why != nullptr ? why : path;
                [[maybe_unused]] const ssize_t n = ::write(pipe_fds[1], text.data(), text.size());
                ::_exit(1);
            }
        }
        ::_exit(0);
    }
    ::close(pipe_fds[1]);
    std::string why;
    char buffer[512];
    for (ssize_t n; (n = ::read(pipe_fds[0], buffer, sizeof buffer)) > 0 && why.size() < 4096;) {
        why.append(buffer, static_cast<std::size_t>(n));
    }
    ::close(pipe_fds[0]);
    int status = 0;
    ::waitpid(child, &status, 0);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return {};
    return "LibTorch's CUDA part does not load here (" + (why.empty() ? std::string("the probe died") : why) +
           "); install what it needs, or run the torch-python extras' setup (KERNHUB_TEST_TORCH_PYTHON=1)";
});

bool torch_cuda_loaded() {
    void* handle = ::dlopen("libtorch_cuda.so", RTLD_LAZY | RTLD_NOLOAD);
    if (handle == nullptr) return false;
    ::dlclose(handle);
    return true;
}

// Detection from the torch package, as an application that names its torch
// folder: no target, the backend from torch's build.
kernhub::Options detecting(const Setup& setup) {
    kernhub::Options o = setup.options("");
    o.targets.clear();
    o.torch_dir = build::torch_dir;
    return o;
}

}  // namespace

using UnaryOp = at::Tensor(const at::Tensor&);

TEST_CASE(
    "without a GPU a CUDA torch selects the CUDA variant, whose load is refused before LibTorch's CUDA part opens",
    "[torch][needs:torch-cuda][needs:no-cuda]") {
    Setup setup;
    kernhub::Options options = detecting(setup);
    kernhub::Client client(options);
    CHECK(client.fetch("torch-cuda-add-one").variant == cuda_variant());

    kernhub::LoadOptions load;
    load.load_torch = true;
    const kernhub::Error error = error_of([&] { client.load("torch-cuda-add-one", load); });
    CHECK(error.code() == ErrorCode::load);
    CHECK(contains(error.what(), "cannot load the CUDA op library"));
    CHECK(contains(error.what(), cuda_variant()));
    // The driver's own words: none here, or one without a device.
    CHECK((contains(error.what(), "no CUDA driver") || contains(error.what(), "reports no device")));
    CHECK_FALSE(torch_cuda_loaded());

    // The CPU backend, asked for, gets the CPU build of the same kernel.
    options.backend = "cpu";
    kernhub::Client cpu_client(options);
    const kernhub::LoadResult cpu = cpu_client.load("torch-cuda-add-one", load);
    CHECK(cpu.fetch.variant == cxx11_variant());
    CHECK(values(kernhub::torch::op<UnaryOp>(cpu).call(tensor({1.0f}))) == (std::vector<float>{2.0f}));
    CHECK_FALSE(torch_cuda_loaded());
}

TEST_CASE("LibTorch's CUDA part is opened only from one torch's own regular files", "[torch][needs:torch]") {
    TempDir dir;
    const fs::path lib = dir.path() / "lib";
    fs::create_directories(lib);
    // This folder's "libtorch_cpu.so": only its path matters before opening.
    std::ofstream(lib / "libtorch_cpu.so") << "stands for the process's libtorch_cpu";
    const std::string cpu = (lib / "libtorch_cpu.so").string();
    const auto refusal = [&](const std::string& libtorch_cpu) {
        return error_of([&] { kernhub::loader::open_torch_cuda(dir.path(), libtorch_cpu); });
    };

    const kernhub::Error none = refusal(cpu);
    CHECK(none.code() == ErrorCode::load);
    CHECK(contains(none.what(), "is not a CUDA build"));
    CHECK(contains(none.what(), (lib / "libtorch_cuda.so").string()));

    // A FIFO would block dlopen; a folder is no library either.
    REQUIRE(::mkfifo((lib / "libc10_cuda.so").c_str(), 0600) == 0);
    fs::create_directory(lib / "libtorch_cuda.so");
    const kernhub::Error fifo = refusal(cpu);
    CHECK(fifo.code() == ErrorCode::load);
    CHECK(contains(fifo.what(), (lib / "libc10_cuda.so").string() + ": it is a FIFO, not a file"));
    fs::remove(lib / "libc10_cuda.so");
    std::ofstream(lib / "libc10_cuda.so") << "not an ELF file";
    CHECK(contains(refusal(cpu).what(), (lib / "libtorch_cuda.so").string() + ": it is a folder, not a file"));

    // Files that are no library: the dynamic loader's reason.
    fs::remove(lib / "libtorch_cuda.so");
    std::ofstream(lib / "libtorch_cuda.so") << "not an ELF file";
    const kernhub::Error refused = refusal(cpu);
    CHECK(refused.code() == ErrorCode::load);
    CHECK(contains(refused.what(), "cannot load LibTorch's CUDA library"));

    // The process's libtorch_cpu.so from another folder (a link into
    // another torch): these CUDA files are not its CUDA part.
    fs::remove(lib / "libtorch_cpu.so");
    fs::create_symlink(fs::path(build::torch_dir) / "lib" / "libtorch_cpu.so", lib / "libtorch_cpu.so");
    const kernhub::Error mixed = refusal(cpu);
    CHECK(mixed.code() == ErrorCode::load);
    CHECK(contains(mixed.what(), "parts of different torches"));
    CHECK(contains(mixed.what(), fs::canonical(fs::path(build::torch_dir) / "lib" / "libtorch_cpu.so").string()));
    CHECK_FALSE(torch_cuda_loaded());
}

TEST_CASE("a CUDA torch variant: kernhub opens LibTorch's CUDA part and the typed op computes on the device",
          "[gpu][needs:torch-cuda][needs:torch-cuda-driver][needs:sm_80][needs:torch-cuda-runtime]") {
    Setup setup;
    kernhub::Client client(detecting(setup));
    kernhub::LoadOptions load;
    load.load_torch = true;
    const kernhub::LoadResult result = client.load("torch-cuda-add-one", load);
    CHECK(result.fetch.variant == cuda_variant());
    CHECK(result.kind == kernhub::LoadKind::torch_op);
    CHECK(result.torch_op == std::string(k_cuda_ns) + "::add_one");
    CHECK(torch_cuda_loaded());

    const auto add_one = kernhub::torch::op<UnaryOp>(result);
    const std::vector<float> input{1.5f, -2.0f, 0.0f, 1e6f, 41.0f};
    const at::Tensor on_device = tensor(input).to(at::kCUDA);
    const at::Tensor out = add_one.call(on_device);
    CHECK(out.is_cuda());
    CHECK(values(out.cpu()) == (std::vector<float>{2.5f, -1.0f, 1.0f, 1000001.0f, 42.0f}));

    // Larger than one block, so the grid arithmetic is exercised.
    const std::int64_t n = (1 << 20) + 3;
    at::Tensor big = at::empty({n}, at::kFloat);
    float* fill = big.data_ptr<float>();
    for (std::int64_t i = 0; i < n; ++i) fill[i] = static_cast<float>(i % 1000);
    const std::vector<float> big_out = values(add_one.call(big.to(at::kCUDA)).cpu());
    bool exact = true;
    for (std::int64_t i = 0; i < n; ++i)
        exact = exact && big_out[static_cast<std::size_t>(i)] == static_cast<float>(i % 1000) + 1.0f;
    CHECK(exact);

    // The op has only a CUDA kernel: a CPU tensor is the dispatcher's error.
    try {
        add_one.call(tensor({1.0f}));
        FAIL("the CUDA-only op ran on a CPU tensor");
    } catch (const c10::Error& e) {
        CHECK(contains(e.what(), "CPU"));
    }
}
