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

static void print_load_json(const LoadResult& result) {
    nlohmann::ordered_json out = fetch_json(result.fetch);
    out["symbol"] = result.symbol;
    out["kind"] = to_string(result.kind);
    if (result.kind == LoadKind::torch_op) {
        // An op of the dispatcher has no address of its own.
        out["torch_op"] = result.torch_op;
        out["torch"] = {{"version", result.torch_version}, {"library", result.torch_library}};
    } else {
        out["address"] = format_address(result.address);
    }
    out["dependency_files"] = result.dependency_files;
    if (result.kind == LoadKind::tvm_ffi) {
        const TvmFfiRuntimeInfo runtime = tvm_ffi_runtime();
        out["tvm_ffi_runtime"] = {{"version", runtime.version}, {"library", runtime.library}};
    }
    print_json(out);
}

static void print_load_text(const CommonFlags& flags, const LoadResult& result) {
    std::string what = result.symbol + " at " + format_address(result.address);
    if (result.kind == LoadKind::tvm_ffi) {
        // A tvm-ffi symbol is __tvm_ffi_<function>.
        what = "tvm-ffi function " + result.symbol.substr(k_tvm_ffi_prefix.size()) + " (" + result.symbol + ") at " +
               format_address(result.address);
    } else if (result.kind == LoadKind::torch_op) {
        what = "torch op " + result.torch_op;
    }
    status(flags, "loaded " + result.fetch.name + " variant " + result.fetch.variant + " (" +
                      short_commit(result.fetch.commit) + "): " + what);
    status(flags, "  " + result.file);
    print_dependencies(flags, result.fetch);
    for (const std::string& file : result.dependency_files) status(flags, "  opened first: " + file);
    if (result.kind == LoadKind::tvm_ffi) {
        const TvmFfiRuntimeInfo runtime = tvm_ffi_runtime();
        status(flags, "  tvm-ffi runtime " + runtime.version + ": " + runtime.library);
    } else if (result.kind == LoadKind::torch_op) {
        status(flags, "  torch " + result.torch_version + ": " + result.torch_library);
    }
    if (result.fetch.signature) status(flags, "  " + describe_signature(*result.fetch.signature));
}

Command add_load_command(CLI::App& app) {
    auto flags = std::make_shared<CommonFlags>();
    auto ref = std::make_shared<std::string>();
    auto options = std::make_shared<LoadOptions>();
    CLI::App* command = app.add_subcommand("load", "Fetch if needed, load the kernel and resolve its symbol");
    command->add_option("kernel", *ref, "Registry name or ORG/REPO[@REVISION]")->required();
    command->add_option("--symbol", options->symbol, "Symbol to resolve instead of the registry's");
    command->add_option("--op", options->op,
                        "For a torch variant: the op to resolve (NAME or NAME.OVERLOAD) instead of the registry's");
    add_fetch_flags(*command, *flags);
    return {command, [flags, ref, options]() {
                ProgressPrinter progress(flags->quiet);
                Client client(make_options(*flags, &progress));
                // A torch variant is loaded against the torch that
                // KERNHUB_TORCH_DIR names: this program has no LibTorch.
                options->load_torch = true;
                const LoadResult result = client.load(*ref, *options);
                if (flags->json) {
                    print_load_json(result);
                } else {
                    print_load_text(*flags, result);
                }
                return 0;
            }};
}

}  // namespace kernhub::cli
