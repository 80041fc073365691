// inspect_binding: which undefined symbols ld.so binds at load even under
// RTLD_LAZY (any relocation but a PLT slot) and which wait for a first call,
// and the flags that make everything bind at load; read from real objects
// (the build's fixtures, a torch op library in the fuzz corpus, and ones
// compiled here). list_torch_ops over that op library.
#include <algorithm>
#include <catch2/catch.hpp>

#include "elf/elf_binding.hpp"
#include "elf/elf_test_support.hpp"
#include "loader/torch_ops.hpp"
#include "support/temp_dir.hpp"

using namespace kernhub::test;
using namespace kernhub::test::elf;

namespace {

kernhub::elf::BindingFacts binding_of(const fs::path& path) {
    const std::vector<std::uint8_t> bytes = read_bytes(path);
    return kernhub::elf::inspect_binding(bytes.data(), bytes.size(), path.string());
}

const kernhub::elf::UndefinedReference* find(const kernhub::elf::BindingFacts& facts, const std::string& symbol) {
    const auto it = std::find_if(facts.undefined.begin(), facts.undefined.end(),
                                 [&](const kernhub::elf::UndefinedReference& ref) { return ref.symbol == symbol; });
    return it == facts.undefined.end() ? nullptr : &*it;
}

const fs::path k_torch_library = fs::path(KERNHUB_SOURCE_DIR) / "tests/fuzz/corpus/elf/torch_pydata_ops.so";

}  // namespace

TEST_CASE("a called function nobody defines waits for the first call, and nothing binds at load", "[elf]") {
    const kernhub::elf::BindingFacts facts = binding_of(k_undefined);
    const auto* missing = find(facts, "kh_symbol_nobody_defines");
    REQUIRE(missing != nullptr);
    CHECK_FALSE(missing->eager);
    CHECK(kernhub::elf::relocation_name(facts.machine, missing->type).find("JUMP_SLOT") != std::string::npos);
    CHECK(facts.bind_now.empty());
    // Defined symbols are not listed.
    CHECK(find(binding_of(k_good), "kh_add_i32") == nullptr);
}

TEST_CASE("a data reference binds at load, a weak one is not listed, and -z now binds everything", "[elf]") {
    TempDir dir;
    const fs::path source = dir.path() / "refs.c";
    write_text(source,
               "extern int kh_data_nobody_defines;\n"
               "extern int kh_weak_nobody_defines __attribute__((weak));\n"
               "extern int kh_call_nobody_defines(void);\n"
               "__attribute__((visibility(\"default\"))) int* kh_data(void) { return &kh_data_nobody_defines; }\n"
               "__attribute__((visibility(\"default\"))) int* kh_weak(void) { return &kh_weak_nobody_defines; }\n"
               "__attribute__((visibility(\"default\"))) int kh_call(void) { return kh_call_nobody_defines(); }\n");
    const fs::path lazy = dir.path() / "liblazy.so";
    const fs::path now = dir.path() / "libnow.so";
    REQUIRE(compile({"cc", "-O1", "-fPIC", "-shared", "-o", lazy.string(), source.string()}));
    REQUIRE(compile({"cc", "-O1", "-fPIC", "-shared", "-Wl,-z,now", "-o", now.string(), source.string()}));

    const kernhub::elf::BindingFacts facts = binding_of(lazy);
    const auto* data = find(facts, "kh_data_nobody_defines");
    REQUIRE(data != nullptr);
    CHECK(data->eager);
    const auto* call = find(facts, "kh_call_nobody_defines");
    REQUIRE(call != nullptr);
    CHECK_FALSE(call->eager);
    CHECK(find(facts, "kh_weak_nobody_defines") == nullptr);
    CHECK(facts.bind_now.empty());
    CHECK(binding_of(now).bind_now == "DF_1_NOW");
}

TEST_CASE("a torch op library: Python's None binds at load, its module init waits, its ops are named", "[elf]") {
    const kernhub::elf::BindingFacts facts = binding_of(k_torch_library);
    const auto* none = find(facts, "_Py_NoneStruct");
    REQUIRE(none != nullptr);
    CHECK(none->eager);
    CHECK(kernhub::elf::relocation_name(facts.machine, none->type) == "R_X86_64_GLOB_DAT");
    const auto* create = find(facts, "PyModule_Create2");
    REQUIRE(create != nullptr);
    CHECK_FALSE(create->eager);

    const std::vector<std::uint8_t> bytes = read_bytes(k_torch_library);
    const kernhub::loader::TorchOpListing ops =
        kernhub::loader::list_torch_ops(bytes.data(), bytes.size(), k_torch_library.string());
    CHECK(ops.ops == std::vector<std::string>{"add_one", "add_one.out", "scale"});
    CHECK(kernhub::loader::may_define_op(ops, "add_one.out"));
    CHECK_FALSE(kernhub::loader::may_define_op(ops, "add_two"));
}
