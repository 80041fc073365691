#include <iostream>

#include "commands.hpp"
#include "common.hpp"
#include "kernhub/inspect.hpp"

namespace kernhub::cli {

static nlohmann::ordered_json entry_json(const BinaryEntry& entry) {
    return {{"kind", entry.kind}, {"arch", entry.arch}, {"compressed", entry.compressed}, {"size", entry.size}};
}

static nlohmann::ordered_json inspect_json(const InspectResult& result) {
    nlohmann::ordered_json out = {{"format", result.format}};
    if (result.format == "elf") {
        out["class"] = result.elf_class;
        out["machine"] = result.machine;
        out["type"] = result.type;
        out["glibc_versions"] = result.glibc_versions;
        out["max_glibc"] = result.max_glibc;
        out["needed"] = result.needed;
        out["exported_functions"] = result.exported_functions;
        out["tvm_ffi_functions"] = result.tvm_ffi_functions;
        out["torch_ops"] = result.torch_ops;
        out["torch_schemas"] = result.torch_schemas;
        return out;
    }
    out["containers"] = result.containers;
    out["entries"] = nlohmann::ordered_json::array();
    for (const auto& entry : result.entries) out["entries"].push_back(entry_json(entry));
    if (result.selected) out["selected"] = {{"kind", result.selected->kind}, {"arch", result.selected->arch}};
    return out;
}

static void print_human(const InspectResult& result) {
    std::cout << printable(result.path) << ": " << result.format << '\n';
    if (result.format == "elf") {
        std::cout << "  ELF" << result.elf_class << " " << result.type << " " << result.machine << '\n'
                  << "  needs " << (result.max_glibc.empty() ? "no versioned glibc" : printable(result.max_glibc))
                  << '\n';
        for (const auto& lib : result.needed) std::cout << "  NEEDED " << printable(lib) << '\n';
        if (!result.tvm_ffi_functions.empty()) {
            std::cout << "  tvm-ffi functions (" << result.tvm_ffi_functions.size() << "):\n";
            for (const auto& name : result.tvm_ffi_functions) std::cout << "    " << printable(name) << '\n';
        }
        if (!result.torch_ops.empty()) {
            std::cout << "  torch ops (" << result.torch_ops.size() << "):\n";
            for (const auto& name : result.torch_ops) std::cout << "    " << printable(name) << '\n';
        }
        return;
    }
    for (const auto& entry : result.entries) {
        std::cout << "  " << entry.kind << "  " << entry.arch << "  " << human_size(entry.size)
                  << (entry.compressed ? "  compressed" : "") << '\n';
    }
    if (result.selected) std::cout << "runs: " << result.selected->kind << " " << result.selected->arch << '\n';
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
                InspectResult result = inspect_file(*file, capability);
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
