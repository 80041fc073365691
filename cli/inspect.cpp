#include <iostream>

#include "commands.hpp"
#include "common.hpp"
#include "interrupt.hpp"
#include "kernhub/inspect.hpp"

namespace kernhub::cli {

static nlohmann::ordered_json entry_json(const BinaryEntry& entry) {
    return {
        {"kind", to_string(entry.kind)}, {"arch", entry.arch}, {"compressed", entry.compressed}, {"size", entry.size}};
}

static nlohmann::ordered_json inspect_json(const InspectResult& result) {
    nlohmann::ordered_json out = {{"format", to_string(result.format)}};
    if (result.elf) {
        const ElfInfo& elf = *result.elf;
        out["class"] = elf.elf_class;
        out["machine"] = elf.machine;
        out["type"] = elf.type;
        out["glibc_versions"] = elf.glibc_versions;
        out["max_glibc"] = elf.max_glibc;
        out["needed"] = elf.needed;
        out["exported_functions"] = elf.exported_functions;
        out["tvm_ffi_functions"] = elf.tvm_ffi_functions;
        out["torch_ops"] = elf.torch_ops;
        out["torch_schemas"] = elf.torch_schemas;
        out["torch_namespaces"] = elf.torch_namespaces;
        return out;
    }
    const FatbinInfo fatbin = result.fatbin.value_or(FatbinInfo{});
    out["containers"] = fatbin.containers;
    out["entries"] = nlohmann::ordered_json::array();
    for (const auto& entry : fatbin.entries) out["entries"].push_back(entry_json(entry));
    if (fatbin.selected) {
        out["selected"] = {{"kind", to_string(fatbin.selected->kind)}, {"arch", fatbin.selected->arch}};
    }
    return out;
}

static void print_human(const InspectResult& result) {
    std::cout << printable(result.path) << ": " << to_string(result.format) << '\n';
    if (result.elf) {
        const ElfInfo& elf = *result.elf;
        std::cout << "  ELF" << elf.elf_class << " " << elf.type << " " << elf.machine << '\n'
                  << "  needs " << (elf.max_glibc.empty() ? "no versioned glibc" : printable(elf.max_glibc)) << '\n';
        for (const auto& lib : elf.needed) std::cout << "  NEEDED " << printable(lib) << '\n';
        if (!elf.tvm_ffi_functions.empty()) {
            std::cout << "  tvm-ffi functions (" << elf.tvm_ffi_functions.size() << "):\n";
            for (const auto& name : elf.tvm_ffi_functions) std::cout << "    " << printable(name) << '\n';
        }
        for (const auto& name : elf.torch_namespaces) std::cout << "  torch namespace " << printable(name) << '\n';
        if (!elf.torch_ops.empty()) {
            std::cout << "  torch ops (" << elf.torch_ops.size() << "):\n";
            for (const auto& name : elf.torch_ops) std::cout << "    " << printable(name) << '\n';
        }
        return;
    }
    const FatbinInfo fatbin = result.fatbin.value_or(FatbinInfo{});
    for (const auto& entry : fatbin.entries) {
        std::cout << "  " << to_string(entry.kind) << "  " << entry.arch << "  " << human_size(entry.size)
                  << (entry.compressed ? "  compressed" : "") << '\n';
    }
    if (fatbin.selected)
        std::cout << "runs: " << to_string(fatbin.selected->kind) << " " << fatbin.selected->arch << '\n';
}

Command add_inspect_command(CLI::App& app) {
    auto file = std::make_shared<std::string>();
    auto cc = std::make_shared<std::string>();
    auto json = std::make_shared<bool>(false);
    CLI::App* command = app.add_subcommand("inspect", "Show what a .so, fatbin or cubin holds and what runs where");
    command->add_option("file", *file, "A shared object, CUDA fatbin or cubin")->required();
    command->add_option("--cc", *cc, "Compute capability to check, e.g. 9.0");
    command->add_flag("--json", *json, "Print one JSON object on stdout");
    return {command,
            [file, cc, json]() {
                std::optional<ComputeCapability> capability;
                if (!cc->empty()) capability = parse_compute_capability(*cc);
                InspectResult result = inspect_file(*file, capability, interrupt_flag());
                if (*json) {
                    print_json(inspect_json(result));
                } else {
                    print_human(result);
                }
                return 0;
            },
            k_read_only_interrupted};
}

}  // namespace kernhub::cli
