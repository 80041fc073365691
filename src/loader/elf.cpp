// The ELF header checks that run after dlopen refused a file, to say why in
// kernhub's words: what kernhub agrees to load on this host. The header
// itself is read by the elf module.
#include <elf.h>

#include <string>

#include "elf/elf_header.hpp"
#include "kernhub/error.hpp"
#include "loader/loader.hpp"

namespace kernhub::loader {

namespace {

// "unknown" alone reads badly in the middle of a sentence.
std::string describe_machine(int machine) {
    const std::string name = elf::machine_name(machine);
    return name == "unknown" ? "an unknown machine" : name;
}

}  // namespace

void validate_shared_object(const std::filesystem::path& path) {
    const elf::ElfHeaderFacts facts = elf::read_elf_header(path);
    const std::string name = path.string();
    if (facts.elf_class != ELFCLASS64) {
        throw Error(ErrorCode::verification,
                    name + " is a 32-bit ELF object (EI_CLASS " + std::to_string(facts.elf_class) +
                        "), kernhub loads only 64-bit shared objects; fetch the variant for this host");
    }
    if (!facts.little_endian) {
        throw Error(ErrorCode::verification, name +
                                                 " is a big-endian ELF object, this host needs little-endian; "
                                                 "fetch the variant for this host");
    }
    if (facts.type != ET_DYN) {
        throw Error(ErrorCode::verification, name + " is not a shared object (e_type " + std::to_string(facts.type) +
                                                 ", " + elf::describe_type(facts.type) + "; expected ET_DYN " +
                                                 std::to_string(ET_DYN) + "); the kernel variant must ship a .so");
    }
    const int host = elf::host_elf_machine();
    if (facts.machine != host) {
        throw Error(ErrorCode::verification, name + " is built for " + describe_machine(facts.machine) +
                                                 " (e_machine " + std::to_string(facts.machine) + "), this host is " +
                                                 describe_machine(host) + " (e_machine " + std::to_string(host) +
                                                 "); fetch the variant built for this host");
    }
}

}  // namespace kernhub::loader
