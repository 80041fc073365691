// parse_variant against a table of real hub names and near misses.
#include <catch2/catch.hpp>

#include <algorithm>
#include <sstream>

#include "select/variant.hpp"

using namespace kernhub::select;

namespace {

std::string family_word(Family family) {
    switch (family) {
        case Family::native:
            return "native";
        case Family::torch:
            return "torch";
        case Family::torch_stable_abi:
            return "stable";
        case Family::tvm_ffi:
            return "tvm";
        case Family::noarch:
            return "noarch";
        case Family::sdk:
            return "sdk";
    }
    return "?";
}

// Every field on one line, so a failed comparison shows exactly what
// differs: "<family> [<M.m>] [<abi>] [<backend>] [<word>] [py<X.Y><abi>]
// [<cpu>/<os>] [noarch] [legacy] [mlx]".
std::string summary(const Variant& v) {
    std::ostringstream out;
    out << family_word(v.family);
    if (v.family == Family::torch || v.family == Family::torch_stable_abi || v.family == Family::tvm_ffi) {
        out << " " << v.family_major << "." << v.family_minor;
    }
    if (!v.cxx_abi.empty()) out << " " << v.cxx_abi;
    if (v.backend.kind != BackendKind::none) out << " " << backend_dotted(v.backend);
    if (!v.backend_word.empty()) out << " word=" << v.backend_word;
    if (v.python) {
        out << " py" << v.python->major << "." << v.python->minor << (v.python->abi3t ? "abi3t" : "abi3")
            << (v.python->legacy ? "L" : "");
    }
    if (!v.cpu.empty() || !v.os.empty()) out << " " << v.cpu << "/" << v.os;
    if (v.noarch) out << " noarch";
    if (v.legacy) out << " legacy";
    if (v.mlx) out << " mlx";
    return out.str();
}

struct ParseRow {
    std::string name;
    std::optional<std::string> expected;  // nullopt: the name must be refused
};

ParseRow ok(const std::string& name, const std::string& expected) {
    return {name, expected};
}
ParseRow bad(const std::string& name) {
    return {name, std::nullopt};
}

std::vector<ParseRow> valid_names() {
    return {
        // kernhub's native family
        ok("native-cpu-x86_64-linux", "native cpu x86_64/linux"),
        ok("native-cpu-aarch64-darwin", "native cpu aarch64/darwin"),
        ok("native-cu128-x86_64-linux", "native cuda-12.8 x86_64/linux"),
        ok("native-cu130-aarch64-linux", "native cuda-13.0 aarch64/linux"),
        ok("native-cu118-x86_64-windows", "native cuda-11.8 x86_64/windows"),
        ok("native-cuda", "native cuda noarch"),
        // kernels' legacy names: implicitly cpython-3.9-abi3
        ok("torch28-cxx11-cu128-x86_64-linux", "torch 2.8 cxx11 cuda-12.8 py3.9abi3L x86_64/linux legacy"),
        ok("torch210-cu130-aarch64-linux", "torch 2.10 cuda-13.0 py3.9abi3L aarch64/linux legacy"),
        ok("torch27-cxx11-rocm63-x86_64-linux", "torch 2.7 cxx11 rocm-6.3 py3.9abi3L x86_64/linux legacy"),
        ok("torch29-cxx11-rocm714-x86_64-linux", "torch 2.9 cxx11 rocm-7.14 py3.9abi3L x86_64/linux legacy"),
        ok("torch29-cxx11-rocm71-x86_64-linux", "torch 2.9 cxx11 rocm-7.1 py3.9abi3L x86_64/linux legacy"),
        ok("torch28-cxx11-xpu20251-x86_64-linux", "torch 2.8 cxx11 xpu-2025.1 py3.9abi3L x86_64/linux legacy"),
        ok("torch28-metal-aarch64-darwin", "torch 2.8 metal py3.9abi3L aarch64/darwin legacy"),
        ok("torch28-cxx98-cpu-x86_64-linux", "torch 2.8 cxx98 cpu py3.9abi3L x86_64/linux legacy"),
        ok("torch28-cann81-aarch64-linux", "torch 2.8 cann-8.1 py3.9abi3L aarch64/linux legacy"),
        ok("torch28-neuron-x86_64-linux", "torch 2.8 neuron py3.9abi3L x86_64/linux legacy"),
        ok("torch28-tpu-x86_64-linux", "torch 2.8 tpu py3.9abi3L x86_64/linux legacy"),
        ok("torch28-cu92-x86_64-linux", "torch 2.8 cuda-9.2 py3.9abi3L x86_64/linux legacy"),
        ok("torch201-cpu-x86_64-linux", "torch 2.1 cpu py3.9abi3L x86_64/linux legacy"),  // "01" reads as 1
        ok("torch28-cpu-riscv64-freebsd", "torch 2.8 cpu py3.9abi3L riscv64/freebsd legacy"),  // any cpu/os
        ok("torch-stable-abi211-cu128-x86_64-linux", "stable 2.11 cuda-12.8 py3.9abi3L x86_64/linux legacy"),
        ok("tvm-ffi01-cu128-x86_64-linux", "tvm 0.1 cuda-12.8 py3.9abi3L x86_64/linux legacy"),
        ok("tvm-ffi010-cpu-x86_64-linux", "tvm 0.10 cpu py3.9abi3L x86_64/linux legacy"),
        // the dotted names of kernels 0.19
        ok("torch-2.10-cxx11-cuda-12.8-cpython-3.9-abi3-x86_64-linux",
           "torch 2.10 cxx11 cuda-12.8 py3.9abi3 x86_64/linux"),
        ok("torch-2.10-cpu-cpython-3.12-abi3-aarch64-darwin", "torch 2.10 cpu py3.12abi3 aarch64/darwin"),
        ok("torch-2.11-rocm-7.14-cpython-3.15-abi3t-x86_64-linux",
           "torch 2.11 rocm-7.14 py3.15abi3t x86_64/linux"),
        ok("torch-stable-abi-2.11-cuda-13.0-cpython-3.10-abi3-x86_64-linux",
           "stable 2.11 cuda-13.0 py3.10abi3 x86_64/linux"),
        ok("tvm-ffi-0.1-xpu-2025.1-cpython-3.9-abi3-x86_64-linux", "tvm 0.1 xpu-2025.1 py3.9abi3 x86_64/linux"),
        ok("torch-2.10-cann-8.1-cpython-3.9-abi3-aarch64-linux", "torch 2.10 cann-8.1 py3.9abi3 aarch64/linux"),
        ok("torch-2.10-metal-cpython-3.9-abi3-aarch64-darwin", "torch 2.10 metal py3.9abi3 aarch64/darwin"),
        // noarch
        ok("torch-cpu", "noarch word=cpu noarch"),
        ok("torch-cuda", "noarch word=cuda noarch"),
        ok("torch-npu", "noarch word=npu noarch"),
        ok("torch-universal", "noarch word=universal noarch"),
        ok("torch-foo-bar", "noarch word=foo-bar noarch"),  // kernels takes any word
        ok("mlx-metal", "noarch word=metal noarch mlx"),
        ok("mlx-universal", "noarch word=universal noarch mlx"),
        // SDKs
        ok("sdk", "sdk noarch"),
        ok("sdk-cuda", "sdk word=cuda noarch"),
        ok("sdk-cpython-3.12-abi3-x86_64-linux", "sdk py3.12abi3 x86_64/linux"),
        ok("sdk-cuda-12.8-cpython-3.12-abi3-x86_64-linux", "sdk cuda-12.8 py3.12abi3 x86_64/linux"),
        ok("sdk-cpu-cpython-3.15-abi3t-aarch64-linux", "sdk cpu py3.15abi3t aarch64/linux"),
    };
}

std::vector<ParseRow> invalid_names() {
    return {
        bad(""),
        bad("native-cpu-riscv-linux"),
        bad("native-cpu-x86_64-freebsd"),
        bad("native-cu128-x86_64-linux-extra"),  // trailing garbage
        bad("native-cu128-x86_64-linux-"),
        bad("native-cu128-x86_64"),  // no os
        bad("native--cpu-x86_64-linux"),
        bad("native-cpu"),
        bad("native-rocm63-x86_64-linux"),  // native builds are CPU or CUDA only
        bad("native-cuda-x86_64-linux"),
        bad("native-cu92-x86_64-linux"),  // native CUDA majors have two digits
        bad("torch28-cxx11-cu1-x86_64-linux"),  // a version needs two digits
        bad("torch28-cxx11-cu128x-x86_64-linux"),
        bad("torch28-cuda12-x86_64-linux"),  // "cu" decides the kind: a malformed CUDA name
        bad("torch28-npu-aarch64-linux"),    // npu is no backend
        bad("torch2-cxx11-cpu-x86_64-linux"),  // {M}{MM} needs two digits
        bad("torch28-cxx14-cpu-x86_64-linux"),
        bad("torch28-cu128-extra-x86_64-linux"),  // a legacy backend is one token
        bad("torch28-cpython-3.9-abi3-x86_64-linux"),
        bad("torch28-cu128-x86_64"),  // no os
        bad("torch-stable-abi-cu128-x86_64-linux"),
        bad("torch-stable-abi-2.11-cu128-cpython-3.9-abi3-x86_64-linux"),  // legacy backend in a dotted name
        bad("tvm-ffi-cu128-x86_64-linux"),
        bad("tvm-ffi-0.1-cuda-12.8-x86_64-linux"),  // a dotted name needs its Python tag
        bad("torch-2.10-cuda-12.8-cpython-3.9-x86_64-linux"),
        bad("torch-2.10-cuda-12.8-cpython-3.9-abi4-x86_64-linux"),
        bad("torch-2.10-cuda-12.8-cpython-3.12-abi3t-x86_64-linux"),  // abi3t needs 3.15
        bad("torch-2.10-cuda-cpython-3.9-abi3-x86_64-linux"),         // CUDA needs its version
        bad("torch-2.10-cpu-1.0-cpython-3.9-abi3-x86_64-linux"),
        bad("torch-2.10-cpython-3.9-abi3-x86_64-linux"),  // no backend
        bad("torch-2.10.1-cpu-cpython-3.9-abi3-x86_64-linux"),
        bad("mlx-2.0-metal-cpython-3.9-abi3-aarch64-darwin"),  // no versioned MLX yet
        bad("mlx"),
        bad("sdk-cuda-extra"),
        bad("sdk-cuda-12.8"),  // a versioned backend needs the compiled form
        bad("sdk-cpython-3.12"),
        bad("sdk-cpython-3.12-abi3-x86_64"),
        bad("TORCH28-cxx11-cu128-x86_64-linux"),
        bad("torch28-cu123456789012-x86_64-linux"),  // past k_max_version_digits
        bad("build"),
    };
}

std::vector<ParseRow> parse_table() {
    std::vector<ParseRow> rows = valid_names();
    const std::vector<ParseRow> refused = invalid_names();
    rows.insert(rows.end(), refused.begin(), refused.end());
    return rows;
}

}  // namespace

TEST_CASE("parse_variant reads every family of the grammar and refuses near misses", "[select]") {
    const ParseRow row = GENERATE(from_range(parse_table()));
    INFO("name: '" << row.name << "'");
    const std::optional<Variant> parsed = parse_variant(row.name);
    REQUIRE(parsed.has_value() == row.expected.has_value());
    if (row.expected) {
        CHECK(summary(*parsed) == *row.expected);
        CHECK(parsed->name == row.name);
    }
}

TEST_CASE("parse_variant table is large enough to mean something", "[select]") {
    const std::vector<ParseRow> rows = parse_table();
    const auto valid =
        std::count_if(rows.begin(), rows.end(), [](const ParseRow& r) { return r.expected.has_value(); });
    CHECK(valid >= 15);
    CHECK(rows.size() - static_cast<std::size_t>(valid) >= 15);
}

TEST_CASE("describe names platform, CUDA and torch", "[select]") {
    HostFacts host;
    host.cpu = "x86_64";
    host.os = "linux";
    CHECK(describe(host) == "x86_64-linux, no CUDA");
    host.cuda = std::make_pair(12, 8);
    CHECK(describe(host) == "x86_64-linux, CUDA 12.8");
    host.torch = std::make_pair(2, 10);
    CHECK(describe(host) == "x86_64-linux, CUDA 12.8, torch 2.10");
}

TEST_CASE("detect_host reports this machine in variant spelling", "[select]") {
    const HostFacts host = detect_host();
    CHECK((host.cpu == "x86_64" || host.cpu == "aarch64"));
    CHECK(host.os == "linux");  // the test suite runs on Linux only
    CHECK_FALSE(host.cuda.has_value());
    CHECK_FALSE(host.torch.has_value());
    CHECK(host.targets.empty());
    // The host can always name a native CPU variant it would accept.
    CHECK(parse_variant("native-cpu-" + host.cpu + "-" + host.os).has_value());
}

TEST_CASE("host_from_uname maps uname spellings to variant spellings", "[select]") {
    struct Row {
        const char* sysname;
        const char* machine;
        const char* cpu;
        const char* os;
    };
    const Row row = GENERATE(values<Row>({
        {"Linux", "x86_64", "x86_64", "linux"},
        {"Linux", "aarch64", "aarch64", "linux"},
        {"Darwin", "arm64", "aarch64", "darwin"},
        {"Darwin", "x86_64", "x86_64", "darwin"},
        {"FreeBSD", "amd64", "x86_64", "freebsd"},
        {"MINGW64_NT-10.0", "x86_64", "x86_64", "windows"},
        {"Linux", "riscv64", "riscv64", "linux"},
    }));
    INFO(row.sysname << " / " << row.machine);
    const HostFacts host = host_from_uname(row.sysname, row.machine);
    CHECK(host.cpu == row.cpu);
    CHECK(host.os == row.os);
}
