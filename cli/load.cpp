#include <cstdio>
#include <string_view>

#include "commands.hpp"
#include "common.hpp"
#include "kernhub/tvm_ffi.hpp"

namespace kernhub::cli {

// The prefix of a tvm-ffi function's symbol (LoadResult::symbol).
constexpr std::string_view k_tvm_ffi_prefix = "__tvm_ffi_";

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
                    out["kind"] = result.kind;
                    out["address"] = format_address(result.address);
                    if (result.kind == "tvm-ffi") {
                        const TvmFfiRuntimeInfo runtime = tvm_ffi_runtime();
                        out["tvm_ffi_runtime"] = {{"version", runtime.version}, {"library", runtime.library}};
                    }
                    print_json(out);
                } else {
                    // A tvm-ffi symbol is __tvm_ffi_<function>.
                    const std::string what = result.kind == "tvm-ffi"
                                                 ? "tvm-ffi function " + result.symbol.substr(k_tvm_ffi_prefix.size()) +
                                                       " (" + result.symbol + ")"
                                                 : result.symbol;
                    status(*flags, "loaded " + result.fetch.name + " variant " + result.fetch.variant + " (" +
                                       short_commit(result.fetch.commit) + "): " + what + " at " +
                                       format_address(result.address));
                    status(*flags, "  " + result.file);
                    if (result.kind == "tvm-ffi") {
                        const TvmFfiRuntimeInfo runtime = tvm_ffi_runtime();
                        status(*flags, "  tvm-ffi runtime " + runtime.version + ": " + runtime.library);
                    }
                    if (result.fetch.signature) status(*flags, "  " + describe_signature(*result.fetch.signature));
                }
                return 0;
            }};
}

}  // namespace kernhub::cli
