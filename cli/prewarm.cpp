// `kernhub prewarm`: fill the cache with exactly what a lock file pins.
#include "commands.hpp"
#include "common.hpp"

namespace kernhub::cli {

namespace {

struct PrewarmFlags {
    CommonFlags common;
    std::string lock_file;
};

nlohmann::ordered_json prewarm_json(const PrewarmReport& report) {
    nlohmann::ordered_json kernels = nlohmann::ordered_json::array();
    for (const auto& k : report.kernels) {
        kernels.push_back({{"name", k.name},
                           {"repo_id", k.repo_id},
                           {"repo_type", to_string(k.repo_type)},
                           {"revision", k.revision},
                           {"commit", k.commit},
                           {"variant", k.variant},
                           {"path", k.path},
                           {"files", k.files},
                           {"fetched", k.fetched},
                           {"already_cached", k.files - k.fetched},
                           {"bytes_downloaded", k.bytes_downloaded},
                           {"refs", k.refs}});
    }
    return {{"lock", report.lock_file},
            {"format", to_string(report.lock_format)},
            {"kernels", kernels},
            {"missing_targets", report.missing_targets},
            {"bytes_downloaded", report.bytes_downloaded},
            {"requests", report.requests}};
}

}  // namespace

Command add_prewarm_command(CLI::App& app) {
    auto flags = std::make_shared<PrewarmFlags>();
    CLI::App* command = app.add_subcommand(
        "prewarm",
        "Fetch and verify exactly what a lock file pins (kernhub.lock or kernels.lock), for --target or this host");
    add_fetch_flags(*command, flags->common);
    add_host_flag(*command, flags->common);
    command->remove_option(command->get_option("--registry"));  // a lock names its repos itself
    CLI::Option* lock = command->add_option("--lock", flags->lock_file,
                                            "A kernhub.lock, or the Python kernels library's kernels.lock "
                                            "(default: kernhub.lock of --project or the current directory)");
    lock->excludes(command->get_option("--project"));
    return {command, [flags]() {
                ProgressPrinter progress(flags->common.quiet);
                Client client(make_options(flags->common, &progress));
                PrewarmReport report = client.prewarm(flags->lock_file);
                if (flags->common.json) {
                    print_json(prewarm_json(report));
                    return 0;
                }
                for (const auto& k : report.kernels) {
                    std::string what = k.fetched == 0
                                           ? "already cached (" + std::to_string(k.files) + " files)"
                                           : "fetched " + std::to_string(k.fetched) + " of " + std::to_string(k.files) +
                                                 " files (" + human_size(k.bytes_downloaded) + "), " +
                                                 std::to_string(k.files - k.fetched) + " already cached";
                    std::string refs;
                    for (const auto& r : k.refs) refs += (refs.empty() ? "; refs/" : ", refs/") + r;
                    status(flags->common, k.name + " (" + k.repo_id + "@" + short_commit(k.commit) + ") " + k.variant +
                                              ": " + what + ", verified against the lock" + refs);
                }
                for (const auto& missing : report.missing_targets) {
                    status(flags->common,
                           "skipped " + missing + ": the lock records that the kernel has no build for it");
                }
                status(flags->common, "prewarmed " + std::to_string(report.kernels.size()) + " variant(s) from " +
                                          report.lock_file + " (" + to_string(report.lock_format) +
                                          "): " + human_size(report.bytes_downloaded) + " downloaded, " +
                                          std::to_string(report.requests) + " requests");
                return 0;
            }};
}

}  // namespace kernhub::cli
