// `kernhub cache export --to FILE [NAME...]` and `kernhub cache import FILE`
// (docs/ci-images.md, "Cache archives").
#include "commands.hpp"
#include "common.hpp"

namespace kernhub::cli {

namespace {

void add_archive_flags(CLI::App& command, CommonFlags& flags) {
    add_registry_flags(command, flags);
    command.add_option("--cache-dir", flags.cache_dir, "Cache root (env KERNHUB_CACHE, KERNELS_CACHE, HF_HUB_CACHE)");
    command.add_flag("-q,--quiet", flags.quiet, "Print nothing but errors, warnings and --json output");
}

nlohmann::ordered_json names(const std::vector<std::string>& values) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const auto& value : values) out.push_back(value);
    return out;
}

Command add_export_command(CLI::App& cache) {
    auto flags = std::make_shared<CommonFlags>();
    auto to = std::make_shared<std::string>();
    auto refs = std::make_shared<std::vector<std::string>>();
    CLI::App* command =
        cache.add_subcommand("export", "Write the cache, or the cached commits of some kernels, to a reproducible tar");
    command->add_option("kernel", *refs, "Registry names or ORG/REPO[@REVISION] (default: every repo in the cache)");
    command->add_option("--to", *to, "Archive to write; .tar.zst, .tar.gz, .tar.xz or .tar picks the compression")
        ->required();
    add_archive_flags(*command, *flags);
    return {command,
            [flags, to, refs]() {
                Client client(make_options(*flags, nullptr));
                ExportReport report = client.cache_export(*to, *refs);
                if (flags->json) {
                    print_json({{"file", report.file},
                                {"compression", to_string(report.compression)},
                                {"entries", report.entries},
                                {"bytes", report.bytes},
                                {"repos", names(report.repos)}});
                } else {
                    status(*flags, "exported " + std::to_string(report.repos.size()) + " repos to " + report.file +
                                       " (" + to_string(report.compression) + "): " + std::to_string(report.entries) +
                                       " entries, " + human_size(report.bytes) + " of files");
                    for (const auto& repo : report.repos) status(*flags, "  " + repo);
                }
                return 0;
            },
            "no archive was written and the target is as it was"};
}

Command add_import_command(CLI::App& cache) {
    auto flags = std::make_shared<CommonFlags>();
    auto file = std::make_shared<std::string>();
    CLI::App* command = cache.add_subcommand(
        "import", "Add a cache archive to the cache after checking its layout and every blob against its name");
    command->add_option("file", *file, "A tar written by `kernhub cache export` (plain, gzip, xz or zstd)")->required();
    add_archive_flags(*command, *flags);
    return {command,
            [flags, file]() {
                Client client(make_options(*flags, nullptr));
                ImportReport report = client.cache_import(*file);
                if (flags->json) {
                    print_json({{"file", report.file},
                                {"entries", report.entries},
                                {"blobs", report.blobs},
                                {"links", report.links},
                                {"refs", report.refs},
                                {"side_files", report.side_files},
                                {"skipped", report.skipped},
                                {"repos", names(report.repos)}});
                } else {
                    status(*flags, "imported " + report.file + ": " + std::to_string(report.blobs) + " blobs, " +
                                       std::to_string(report.links) + " links, " + std::to_string(report.refs) +
                                       " refs, " + std::to_string(report.side_files) + " side files added; " +
                                       std::to_string(report.skipped) + " already in the cache");
                    for (const auto& repo : report.repos) status(*flags, "  " + repo);
                }
                return 0;
            },
            "nothing unverified entered the cache: what was moved in is complete and the unpacked rest "
            "was removed; run kernhub cache import again to finish"};
}

}  // namespace

void add_cache_archive_commands(CLI::App& cache, std::vector<Command>& commands) {
    commands.push_back(add_export_command(cache));
    commands.push_back(add_import_command(cache));
}

}  // namespace kernhub::cli
