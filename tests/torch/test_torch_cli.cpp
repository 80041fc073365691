// The kernhub program and torch ops: `load` loads LibTorch from the torch
// package KERNHUB_TORCH_DIR names and reports the op (text and --json);
// without it, under LD_BIND_NOW or for a missing op it exits with the
// codes of docs/commands.md, "Exit codes"; `inspect` lists an op library's ops.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <cstdlib>
#include <iostream>

#include "cli/cli_support.hpp"
#include "torch/torch_hub.hpp"

using namespace kernhub::test;
using namespace kernhub::test::cli;
using namespace kernhub::test::torch_hub;

namespace {

// The CLI's environment: the sandbox's, plus the torch package and the
// CUDA runtime libraries its libtorch_cpu.so needs.
EnvChanges torch_env(const EnvChanges& extra = {}) {
    EnvChanges env = {{"KERNHUB_TORCH_DIR", std::string(build::torch_dir)},
                      {"LD_LIBRARY_PATH", std::string(build::torch_runtime_dir)},
                      {"LD_BIND_NOW", std::nullopt}};
#if defined(__SANITIZE_ADDRESS__)
    // LeakSanitizer's exit-time tracer now and then dies (SIGSEGV) suspending
    // the threads LibTorch leaves running in a CLI process; the leak check of
    // the torch path stays with the in-process tests.
    const char* asan = std::getenv("ASAN_OPTIONS");
    env["ASAN_OPTIONS"] = std::string(asan != nullptr ? asan : "") + ":detect_leaks=0";
#endif
    for (const auto& [name, value] : extra) env[name] = value;
    return env;
}

struct CliSetup {
    Sandbox box;
    TorchHub hub;
    fs::path registry = write_registry(box.dir.path());

    ProcessResult load(const std::vector<std::string>& more, const EnvChanges& env) const {
        std::vector<std::string> args{"load",
                                      "--registry",
                                      registry.string(),
                                      "--endpoint",
                                      const_cast<TorchHub&>(hub).server().endpoint(),
                                      "--cache-dir",
                                      box.cache.string()};
        args.insert(args.end(), more.begin(), more.end());
        return box.run(args, env);
    }
};

}  // namespace

TEST_CASE("cli: load of a torch variant reports the op, the torch and the library", "[torch][needs:torch]") {
    CliSetup setup;
    const ProcessResult text = setup.load({"torch-add-one", "--target", cxx11_variant()}, torch_env());
    INFO(describe(text));
    REQUIRE(text.exit_code == 0);
    // The report goes to stderr, as every status line of the program does.
    CHECK(text.err.find("torch op " + std::string(k_ops_ns) + "::add_one\n") != std::string::npos);
    CHECK(text.err.find("  torch " + std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR)) !=
          std::string::npos);
    CHECK(text.err.find("libtorch_cpu.so\n") != std::string::npos);

    const ProcessResult json_run =
        setup.load({"torch-add-one-out", "--target", stable_variant(), "--op", "add_one", "--json"}, torch_env());
    const json out = parse_stdout(json_run);
    CHECK(json_run.exit_code == 0);
    CHECK(out["kind"] == "torch-op");
    CHECK(out["torch_op"] == std::string(k_stable_ns) + "::add_one");
    CHECK(out["symbol"] == "add_one_out");
    CHECK(out["variant"] == stable_variant());
    CHECK(out["torch"]["version"] == std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) +
                                         "." + std::to_string(TORCH_VERSION_PATCH));
    CHECK(fs::equivalent(out["torch"]["library"].get<std::string>(),
                         fs::path(build::torch_dir) / "lib" / "libtorch_cpu.so"));
    CHECK_FALSE(out.contains("address"));
}

TEST_CASE("cli: load with no --target picks the variant kernels would for the torch it finds", "[torch][needs:torch]") {
    CliSetup setup;
    // The test torch is a CUDA build (torch.version.cuda set): as in kernels,
    // its backend is CUDA, and this repo has only CPU builds.
    const ProcessResult cuda = setup.load({"torch-add-one", "-q"}, torch_env());
    INFO(describe(cuda));
    CHECK(cuda.exit_code == 3);
    CHECK(cuda.err.find("the backend is cu") != std::string::npos);
    // Asking for the CPU backend, stable-abi ranks first among what fits.
    const ProcessResult cpu = setup.load({"torch-add-one", "--json"}, torch_env({{"KERNHUB_BACKEND", "cpu"}}));
    INFO(describe(cpu));
    REQUIRE(cpu.exit_code == 0);
    const json out = parse_stdout(cpu);
    CHECK(out["variant"] == stable_variant());
    CHECK(out["torch_op"] == std::string(k_stable_ns) + "::add_one");
}

TEST_CASE("cli: a torch variant without LibTorch is exit 7 naming the missing library", "[torch][needs:torch]") {
    CliSetup setup;
    const ProcessResult r = setup.load({"torch-add-one", "-q", "--target", cxx11_variant()},
                                       torch_env({{"KERNHUB_TORCH_DIR", std::nullopt}}));
    check_error(r, 7, {"libtorch_cpu.so", "not in this process", "KERNHUB_TORCH_DIR", std::string(k_ops_ns)});
}

TEST_CASE("cli: LD_BIND_NOW is exit 7 naming the Python function and the cause", "[torch][needs:torch]") {
    CliSetup setup;
    const ProcessResult r =
        setup.load({"torch-add-one", "-q", "--target", cxx11_variant()}, torch_env({{"LD_BIND_NOW", "1"}}));
    check_error(r, 7, {"LD_BIND_NOW", "PyModule_Create2", "R_X86_64_JUMP_SLOT"});
    // The stable-ABI library refers to no Python: it loads all the same.
    const ProcessResult stable =
        setup.load({"torch-add-one", "--target", stable_variant()}, torch_env({{"LD_BIND_NOW", "1"}}));
    INFO(describe(stable));
    CHECK(stable.exit_code == 0);
}

TEST_CASE("cli: a missing op is exit 3 naming the library's ops and --op", "[torch][needs:torch]") {
    CliSetup setup;
    const ProcessResult r =
        setup.load({"torch-add-one", "-q", "--target", untagged_variant(), "--op", "add_one.inplace"}, torch_env());
    check_error(r, 3, {"add_one.inplace", "add_one, add_one.out, scale", "--op"});
    const ProcessResult bad =
        setup.load({"torch-add-one", "-q", "--target", untagged_variant(), "--op", "add one"}, torch_env());
    check_error(bad, 2, {"not an op name"});
}

TEST_CASE("cli: inspect lists the ops of an op library", "[torch][needs:torch]") {
    Sandbox box;
    const ProcessResult ops = box.run({"inspect", fixture(k_ops_ns).string(), "--json"});
    const json out = parse_stdout(ops);
    CHECK(out["torch_ops"] == json::array({"add_one", "add_one.out", "scale"}));
    const ProcessResult stable = box.run({"inspect", fixture(k_stable_ns).string()});
    INFO(describe(stable));
    CHECK(stable.exit_code == 0);
    CHECK(stable.out.find("torch ops (1):\n    add_one\n") != std::string::npos);
    const json stable_json = parse_stdout(box.run({"inspect", fixture(k_stable_ns).string(), "--json"}));
    CHECK(stable_json["torch_schemas"] == json::array({"add_one(Tensor x) -> Tensor"}));
}

TEST_CASE("cli: without a GPU the CUDA torch picks the CUDA variant, and its load is exit 7 naming the driver",
          "[torch][needs:torch-cuda][needs:no-cuda]") {
    CliSetup setup;
    const ProcessResult info =
        setup.box.run({"info", "torch-cuda-add-one", "--json", "--registry", setup.registry.string(), "--endpoint",
                       setup.hub.server().endpoint(), "--cache-dir", setup.box.cache.string()},
                      torch_env());
    INFO(describe(info));
    REQUIRE(info.exit_code == 0);
    CHECK(parse_stdout(info)["selected"] == cuda_variant());

    const ProcessResult r = setup.load({"torch-cuda-add-one", "-q"}, torch_env());
    check_error(r, 7, {"cannot load the CUDA op library", cuda_variant()});
    CHECK((r.err.find("no CUDA driver") != std::string::npos || r.err.find("reports no device") != std::string::npos));
    const ProcessResult cpu = setup.load({"torch-cuda-add-one", "--json"}, torch_env({{"KERNHUB_BACKEND", "cpu"}}));
    INFO(describe(cpu));
    REQUIRE(cpu.exit_code == 0);
    CHECK(parse_stdout(cpu)["variant"] == cxx11_variant());
}

TEST_CASE("cli: on a GPU, load of the CUDA variant opens LibTorch's CUDA part from the torch it finds",
          "[gpu][needs:torch-cuda][needs:torch-cuda-driver][needs:sm_80][needs:torch-cuda-runtime]") {
    CliSetup setup;
    // The libraries libtorch_cuda.so needs, as ctest gives this test, before
    // the runtime folder torch_env() names.
    const char* libraries = std::getenv("LD_LIBRARY_PATH");
    const std::string path = (libraries != nullptr && *libraries != 0 ? std::string(libraries) + ":" : std::string()) +
                             build::torch_runtime_dir;
    const ProcessResult r = setup.load({"torch-cuda-add-one", "--json"}, torch_env({{"LD_LIBRARY_PATH", path}}));
    INFO(describe(r));
    REQUIRE(r.exit_code == 0);
    const json out = parse_stdout(r);
    CHECK(out["variant"] == cuda_variant());
    CHECK(out["kind"] == "torch-op");
    CHECK(out["torch_op"] == std::string(k_cuda_ns) + "::add_one");
}

TEST_CASE("cli: the op-namespace attack's shapes exit with their codes in both registration forms",
          "[torch][needs:torch]") {
    CliSetup setup;
    // The exit code of `load kernhub-test/<form>-<shape> --op add_one`.
    const std::vector<std::pair<std::string, int>> shapes = {
        {"spoof", 4}, {"real", 4},  {"spoof-stripped", 4}, {"renamed", 0}, {"renamed-stripped", 4}, {"stripped", 0},
        {"twice", 0}, {"other", 7}, {"blocked", 4},        {"class", 4},   {"two-lines", 4},        {"honest", 0},
    };
    for (const std::string form : {"ops", "stable"}) {
        const std::string ns = form == "ops" ? k_ops_ns : k_stable_ns;
        for (const auto& [shape, code] : shapes) {
            INFO(form << "-" << shape);
            const ProcessResult r = setup.load(
                {"kernhub-test/" + form + "-" + shape, "--target", cxx11_variant(), "--op", "add_one", "--json"},
                torch_env());
            INFO(describe(r));
            CHECK(r.exit_code == code);
            const json out = parse_stdout(r);
            if (code == 0) {
                CHECK(out["torch_op"] == ns + "::add_one");
            } else {
                CHECK(out["error"]["code"] == code);
            }
        }
    }
}

TEST_CASE("cli: inspect names the namespace an unstripped op library's symbols define", "[torch][needs:torch]") {
    Sandbox box;
    const json ops = parse_stdout(box.run({"inspect", fixture(k_ops_ns).string(), "--json"}));
    CHECK(ops["torch_namespaces"] == json::array({k_ops_ns}));
    const ProcessResult stable = box.run({"inspect", fixture(k_stable_ns).string()});
    CHECK(stable.out.find("  torch namespace " + std::string(k_stable_ns) + "\n") != std::string::npos);
    const json stripped = parse_stdout(box.run({"inspect", stripped_fixture(k_ops_ns).string(), "--json"}));
    CHECK(stripped["torch_namespaces"] == json::array());
    CHECK(stripped["torch_ops"] == json::array({"add_one", "add_one.out", "scale"}));
}

TEST_CASE("cli: a FIFO where KERNHUB_TORCH_DIR's libtorch_cpu.so belongs is named as one, and never opened",
          "[torch][needs:torch]") {
    CliSetup setup;
    // A torch package whose version.py is the test torch's, and whose
    // LibTorch is a FIFO: opening it would wait for a writer for ever.
    const fs::path fake = setup.box.dir.path() / "fake-torch";
    fs::create_directories(fake / "lib");
    fs::copy_file(fs::path(build::torch_dir) / "version.py", fake / "version.py");
    REQUIRE(::mkfifo((fake / "lib" / "libtorch_cpu.so").c_str(), 0600) == 0);
    const ProcessResult r = setup.load({"torch-add-one", "-q", "--target", cxx11_variant()},
                                       torch_env({{"KERNHUB_TORCH_DIR", fake.string()}}));
    check_error(r, 3, {"no LibTorch at", "libtorch_cpu.so: it is a FIFO"});
    CHECK(r.err.find("does not exist") == std::string::npos);
}

TEST_CASE("cli: a torch variant in the zip build layout loads, and its zip's shapes exit with their codes",
          "[torch][needs:torch]") {
    CliSetup setup;
    const std::vector<std::pair<std::string, int>> shapes = {
        {"zip-honest", 0}, {"zip-spoof", 4}, {"zip-twice", 4}, {"zip-no-zip", 3}, {"zip-unknown-layout", 7}};
    for (const auto& [shape, code] : shapes) {
        INFO(shape);
        const ProcessResult r = setup.load(
            {"kernhub-test/stable-" + shape, "--target", cxx11_variant(), "--op", "add_one", "--json"}, torch_env());
        INFO(describe(r));
        CHECK(r.exit_code == code);
        const json out = parse_stdout(r);
        if (code == 0) {
            // The report the closing note of the zip layout quotes.
            std::cout << "zip layout load --json: " << out.dump() << '\n';
            CHECK(out["kind"] == "torch-op");
            CHECK(out["torch_op"] == std::string(k_stable_ns) + "::add_one");
        } else {
            CHECK(out["error"]["code"] == code);
        }
    }
}
