// `kernhub inspect` on real nvcc output and ELF objects, and the CUDA load
// path of `kernhub load` on a machine without a usable CUDA driver.
#include "cli/cli_support.hpp"
#include "support/requirements.hpp"

using namespace kernhub::test;
using namespace kernhub::test::cli;

namespace {

// A path no driver is at: the CLI then runs as on a host without CUDA,
// whatever this machine has.
std::string no_driver(const Sandbox& box) {
    return (box.dir.path() / "no-libcuda.so.1").string();
}

}  // namespace

TEST_CASE("inspect --json lists every entry of a multi-arch fatbin", "[cli][cuda][needs:nvcc]") {
    Sandbox box;
    auto r = box.run({"inspect", cuda_fixture_fatbin().string(), "--json"});
    json out = parse_stdout(r);
    CHECK(r.exit_code == 0);
    CHECK(out["format"] == "fatbin");
    std::vector<std::string> archs;
    for (const auto& entry : out["entries"]) {
        CHECK(keys_of(entry) == std::vector<std::string>{"arch", "compressed", "kind", "size"});
        CHECK(entry["size"].get<std::uint64_t>() > 0);
        archs.push_back(entry["kind"].get<std::string>() + ":" + entry["arch"].get<std::string>());
    }
    std::sort(archs.begin(), archs.end());
    CHECK(archs == std::vector<std::string>{"ptx:compute_90", "sass:sm_80", "sass:sm_90a"});
    CHECK_FALSE(out.contains("selected"));
}

TEST_CASE("inspect --cc picks the entry that runs there, or exits 7 naming the archs", "[cli][cuda][needs:nvcc]") {
    Sandbox box;
    struct Row {
        const char* cc;
        const char* kind;
        const char* arch;
    };
    for (const Row& row : {Row{"8.0", "sass", "sm_80"}, Row{"8.6", "sass", "sm_80"}, Row{"9.0", "sass", "sm_90a"},
                           Row{"10.0", "ptx", "compute_90"}, Row{"12.0", "ptx", "compute_90"}}) {
        INFO("cc " << row.cc);
        json out = parse_stdout(box.run({"inspect", cuda_fixture_fatbin().string(), "--cc", row.cc, "--json"}));
        CHECK(out["selected"]["kind"] == row.kind);
        CHECK(out["selected"]["arch"] == row.arch);
    }
    check_error(box.run({"inspect", cuda_fixture_fatbin().string(), "--cc", "7.5"}), 7,
                {"7.5", "sm_80", "sm_90a", "compute_90"});
    check_error(box.run({"inspect", cuda_fixture_fatbin().string(), "--cc", "banana"}), 2, {"banana"});
}

TEST_CASE("inspect reports ELF facts, and refuses files of no known format", "[cli]") {
    Sandbox box;
    json out = parse_stdout(box.run({"inspect", vector_add_so().string(), "--json"}));
    CHECK(out["format"] == "elf");
    CHECK(out["class"] == 64);
    CHECK(out["type"] == "DYN");
    CHECK(out["exported_functions"] == json::array({"kh_abi_version", "kh_saxpy", "kh_vector_add"}));
    CHECK(out.contains("glibc_versions"));

    fs::path text = box.dir.path() / "notes.txt";
    std::ofstream(text) << "not a kernel\n";
    check_error(box.run({"inspect", text.string()}), 4, {"notes.txt"});
    check_error(box.run({"inspect", (box.dir.path() / "missing.fatbin").string()}), 3, {"missing.fatbin"});
}

TEST_CASE("load of a native-cuda kernel without a CUDA driver exits 7 and says so", "[cli][cuda][needs:nvcc]") {
    KernelHub hub;
    Sandbox box;
    auto r = box.kh("load", "vector-add-cuda", hub.server().endpoint(), {"--target", "native-cuda", "-q"},
                    {{"KERNHUB_CUDA_DRIVER", no_driver(box)}});
    check_error(r, 7, {"CUDA", "kh_vector_add", "vector_add.fatbin"});
}

TEST_CASE("load of a native-cuda kernel with the toolkit's stub libcuda exits 7 naming error 34",
          "[cli][cuda][needs:nvcc][needs:cuda-stub]") {
    KernelHub hub;
    Sandbox box;
    auto r = box.kh("load", "vector-add-cuda", hub.server().endpoint(), {"--target", "native-cuda", "-q"},
                    {{"KERNHUB_CUDA_DRIVER", k_cuda_stub_driver.string()}});
    check_error(r, 7, {"CUDA", "34", "stub"});
}

TEST_CASE("without a CUDA driver, detection alone never selects native-cuda", "[cli][cuda][needs:nvcc]") {
    KernelHub hub;
    Sandbox box;
    check_error(
        box.kh("fetch", "vector-add-cuda", hub.server().endpoint(), {"-q"}, {{"KERNHUB_CUDA_DRIVER", no_driver(box)}}),
        3, {"native-cuda", "needs CUDA"});
}

namespace {

// kernhub-test/arch-<name>: the host's CPU variant holding libkh_good.so,
// and, where nvcc built the fixture, a native-cuda variant holding it;
// each metadata.json with "backend": `backend` (none when null).
json arch_repo(const std::string& name, const json& backend) {
    json files = {{"build/" + host_cpu_variant() + "/libkh_good.so", {{"path", good_fixture_so().string()}}}};
    if (fs::exists(cuda_fixture_fatbin())) {
        files["build/native-cuda/vector_add.fatbin"] = {{"path", cuda_fixture_fatbin().string()}};
    }
    json commit = {{"message", "v1"}, {"branches", {"main", "v1"}}, {"metadata", true}, {"files", files}};
    if (!backend.is_null()) commit["metadata_extra"] = {{"backend", backend}};
    return {{"repo_id", "kernhub-test/arch-" + name}, {"type", "kernel"}, {"commits", json::array({commit})}};
}

// The backends kernels 0.19.1 reads without an arch check on this machine
// (no device), by repo name; "foreign" declares an arch no device has.
const std::vector<std::pair<std::string, json>>& arch_backends() {
    static const std::vector<std::pair<std::string, json>> list = {
        {"foreign", {{"type", "cuda"}, {"archs", {"1.0a"}}}},
        {"rocm", {{"type", "rocm"}, {"archs", {"gfx1.0a"}}}},
        {"agnostic", {{"type", "agnostic"}, {"archs", {"1.0a"}}}},
        {"cpu", {{"type", "cpu"}, {"archs", {"1.0a"}}}},
        {"unknown", {{"type", "foo"}, {"archs", {"1.0a"}}}},
        {"upper", {{"type", "CUDA"}, {"archs", {"1.0a"}}}},
        {"untyped", {{"archs", {"1.0a"}}}},
        {"absent", nullptr},
    };
    return list;
}

json arch_hub_spec() {
    json repos = json::array();
    for (const auto& [name, backend] : arch_backends()) repos.push_back(arch_repo(name, backend));
    return {{"repos", repos}};
}

}  // namespace

TEST_CASE("without a CUDA driver the device arch check is skipped, and no backend type refuses a load", "[cli]") {
    SpecHub hub(arch_hub_spec());
    for (const auto& [name, backend] : arch_backends()) {
        ProcessResult r = hub.box.kh("load", "kernhub-test/arch-" + name + "@v1", hub.server->endpoint(),
                                     {"--symbol", "kh_add_i32", "-q"}, {{"KERNHUB_CUDA_DRIVER", no_driver(hub.box)}});
        INFO(name << ": " << describe(r));
        CHECK(r.exit_code == 0);
    }
}

TEST_CASE("with a driver that describes no device the device arch check is skipped", "[cli][needs:cuda-stub]") {
    SpecHub hub(arch_hub_spec());
    EnvChanges env = {{"KERNHUB_CUDA_DRIVER", k_cuda_stub_driver.string()}};
#if defined(__SANITIZE_ADDRESS__)
    // Under ASan, LeakSanitizer's exit-time tracer dies (SIGSEGV at
    // 0xc08) in this CLI process, which loads the stub driver and a kernel
    // after it; the leak check stays with the in-process tests.
    const char* asan = std::getenv("ASAN_OPTIONS");
    env["ASAN_OPTIONS"] = std::string(asan != nullptr ? asan : "") + ":detect_leaks=0";
#endif
    ProcessResult r = hub.box.kh("load", "kernhub-test/arch-foreign@v1", hub.server->endpoint(),
                                 {"--symbol", "kh_add_i32", "-q"}, env);
    INFO(describe(r));
    CHECK(r.exit_code == 0);
}

TEST_CASE("a CUDA variant declaring archs no device has fails without a driver naming the driver, not the archs",
          "[cli][cuda][needs:nvcc]") {
    SpecHub hub(arch_hub_spec());
    for (const bool chosen : {true, false}) {
        // --target picks the CUDA variant (no check, it is for another
        // machine); without it selection here never picks it, and the CPU
        // variant, whose metadata says cuda too, loads.
        std::vector<std::string> more{"--symbol", chosen ? "kh_vector_add" : "kh_add_i32", "-q"};
        if (chosen) more.insert(more.end(), {"--target", "native-cuda"});
        ProcessResult r = hub.box.kh("load", "kernhub-test/arch-foreign@v1", hub.server->endpoint(), more,
                                     {{"KERNHUB_CUDA_DRIVER", no_driver(hub.box)}});
        INFO(describe(r));
        if (!chosen) {
            CHECK(r.exit_code == 0);
            continue;
        }
        check_error(r, 7, {"no CUDA driver", "vector_add.fatbin"});
        CHECK(r.err.find("1.0a") == std::string::npos);
        CHECK(r.err.find("architectures") == std::string::npos);
    }
}
