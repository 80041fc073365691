#include <iostream>

#include "commands.hpp"
#include "common.hpp"

namespace kernhub::cli {

static std::string where(const RegistryEntry& entry) {
    return entry.version ? "v" + std::to_string(*entry.version) : entry.revision;
}

Command add_list_command(CLI::App& app) {
    auto flags = std::make_shared<CommonFlags>();
    CLI::App* command = app.add_subcommand("list", "List the kernel names the stacked registries know");
    add_registry_flags(*command, *flags);
    return {command,
            [flags]() {
                Client client(make_options(*flags, nullptr));
                auto entries = client.list();
                if (flags->json) {
                    nlohmann::ordered_json kernels = nlohmann::ordered_json::array();
                    for (const auto& e : entries) {
                        nlohmann::ordered_json item = {{"name", e.name},
                                                       {"repo_id", e.repo_id},
                                                       {"repo_type", to_string(e.repo_type)},
                                                       {"symbol", e.symbol},
                                                       {"source", e.source}};
                        if (e.version)
                            item["version"] = *e.version;
                        else
                            item["revision"] = e.revision;
                        if (!e.file.empty()) item["file"] = e.file;
                        kernels.push_back(std::move(item));
                    }
                    print_json({{"kernels", kernels}});
                    return 0;
                }
                for (const auto& e : entries) {
                    std::cout << printable(e.name) << "  " << printable(e.repo_id) << "@" << printable(where(e)) << "  "
                              << printable(e.symbol) << (e.file.empty() ? "" : "  (" + printable(e.file) + ")") << '\n';
                }
                return 0;
            },
            k_read_only_interrupted};
}

}  // namespace kernhub::cli
