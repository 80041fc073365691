// ELF files before dlopen: the header check the loader runs, and the whole
// inspection (dynamic segment, version needs, .dynsym) `inspect` runs.
#include "elf/elf_header.hpp"
#include "elf/elf_inspect.hpp"
#include "fuzz_target.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    (void)kernhub::elf::parse_elf_header(data, size);
    fuzz::expect_error_or_success([&] {
        kernhub::elf::ElfFacts facts = kernhub::elf::inspect_elf(data, size, "fuzz.so");
        (void)kernhub::elf::machine_name(facts.machine);
        for (const auto& version : facts.glibc_versions) (void)kernhub::elf::compare_glibc(version, "GLIBC_2.34");
    });
    return 0;
}
