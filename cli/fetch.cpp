#include "commands.hpp"
#include "common.hpp"

namespace kernhub::cli {

Command add_fetch_command(CLI::App& app) {
    auto flags = std::make_shared<CommonFlags>();
    auto ref = std::make_shared<std::string>();
    CLI::App* command = app.add_subcommand("fetch", "Download, verify and cache the variant this host needs");
    command->add_option("kernel", *ref, "Registry name or ORG/REPO[@REVISION]")->required();
    add_fetch_flags(*command, *flags);
    add_host_flag(*command, *flags);
    return {command, [flags, ref]() {
                ProgressPrinter progress(flags->quiet);
                Client client(make_options(*flags, &progress));
                FetchResult result = client.fetch(*ref);
                if (flags->json) {
                    print_json(fetch_json(result));
                } else if (!result.local_folder.empty()) {
                    status(*flags, "local " + result.name + " (" + result.repo_id + ", LOCAL_KERNELS) variant " +
                                       result.variant + ": " + std::to_string(result.files.size()) + " files, " +
                                       std::to_string(result.requests) + " requests");
                    status(*flags, "  " + result.path);
                    print_dependencies(*flags, result);
                } else {
                    status(*flags, "fetched " + result.name + " (" + result.repo_id + "@" + result.revision + " = " +
                                       short_commit(result.commit) + ") variant " + result.variant + ": " +
                                       std::to_string(result.files.size()) + " files, " +
                                       human_size(result.bytes_downloaded) + " downloaded, " +
                                       std::to_string(result.requests) + " requests");
                    status(*flags, "  " + result.path);
                    print_dependencies(*flags, result);
                    if (result.signature) status(*flags, "  " + describe_signature(*result.signature));
                }
                return 0;
            }};
}

}  // namespace kernhub::cli
