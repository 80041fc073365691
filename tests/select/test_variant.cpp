// parse_variant against a table of real hub names and near misses.
#include <catch2/catch.hpp>

#include <algorithm>
#include <sstream>

#include "select/variant.hpp"

using namespace kernhub::select;

namespace {

Backend backend(BackendKind kind, int major = 0, int minor = 0) {
    Backend b;
    b.kind = kind;
    b.major = major;
    b.minor = minor;
    b.versioned = major != 0 || minor != 0;
    return b;
}

Backend cu(int major, int minor) {
    return backend(BackendKind::cuda, major, minor);
}

struct FamilyVersion {
    int major = 0;
    int minor = 0;
};

// A host-specific variant: <family>-<backend>-<cpu>-<os>.
Variant specific(const std::string& name, Family family, FamilyVersion version, const std::string& abi, Backend b,
                 const std::string& cpu, const std::string& os) {
    Variant v;
    v.name = name;
    v.family = family;
    v.family_major = version.major;
    v.family_minor = version.minor;
    v.cxx_abi = abi;
    v.backend = b;
    v.cpu = cpu;
    v.os = os;
    return v;
}

Variant noarch(const std::string& name, Family family, BackendKind kind) {
    Variant v;
    v.name = name;
    v.family = family;
    v.backend = backend(kind);
    v.noarch = true;
    return v;
}

// Every field on one line, so a failed comparison shows exactly what differs.
std::string summary(const Variant& v) {
    std::ostringstream out;
    out << v.name << " family=" << static_cast<int>(v.family) << " fam=" << v.family_major << "." << v.family_minor
        << " abi=" << v.cxx_abi << " backend=" << static_cast<int>(v.backend.kind) << ":" << v.backend.major << "."
        << v.backend.minor << (v.backend.versioned ? "v" : "u") << " cpu=" << v.cpu << " os=" << v.os
        << " noarch=" << v.noarch;
    return out.str();
}

struct ParseRow {
    std::string name;
    std::optional<Variant> expected;  // nullopt: the name must be refused
};

ParseRow ok(const Variant& v) {
    return {v.name, v};
}
ParseRow bad(const std::string& name) {
    return {name, std::nullopt};
}

const Family N = Family::native;
const Family T = Family::torch;
const Family S = Family::torch_stable_abi;
const Family NA = Family::torch_noarch;
const FamilyVersion none{};
const Backend cpu_b = backend(BackendKind::cpu);

std::vector<ParseRow> valid_names() {
    return {
        // kernhub's native family
        ok(specific("native-cpu-x86_64-linux", N, none, "", cpu_b, "x86_64", "linux")),
        ok(specific("native-cpu-aarch64-darwin", N, none, "", cpu_b, "aarch64", "darwin")),
        ok(specific("native-cu128-x86_64-linux", N, none, "", cu(12, 8), "x86_64", "linux")),
        ok(specific("native-cu130-aarch64-linux", N, none, "", cu(13, 0), "aarch64", "linux")),
        ok(specific("native-cu118-x86_64-windows", N, none, "", cu(11, 8), "x86_64", "windows")),
        ok(noarch("native-cuda", N, BackendKind::cuda)),
        // versioned torch, with and without the ABI part
        ok(specific("torch28-cxx11-cu128-x86_64-linux", T, {2, 8}, "cxx11", cu(12, 8), "x86_64", "linux")),
        ok(specific("torch29-cxx11-cpu-aarch64-linux", T, {2, 9}, "cxx11", cpu_b, "aarch64", "linux")),
        ok(specific("torch27-cxx11-rocm63-x86_64-linux", T, {2, 7}, "cxx11", backend(BackendKind::rocm, 6, 3), "x86_64",
                    "linux")),
        ok(specific("torch28-cxx11-xpu20251-x86_64-linux", T, {2, 8}, "cxx11", backend(BackendKind::xpu, 2025, 1),
                    "x86_64", "linux")),
        ok(specific("torch28-metal-aarch64-darwin", T, {2, 8}, "", backend(BackendKind::metal), "aarch64", "darwin")),
        ok(specific("torch26-cxx98-cu118-x86_64-linux", T, {2, 6}, "cxx98", cu(11, 8), "x86_64", "linux")),
        ok(specific("torch210-cxx11-cu130-x86_64-linux", T, {2, 10}, "cxx11", cu(13, 0), "x86_64", "linux")),
        ok(specific("torch29-cu130-x86_64-linux", T, {2, 9}, "", cu(13, 0), "x86_64", "linux")),
        ok(specific("torch28-cann81-aarch64-linux", T, {2, 8}, "", backend(BackendKind::cann, 8, 1), "aarch64",
                    "linux")),
        ok(specific("torch28-neuron-x86_64-linux", T, {2, 8}, "", backend(BackendKind::neuron), "x86_64", "linux")),
        // stable ABI and tvm-ffi
        ok(specific("torch-stable-abi29-cu128-x86_64-linux", S, {2, 9}, "", cu(12, 8), "x86_64", "linux")),
        ok(specific("torch-stable-abi210-cpu-aarch64-linux", S, {2, 10}, "", cpu_b, "aarch64", "linux")),
        ok(specific("tvm-ffi01-cu128-x86_64-linux", Family::tvm_ffi, {0, 1}, "", cu(12, 8), "x86_64", "linux")),
        // noarch torch and universal
        ok(noarch("torch-cpu", NA, BackendKind::cpu)),
        ok(noarch("torch-cuda", NA, BackendKind::cuda)),
        ok(noarch("torch-rocm", NA, BackendKind::rocm)),
        ok(noarch("torch-metal", NA, BackendKind::metal)),
        ok(noarch("torch-xpu", NA, BackendKind::xpu)),
        ok(noarch("torch-npu", NA, BackendKind::npu)),
        ok(noarch("torch-tpu", NA, BackendKind::tpu)),
        ok(noarch("torch-universal", Family::torch_universal, BackendKind::none)),
    };
}

std::vector<ParseRow> invalid_names() {
    return {
        bad(""),
        bad("native-cpu-riscv-linux"),
        bad("native-cpu-x86_64-freebsd"),
        bad("torch28-cxx11-cu12-x86_64-linux"),   // CUDA major needs two digits
        bad("torch28-cxx11-cu098-x86_64-linux"),  // leading zero
        bad("torch28-cxx11-cu128x-x86_64-linux"),
        bad("native-cu128-x86_64-linux-extra"),  // trailing garbage
        bad("native-cu128-x86_64-linux-"),
        bad("native-cu128-x86_64"),  // no os
        bad("native--cpu-x86_64-linux"),
        bad("native-cpu"),
        bad("native-rocm63-x86_64-linux"),  // native builds are CPU or CUDA only
        bad("native-cuda-x86_64-linux"),
        bad("torch-universal-x86_64-linux"),
        bad("torch28-npu-aarch64-linux"),      // npu is a noarch word; its arch builds say cann
        bad("torch2-cxx11-cpu-x86_64-linux"),  // {MM} needs two or three digits
        bad("torch2100-cxx11-cpu-x86_64-linux"),
        bad("torch201-cxx11-cpu-x86_64-linux"),  // minor with a leading zero
        bad("torch28-cxx14-cpu-x86_64-linux"),
        bad("torch28-cxx11-xpu2025-x86_64-linux"),  // xpu needs YYYY + m
        bad("torch-stable-abi-cu128-x86_64-linux"),
        bad("torch-stable-cu128-x86_64-linux"),
        bad("tvm-ffi-cu128-x86_64-linux"),
        bad("TORCH28-cxx11-cu128-x86_64-linux"),
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
        CHECK(summary(*parsed) == summary(*row.expected));
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
