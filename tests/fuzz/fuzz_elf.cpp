// ELF files before dlopen: the header check the loader runs, the whole
// inspection (dynamic segment, version needs, .dynsym) `inspect` runs, and
// what the torch-op kind reads before a lazy load (relocations through the
// dynamic segment, op names from the read-only sections, the namespace
// checked against the bytes), and the same bytes read as an _ops.py.
#include <string>

#include "elf/elf_binding.hpp"
#include "elf/elf_header.hpp"
#include "elf/elf_inspect.hpp"
#include "fuzz_target.hpp"
#include "loader/torch_namespace.hpp"
#include "loader/torch_ops.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    (void)kernhub::elf::parse_elf_header(data, size);
    fuzz::expect_error_or_success([&] {
        kernhub::elf::ElfFacts facts = kernhub::elf::inspect_elf(data, size, "fuzz.so");
        (void)kernhub::elf::machine_name(facts.machine);
        for (const auto& version : facts.glibc_versions) (void)kernhub::elf::compare_glibc(version, "GLIBC_2.34");
    });
    fuzz::expect_error_or_success([&] {
        const kernhub::elf::BindingFacts binding = kernhub::elf::inspect_binding(data, size, "fuzz.so");
        for (const auto& ref : binding.undefined) (void)kernhub::elf::relocation_name(binding.machine, ref.type);
    });
    fuzz::expect_error_or_success([&] {
        const kernhub::loader::TorchOpListing ops = kernhub::loader::list_torch_ops(data, size, "fuzz.so");
        for (const auto& op : ops.ops) (void)kernhub::loader::may_define_op(ops, op);
        // Each name the bytes hold, claimed as _ops.py would and as a file name would.
        std::size_t claims = 0;
        for (const auto& name : ops.names) {
            if (++claims > 16) break;
            for (bool from_ops_py : {true, false}) {
                fuzz::expect_error_or_success([&] {
                    (void)kernhub::loader::choose_namespace(ops, {name, from_ops_py}, data, size, "fuzz.so");
                });
            }
        }
    });
    (void)kernhub::loader::read_ops_py(std::string(reinterpret_cast<const char*>(data), size));
    return 0;
}
