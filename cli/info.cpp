#include <iostream>

#include "commands.hpp"
#include "common.hpp"

namespace kernhub::cli {

static nlohmann::ordered_json info_json(const InfoResult& info) {
    nlohmann::ordered_json variants = nlohmann::ordered_json::array();
    for (const auto& v : info.variants) {
        nlohmann::ordered_json item = {{"name", v.name}, {"selected", v.selected}};
        if (!v.selected) item["reason"] = v.reason;
        if (!v.load_refusal.empty()) item["load_refusal"] = v.load_refusal;
        variants.push_back(std::move(item));
    }
    nlohmann::ordered_json facts = nlohmann::ordered_json::array();
    for (const auto& fact : info.host_facts) {
        facts.push_back({{"name", fact.name}, {"value", fact.value}, {"source", fact.source}});
    }
    nlohmann::ordered_json out = {{"name", info.name},        {"repo_id", info.repo_id}, {"revision", info.revision},
                                  {"commit", info.commit},    {"symbol", info.symbol},   {"host", info.host},
                                  {"host_facts", facts},      {"targets", info.targets}, {"variants", variants},
                                  {"requests", info.requests}};
    out["selected"] = info.selected.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(info.selected);
    if (!info.tvm_ffi_runtime.empty()) out["tvm_ffi_runtime"] = info.tvm_ffi_runtime;
    if (info.signature_policy) {
        out["signature_policy"] = {{"issuer", info.signature_policy->issuer},
                                   {"identities", info.signature_policy->identities},
                                   {"repository", info.signature_policy->repository}};
    } else {
        out["signature_policy"] = nullptr;
    }
    out["signature"] = info.signature ? signature_json(*info.signature) : nlohmann::ordered_json(nullptr);
    out["local_folder"] =
        info.local_folder.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(info.local_folder);
    out["python_depends"] = metadata_json(info.python_depends);
    out["provenance"] = metadata_json(info.provenance);
    return out;
}

Command add_info_command(CLI::App& app) {
    auto flags = std::make_shared<CommonFlags>();
    auto ref = std::make_shared<std::string>();
    CLI::App* command = app.add_subcommand("info", "Show the commit, the variants and which one this host selects");
    command->add_option("kernel", *ref, "Registry name or ORG/REPO[@REVISION]")->required();
    add_fetch_flags(*command, *flags);
    add_host_flag(*command, *flags);
    return {command,
            [flags, ref]() {
                ProgressPrinter progress(flags->quiet);
                Client client(make_options(*flags, &progress));
                InfoResult info = client.info(*ref);
                if (flags->json) {
                    print_json(info_json(info));
                    return 0;
                }
                std::cout << printable(info.name) << ": " << printable(info.repo_id) << "@" << printable(info.revision)
                          << " = " << printable(info.commit) << '\n'
                          << "host: " << printable(info.host) << '\n';
                if (!info.local_folder.empty()) {
                    std::cout << "local: " << printable(info.local_folder)
                              << "  (LOCAL_KERNELS; nothing comes from the hub)\n";
                }
                for (const auto& fact : info.host_facts) {
                    std::cout << "  " << fact.name << " " << printable(fact.value) << "  (" << printable(fact.source)
                              << ")\n";
                }
                std::cout << (info.tvm_ffi_runtime.empty()
                                  ? std::string()
                                  : "tvm-ffi runtime: " + printable(info.tvm_ffi_runtime) + "\n")
                          << "symbol: " << (info.symbol.empty() ? "(none)" : printable(info.symbol)) << '\n'
                          << "variants:\n";
                for (const auto& v : info.variants) {
                    std::cout << (v.selected ? "  * " : "    ") << printable(v.name)
                              << (v.selected ? "  (selected)" : "  - " + printable(v.reason)) << '\n';
                    if (v.selected && !v.load_refusal.empty()) {
                        std::cout << "      fetched, not loaded: " << printable(v.load_refusal) << '\n';
                    }
                }
                if (info.selected.empty()) std::cout << "no variant fits; pick one with --target\n";
                if (!info.signature_policy) {
                    std::cout << "signature: no policy (the registry entry has no \"signature\")\n";
                } else {
                    std::string identities;
                    for (const auto& id : info.signature_policy->identities) {
                        identities += (identities.empty() ? "" : ", ") + printable(id);
                    }
                    std::cout << "signature policy: issuer " << printable(info.signature_policy->issuer)
                              << ", identities " << identities;
                    if (!info.signature_policy->repository.empty()) {
                        std::cout << ", repository " << printable(info.signature_policy->repository);
                    }
                    std::cout << '\n';
                    if (info.signature) std::cout << "signature: " << describe_signature(*info.signature) << '\n';
                }
                return 0;
            },
            k_read_only_interrupted};
}

}  // namespace kernhub::cli
