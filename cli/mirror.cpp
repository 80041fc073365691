#include "commands.hpp"
#include "common.hpp"

namespace kernhub::cli {

namespace {

nlohmann::ordered_json mirror_json(const MirrorReport& report) {
    nlohmann::ordered_json kernels = nlohmann::ordered_json::array();
    for (const auto& kernel : report.kernels) {
        kernels.push_back({{"name", kernel.name},
                           {"repo_id", kernel.repo_id},
                           {"repo_type", to_string(kernel.repo_type)},
                           {"revision", kernel.revision},
                           {"commit", kernel.commit},
                           {"variants", kernel.variants},
                           {"files", kernel.files},
                           {"bytes", kernel.bytes}});
    }
    return {{"to", report.to},
            {"nginx_conf",
             report.nginx_conf.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(report.nginx_conf)},
            {"kernels", kernels},
            {"files_linked", report.files_linked},
            {"files_copied", report.files_copied},
            {"files_unchanged", report.files_unchanged},
            {"bytes_downloaded", report.bytes_downloaded},
            {"requests", report.requests}};
}

void print_report(const CommonFlags& flags, const MirrorReport& report, const std::string& listen) {
    for (const auto& kernel : report.kernels) {
        std::string variants;
        for (const auto& v : kernel.variants) variants += (variants.empty() ? "" : ", ") + v;
        status(flags, "mirrored " + kernel.name + " (" + kernel.repo_id + "@" + kernel.revision + " = " +
                          short_commit(kernel.commit) + "): " + std::to_string(kernel.files) + " files, " +
                          human_size(kernel.bytes) + ", variants " + variants);
    }
    if (!report.kernels.empty()) {
        status(flags, "tree " + report.to + ": " + std::to_string(report.files_linked) + " linked, " +
                          std::to_string(report.files_copied) + " copied, " + std::to_string(report.files_unchanged) +
                          " already there; " + human_size(report.bytes_downloaded) + " downloaded, " +
                          std::to_string(report.requests) + " requests");
    }
    if (!report.nginx_conf.empty()) {
        status(flags, "nginx server block for " + listen + ": " + report.nginx_conf + " (include it inside http { })");
    }
}

}  // namespace

Command add_mirror_command(CLI::App& app) {
    auto flags = std::make_shared<CommonFlags>();
    auto refs = std::make_shared<std::vector<std::string>>();
    auto options = std::make_shared<MirrorOptions>();
    CLI::App* command = app.add_subcommand(
        "mirror", "Write a static hub tree holding these kernels (every variant, or the --target ones)");
    command->add_option("kernels", *refs, "Registry names or ORG/REPO[@REVISION]; none: only write --nginx-conf");
    command->add_option("--to", options->to, "The static hub tree to write or add to")->required();
    CLI::Option* conf =
        command->add_option("--nginx-conf", options->nginx_conf,
                            "Also write an nginx server block serving the tree (to include inside http { })");
    command->add_option("--listen", options->listen, "Where that server block listens (default 127.0.0.1:8080)")
        ->needs(conf);
    add_fetch_flags(*command, *flags);
    add_host_flag(*command, *flags);
    return {command,
            [flags, refs, options]() {
                ProgressPrinter progress(flags->quiet);
                Client client(make_options(*flags, &progress));
                MirrorReport report = client.mirror(*refs, *options);
                if (flags->json) {
                    print_json(mirror_json(report));
                } else {
                    print_report(*flags, report, options->listen);
                }
                return 0;
            },
            "partial downloads are kept in the cache and the files already placed in the tree stay (a "
            "revision names a commit only once all its files are there); run kernhub mirror again to finish"};
}

}  // namespace kernhub::cli
