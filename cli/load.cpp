#include <cstdio>

#include "commands.hpp"
#include "common.hpp"

namespace kernhub::cli {

static std::string format_address(const void* address) {
    char buffer[32];
    (void)std::snprintf(buffer, sizeof buffer, "%p", address);  // fits: "0x" and 16 hex digits
    return buffer;
}

Command add_load_command(CLI::App& app) {
    auto flags = std::make_shared<CommonFlags>();
    auto ref = std::make_shared<std::string>();
    auto symbol = std::make_shared<std::string>();
    CLI::App* command = app.add_subcommand("load", "Fetch if needed, load the kernel and resolve its symbol");
    command->add_option("kernel", *ref, "Registry name or ORG/REPO[@REVISION]")->required();
    command->add_option("--symbol", *symbol, "Symbol to resolve instead of the registry's");
    add_fetch_flags(*command, *flags);
    return {command, [flags, ref, symbol]() {
                ProgressPrinter progress(flags->quiet);
                Client client(make_options(*flags, &progress));
                LoadResult result = client.load(*ref, *symbol);
                if (flags->json) {
                    nlohmann::ordered_json out = fetch_json(result.fetch);
                    out["symbol"] = result.symbol;
                    out["address"] = format_address(result.address);
                    print_json(out);
                } else {
                    status(*flags, "loaded " + result.fetch.name + " variant " + result.fetch.variant + " (" +
                                       short_commit(result.fetch.commit) + "): " + result.symbol + " at " +
                                       format_address(result.address));
                    status(*flags, "  " + result.file);
                    if (result.fetch.signature) status(*flags, "  " + describe_signature(*result.fetch.signature));
                }
                return 0;
            }};
}

}  // namespace kernhub::cli
