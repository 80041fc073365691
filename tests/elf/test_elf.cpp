// The ELF inspector against real files: the build's fixtures and demo
// kernel, the system C library, objects compiled at test time (including
// 32-bit and big-endian ones made with -nostdlib, so no foreign C library is
// needed), and the GLIBC version ordering.
#include <elf.h>
#include <link.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "elf_test_support.hpp"
#include "support/requirements.hpp"
#include "support/temp_dir.hpp"

using kernhub::elf::compare_glibc;
using kernhub::elf::ElfFacts;
using kernhub::elf::host_glibc;
using kernhub::test::TempDir;
using namespace kernhub::test::elf;
using Strings = std::vector<std::string>;

namespace {

constexpr int k_host_machine =
#if defined(__x86_64__)
    EM_X86_64;
#elif defined(__aarch64__)
    EM_AARCH64;
#else
    0;  // checked only where the build host is one of the two above
#endif

void check_host_shared_object(const ElfFacts& facts) {
    CHECK(facts.elf_class == 64);
    CHECK(facts.little_endian);
    CHECK(facts.type == "DYN");
    if (k_host_machine != 0) CHECK(facts.machine == k_host_machine);
#if defined(__x86_64__)
    CHECK(facts.machine_name == "x86_64");
#endif
}

void check_glibc_versions(const ElfFacts& facts) {
    REQUIRE_FALSE(facts.glibc_versions.empty());
    for (const std::string& version : facts.glibc_versions) CHECK(version.rfind("GLIBC_", 0) == 0);
    CHECK(std::is_sorted(facts.glibc_versions.begin(), facts.glibc_versions.end(),
                         [](const std::string& a, const std::string& b) { return compare_glibc(a, b) < 0; }));
    CHECK(std::adjacent_find(facts.glibc_versions.begin(), facts.glibc_versions.end()) == facts.glibc_versions.end());
    CHECK(facts.max_glibc == facts.glibc_versions.back());
    CHECK(compare_glibc(facts.max_glibc, host_glibc()) <= 0);
}

// dl_iterate_phdr reports the libc this process really runs on, wherever the
// distribution keeps it.
int find_libc(struct dl_phdr_info* info, size_t, void* out) {
    const std::string name = info->dlpi_name ? info->dlpi_name : "";
    if (name.find("/libc.so") == std::string::npos) return 0;
    *static_cast<std::string*>(out) = name;
    return 1;
}

}  // namespace

TEST_CASE("the good fixture is a host shared object exporting its two functions", "[elf]") {
    const ElfFacts facts = inspect_path(k_good);
    check_host_shared_object(facts);
    CHECK(facts.soname == "libkh_good.so");
    CHECK(facts.exported_functions == Strings{"kh_add_i32", "kh_fixture_id"});
    // It calls nothing itself; a sanitizer build links runtime calls in, so
    // only require that whatever it needs, this host has.
    for (const auto& version : facts.glibc_versions) CHECK(compare_glibc(version, host_glibc()) <= 0);
    CHECK(facts.max_glibc == (facts.glibc_versions.empty() ? "" : facts.glibc_versions.back()));
}

TEST_CASE("an undefined import is not reported as an export", "[elf]") {
    const ElfFacts facts = inspect_path(k_undefined);
    check_host_shared_object(facts);
    CHECK(facts.exported_functions == Strings{"kh_calls_missing"});
}

TEST_CASE("the demo kernel exports exactly its entry points", "[elf]") {
    REQUIRE(fs::exists(k_vector_add));  // built by the vector_add target, which test_elf depends on
    const ElfFacts facts = inspect_path(k_vector_add);
    check_host_shared_object(facts);
    CHECK(facts.exported_functions == Strings{"kh_abi_version", "kh_saxpy", "kh_vector_add"});
}

TEST_CASE("a library calling libc needs GLIBC versions this host has", "[elf]") {
    TempDir dir;
    const auto library = build_glibc_user(dir.path());
    REQUIRE(library);
    const ElfFacts facts = inspect_path(*library);
    check_host_shared_object(facts);
    CHECK(facts.soname == "libkh_needs_glibc.so.1");
    CHECK(std::find(facts.needed.begin(), facts.needed.end(), "libc.so.6") != facts.needed.end());
    CHECK(facts.exported_functions == Strings{"kh_needs_glibc"});
    check_glibc_versions(facts);
}

TEST_CASE("the system C library parses", "[elf]") {
    // This process runs on the system C library, so it is always there.
    std::string path;
    dl_iterate_phdr(find_libc, &path);
    INFO(path);
    REQUIRE(fs::exists(path));
    const ElfFacts facts = inspect_path(path);
    check_host_shared_object(facts);
    CHECK(facts.soname == "libc.so.6");
    CHECK(std::binary_search(facts.exported_functions.begin(), facts.exported_functions.end(), "memcpy"));
    CHECK(std::binary_search(facts.exported_functions.begin(), facts.exported_functions.end(), "printf"));
    // libc itself binds to the dynamic loader's GLIBC_ nodes.
    check_glibc_versions(facts);
}

TEST_CASE("a relocatable object has a type and no dynamic facts", "[elf]") {
    TempDir dir;
    write_text(dir.path() / "object.c", "int kh_object_fn(void) { return 7; }\n");
    const fs::path object = dir.path() / "object.o";
    REQUIRE(compile({"cc", "-c", "-o", object.string(), (dir.path() / "object.c").string()}));
    const ElfFacts facts = inspect_path(object);
    CHECK(facts.type == "REL");
    CHECK(facts.needed.empty());
    CHECK(facts.exported_functions.empty());  // .symtab, not .dynsym
}

namespace {

// Builds a stand-in libc.so.6 with GLIBC_2.2.5 and GLIBC_2.34 version nodes
// and a library binding to both, with -nostdlib, so any class and byte order
// the toolchain can emit is testable without that target's real C library.
// Each toolchain is its own test, which needs that toolchain ([needs:...]).
struct Toolchain {
    const char* tag;  // the requirement, without brackets
    const char* name;
    Strings compiler;
    int elf_class;
    bool little_endian;
    int machine;
};

const Toolchain k_x86_32 = {"needs:cc-m32", "x86 32-bit (cc -m32)", {"cc", "-m32"}, 32, true, EM_386};
const Toolchain k_ppc64 = {"needs:clang-ppc64",
                           "ppc64 big-endian (clang + lld)",
                           {"clang", "--target=powerpc64-linux-gnu", "-fuse-ld=lld"},
                           64,
                           false,
                           EM_PPC64};
const Toolchain k_ppc32 = {"needs:clang-ppc",
                           "ppc 32-bit big-endian (clang + lld)",
                           {"clang", "--target=powerpc-linux-gnu", "-fuse-ld=lld"},
                           32,
                           false,
                           EM_PPC};

// Whether the toolchain links a -nostdlib shared object here; checked by the
// test main before the test starts.
std::string why_toolchain_unusable(const Toolchain& toolchain) {
    try {
        TempDir dir;
        write_text(dir.path() / "probe.c", "int probe(void) { return 1; }\n");
        Strings argv = toolchain.compiler;
        argv.insert(argv.end(), {"-fPIC", "-shared", "-nostdlib", "-o", (dir.path() / "libprobe.so").string(),
                                 (dir.path() / "probe.c").string()});
        const kernhub::test::ProcessResult result = kernhub::test::run_process(argv);
        if (result.exit_code == 0) return {};
        return std::string(toolchain.name) + " cannot link a shared object here (exit " +
               std::to_string(result.exit_code) + ")";
    } catch (const std::exception& e) {
        return std::string(toolchain.name) + " cannot run here: " + e.what();
    }
}

KERNHUB_TEST_REQUIREMENT(k_x86_32.tag, [] { return why_toolchain_unusable(k_x86_32); });
KERNHUB_TEST_REQUIREMENT(k_ppc64.tag, [] { return why_toolchain_unusable(k_ppc64); });
KERNHUB_TEST_REQUIREMENT(k_ppc32.tag, [] { return why_toolchain_unusable(k_ppc32); });

void check_foreign_object(const Toolchain& toolchain) {
    INFO(toolchain.name);
    TempDir dir;
    const fs::path& d = dir.path();
    write_text(d / "stub.c", "int stub_old(void) { return 1; }\nint stub_new(void) { return 2; }\n");
    write_text(d / "stub.map",
               "GLIBC_2.2.5 { global: stub_old; local: *; };\nGLIBC_2.34 { global: stub_new; } GLIBC_2.2.5;\n");
    write_text(d / "user.c",
               "extern int stub_old(void);\nextern int stub_new(void);\n"
               "int user_fn(void) { return stub_old() + stub_new(); }\n");
    Strings libc = toolchain.compiler;
    libc.insert(libc.end(), {"-fPIC", "-shared", "-nostdlib", "-Wl,--version-script=" + (d / "stub.map").string(),
                             "-Wl,-soname,libc.so.6", "-o", (d / "libstub.so").string(), (d / "stub.c").string()});
    Strings user = toolchain.compiler;
    user.insert(user.end(), {"-fPIC", "-shared", "-nostdlib", "-Wl,-soname,libuser.so", "-o",
                             (d / "libuser.so").string(), (d / "user.c").string(), (d / "libstub.so").string()});
    REQUIRE(compile(libc));
    REQUIRE(compile(user));
    const ElfFacts facts = inspect_path(d / "libuser.so");
    CHECK(facts.elf_class == toolchain.elf_class);
    CHECK(facts.little_endian == toolchain.little_endian);
    CHECK(facts.type == "DYN");
    CHECK(facts.machine == toolchain.machine);
    CHECK(facts.soname == "libuser.so");
    CHECK(facts.needed == Strings{"libc.so.6"});
    CHECK(facts.glibc_versions == Strings{"GLIBC_2.2.5", "GLIBC_2.34"});
    CHECK(facts.max_glibc == "GLIBC_2.34");
    CHECK(facts.exported_functions == Strings{"user_fn"});
}

}  // namespace

TEST_CASE("a 32-bit x86 object parses with its own field layout", "[elf][needs:cc-m32]") {
    check_foreign_object(k_x86_32);
}

TEST_CASE("a 64-bit big-endian ppc64 object parses with its own field layout", "[elf][needs:clang-ppc64]") {
    check_foreign_object(k_ppc64);
}

TEST_CASE("a 32-bit big-endian ppc object parses with its own field layout", "[elf][needs:clang-ppc]") {
    check_foreign_object(k_ppc32);
}

TEST_CASE("flipping EI_DATA reads every field byte-swapped or rejects the file", "[elf]") {
    std::vector<std::uint8_t> bytes = read_bytes(k_good);
    bytes[EI_DATA] = ELFDATA2MSB;
    // Byte-swapped, e_type 3 becomes 0x300 and the table offsets become huge,
    // so the honest outcomes are a big-endian non-DYN reading or a refusal.
    try {
        const ElfFacts facts = kernhub::elf::inspect_elf(bytes.data(), bytes.size(), "swapped.so");
        CHECK_FALSE(facts.little_endian);
        CHECK(facts.type == "0x300");
    } catch (const kernhub::Error& error) {
        CHECK(error.code() == kernhub::ErrorCode::verification);
        CHECK(error.message().find("swapped.so") != std::string::npos);
    }
}

TEST_CASE("GLIBC versions compare numerically", "[elf]") {
    struct Row {
        const char* a;
        const char* b;
        int sign;
    };
    const Row rows[] = {
        {"GLIBC_2.34", "GLIBC_2.4", 1},
        {"GLIBC_2.2.5", "GLIBC_2.3", -1},
        {"GLIBC_2.17", "GLIBC_2.17", 0},
        {"GLIBC_2.2", "GLIBC_2.2.5", -1},
        {"GLIBC_2.38", "GLIBC_2.4", 1},
        {"GLIBC_10.0", "GLIBC_9.99", 1},
        {"GLIBC_2.3.4", "GLIBC_2.3.10", -1},
        {"GLIBC_2.99999999999999999999999", "GLIBC_2.3", 1},
        {"", "GLIBC_2.0", -1},
        {"GLIBC_2.", "GLIBC_2.0", -1},
        {"GLIBC_2.36", "2.36", 1},
    };
    for (const Row& row : rows) {
        INFO(row.a << " vs " << row.b);
        const int forward = compare_glibc(row.a, row.b);
        const int backward = compare_glibc(row.b, row.a);
        CHECK((forward > 0) - (forward < 0) == row.sign);
        CHECK((backward > 0) - (backward < 0) == -row.sign);
    }
}

TEST_CASE("the host glibc version is named like a version node", "[elf]") {
    const std::string host = host_glibc();
#if defined(__GLIBC__)
    REQUIRE(host.rfind("GLIBC_2.", 0) == 0);
    CHECK(compare_glibc(host, "GLIBC_2.17") >= 0);  // the oldest glibc any supported distribution ships
#else
    CHECK(host.empty());
#endif
}
