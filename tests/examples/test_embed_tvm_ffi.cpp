// examples/embed/embed_tvm_ffi.cpp run as a program against a loopback hub
// holding the tvm-ffi fixture (tests/tvmffi/tvm_hub.hpp): cold from the hub
// with the environment, then warm offline with flags, and its exit codes
// when the kernel cannot be had, is not an add_one, or the arguments are bad.
#include <catch2/catch.hpp>
#include <filesystem>
#include <string>
#include <vector>

#include "support/process.hpp"
#include "support/temp_dir.hpp"
#include "support/tvm_ffi_fixture.hpp"
#include "tvmffi/tvm_hub.hpp"

namespace fs = std::filesystem;
using namespace kernhub::test;
using namespace kernhub::test::tvm;

namespace {

// The example in a temp dir (its cwd: no kernhub.json there) with an
// environment the machine's cannot reach: no endpoint, registry, cache,
// token or runtime leaks in; `extra` is applied on top.
struct Sandbox {
    TempDir dir;
    fs::path cache = dir.path() / "cache";
    fs::path registry = write_registry(dir.path());

    ProcessResult run(const std::vector<std::string>& args, const EnvChanges& extra) const {
        EnvChanges env;
        for (const char* name :
             {"KERNHUB_ENDPOINT", "HF_ENDPOINT", "HF_TOKEN", "KERNHUB_OFFLINE", "HF_HUB_OFFLINE", "KERNHUB_REGISTRY",
              "KERNHUB_CACHE", "KERNELS_CACHE", "HF_HUB_CACHE", "KERNHUB_VERIFY_ON_LOAD", "KERNHUB_TVM_FFI_LIBRARY",
              "KERNHUB_REF_TTL", "VIRTUAL_ENV", "CONDA_PREFIX"}) {
            env[name] = std::nullopt;
        }
        env["HF_HOME"] = (dir.path() / "hf-home").string();
        env["HOME"] = dir.path().string();
        env["KERNHUB_RETRIES"] = "0";
        for (const auto& [name, value] : extra) env[name] = value;
        std::vector<std::string> argv{KERNHUB_EMBED_TVM_FFI};
        argv.insert(argv.end(), args.begin(), args.end());
        return run_process(argv, env, dir.path().string());
    }
};

std::string describe(const ProcessResult& r) {
    return "exit " + std::to_string(r.exit_code) + "\n--- stdout\n" + r.out + "--- stderr\n" + r.err;
}

bool has(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

// What a run that went as expected prints, line by line.
void check_success(const ProcessResult& r) {
    INFO(describe(r));
    CHECK(r.exit_code == 0);
    CHECK(has(r.out, "tvm-add-one: variant " + cpu_variant() + ", tvm-ffi function add_one, runtime 0.1."));
    CHECK(has(r.out, "(" + tvm_ffi_runtime_library().string() + ")\n"));
    CHECK(has(r.out, "add_one([1.5, -2, 10, 0.25, 1023]) = [2.5, -1, 11, 1.25, 1024] -> ok\n"));
    CHECK(has(r.out, "add_one(int32) raised kernel error: "));
    CHECK(has(r.out, "add_one: x must be float32, got int32"));
    CHECK(has(r.out, " -> ok\n"));
    CHECK_FALSE(has(r.out, "WRONG"));
}

}  // namespace

TEST_CASE("embed_tvm_ffi loads add_one from the hub, checks its sums and catches the kernel's error",
          "[examples][tvm-ffi][needs:tvm-ffi]") {
    Sandbox box;
    TvmHub hub;
    // Cold, everything from the environment, the name by default.
    const ProcessResult cold = box.run({}, {{"KERNHUB_ENDPOINT", hub.server().endpoint()},
                                            {"KERNHUB_REGISTRY", box.registry.string()},
                                            {"KERNHUB_CACHE", box.cache.string()},
                                            {"KERNHUB_TVM_FFI_LIBRARY", tvm_ffi_runtime_library().string()}});
    check_success(cold);
    // The variant came from the hub into the cache.
    CHECK(fs::is_directory(box.cache / "kernels--kernhub-test--tvm-ops"));

    // Warm and offline, everything from flags, the name given.
    const ProcessResult warm = box.run({"--registry", box.registry.string(), "--cache-dir", box.cache.string(),
                                        "--tvm-ffi-library", tvm_ffi_runtime_library().string(), "tvm-add-one"},
                                       {{"KERNHUB_OFFLINE", "1"}});
    check_success(warm);
}

TEST_CASE("embed_tvm_ffi exits with kernhub's code when the kernel cannot be had or misbehaves",
          "[examples][tvm-ffi][needs:tvm-ffi]") {
    Sandbox box;
    TvmHub hub;
    const EnvChanges env{{"KERNHUB_ENDPOINT", hub.server().endpoint()},
                         {"KERNHUB_REGISTRY", box.registry.string()},
                         {"KERNHUB_CACHE", box.cache.string()},
                         {"KERNHUB_TVM_FFI_LIBRARY", tvm_ffi_runtime_library().string()}};

    // A function the library lacks: not found (3) at start-up, nothing called.
    ProcessResult r = box.run({"tvm-missing"}, env);
    INFO(describe(r));
    CHECK(r.exit_code == 3);
    CHECK(has(r.err, "embed_tvm_ffi: "));
    CHECK(has(r.err, "no tvm-ffi function 'add_two'"));
    CHECK(r.out.empty());

    // A tvm-ffi function that is no add_one(x, y): its own TypeError on the
    // first call is a kernel error (9), and no result is printed.
    r = box.run({"tvm-add-int"}, env);
    INFO(describe(r));
    CHECK(r.exit_code == 9);
    CHECK(has(r.err, "'add_int' raised TypeError"));
    CHECK_FALSE(has(r.out, "-> ok"));

    // The named runtime is not there: load (7), naming it.
    EnvChanges no_runtime = env;
    const std::string missing = (box.dir.path() / "nowhere" / "libtvm_ffi.so").string();
    no_runtime["KERNHUB_TVM_FFI_LIBRARY"] = missing;
    r = box.run({}, no_runtime);
    INFO(describe(r));
    CHECK(r.exit_code == 7);
    CHECK(has(r.err, missing));

    // Bad arguments: usage (2) before anything is fetched.
    for (const std::vector<std::string>& args :
         std::vector<std::vector<std::string>>{{"--bogus"}, {"--endpoint"}, {"tvm-add-one", "tvm-add-int"}}) {
        r = box.run(args, env);
        INFO(describe(r));
        CHECK(r.exit_code == 2);
        CHECK(has(r.err, "usage: embed_tvm_ffi"));
    }
}
