// One function per CLI command: it registers its subcommand on the app and
// returns the action to run when that subcommand was chosen. Actions return
// the exit code and throw kernhub::Error for failures (main maps them).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <vector>

namespace kernhub::cli {

struct Command {
    CLI::App* app = nullptr;
    std::function<int()> run;
    // What an interruption (SIGINT, SIGTERM) leaves behind, said on the one
    // line the CLI prints then: true of this command, whatever it had done.
    const char* interrupted_note = "partial downloads are kept for the next run";
};

// The note of a command that downloads nothing and changes no file an
// interruption could leave half-written (it writes only atomically).
inline constexpr const char* k_read_only_interrupted = "nothing was left half-written; run the command again";

Command add_fetch_command(CLI::App& app);
Command add_load_command(CLI::App& app);
Command add_list_command(CLI::App& app);
Command add_info_command(CLI::App& app);
Command add_inspect_command(CLI::App& app);
Command add_lock_command(CLI::App& app);
Command add_prewarm_command(CLI::App& app);
Command add_mirror_command(CLI::App& app);
Command add_verify_command(CLI::App& app);
Command add_verify_blob_command(CLI::App& app);
// `cache ls|verify|prune|path` (cache.cpp) and `cache export|import`
// (cache_archive.cpp) under the `cache` group.
void add_cache_commands(CLI::App& cache, std::vector<Command>& commands);
void add_cache_archive_commands(CLI::App& cache, std::vector<Command>& commands);

}  // namespace kernhub::cli
