// kernhub command-line tool: parses argv, runs one command, and turns
// kernhub::Error codes into exit codes (docs/commands.md, "Exit codes").
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include <csignal>

#include "commands.hpp"
#include "hint.hpp"
#include "interrupt.hpp"
#include "kernhub/kernhub.hpp"

namespace {

bool wants_json(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--json") == 0) return true;
    }
    return false;
}

// The first argument that is not an option: the command, when one is given
// (no top-level option takes a value).
const char* first_word(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
        if (argv[i][0] != '-') return argv[i];
    }
    return nullptr;
}

void report(const kernhub::Error& error, bool json) {
    const std::string line = kernhub::cli::describe(error);  // the hint as a flag or a command
    const char* no_color = std::getenv("NO_COLOR");
    bool color = isatty(STDERR_FILENO) == 1 && (no_color == nullptr || *no_color == '\0');
    std::cerr << (color ? "\033[31mkernhub: error:\033[0m " : "kernhub: error: ") << line
              << '\n';  // one printable line: Error sees to it
    if (json) {
        nlohmann::ordered_json out = {{"error",
                                       {{"code", static_cast<int>(error.code())},
                                        {"kind", kernhub::to_string(error.code())},
                                        {"message", line}}}};
        std::cout << out.dump(2, ' ', true, nlohmann::ordered_json::error_handler_t::replace) << std::endl;
    }
}

// One line, and the shell's convention for death by signal: 128 + signo.
int report_interrupt(const kernhub::Error& error, bool json, const char* note) {
    const std::string line = kernhub::cli::interrupted_line(note);
    std::cerr << "kernhub: " << line << '\n';
    const int code = kernhub::cli::interrupted_exit_code();
    if (json) {
        nlohmann::ordered_json out = {
            {"error", {{"code", code}, {"kind", kernhub::to_string(error.code())}, {"message", line}}}};
        std::cout << out.dump(2) << std::endl;
    }
    return code;
}

// The commands, described to CLI11. Only the command named on the command
// line is built: describing every command's options to CLI11 costs a warm
// `kernhub load` a noticeable share of its start-up. Without a known
// command name (--help, a typo) all are built, so help and error messages
// list them all.
std::vector<kernhub::cli::Command> build_commands(CLI::App& app, int argc, char** argv) {
    using Adder = kernhub::cli::Command (*)(CLI::App&);
    const std::pair<const char*, Adder> top_level[] = {
        {"fetch", kernhub::cli::add_fetch_command},     {"load", kernhub::cli::add_load_command},
        {"list", kernhub::cli::add_list_command},       {"info", kernhub::cli::add_info_command},
        {"inspect", kernhub::cli::add_inspect_command}, {"lock", kernhub::cli::add_lock_command},
        {"prewarm", kernhub::cli::add_prewarm_command}, {"mirror", kernhub::cli::add_mirror_command},
        {"verify", kernhub::cli::add_verify_command},   {"verify-blob", kernhub::cli::add_verify_blob_command},
    };
    const char* named = first_word(argc, argv);
    const bool known =
        named != nullptr && (std::strcmp(named, "cache") == 0 ||
                             std::any_of(std::begin(top_level), std::end(top_level),
                                         [&](const auto& entry) { return std::strcmp(named, entry.first) == 0; }));
    std::vector<kernhub::cli::Command> commands;
    for (const auto& [name, add] : top_level) {
        if (!known || std::strcmp(named, name) == 0) commands.push_back(add(app));
    }
    if (!known || std::strcmp(named, "cache") == 0) {
        CLI::App* cache = app.add_subcommand("cache", "Look after the cache: ls, verify, prune, path, export, import");
        cache->require_subcommand(1);
        kernhub::cli::add_cache_commands(*cache, commands);
        kernhub::cli::add_cache_archive_commands(*cache, commands);
    }
    return commands;
}

int run_cli(int argc, char** argv) {
    CLI::App app{"kernhub: fetch, verify, cache and load compute kernels from a Hugging Face-style hub"};
    app.require_subcommand(1);
    app.set_version_flag("--version", std::string("kernhub ") + kernhub::version());
    std::vector<kernhub::cli::Command> commands = build_commands(app, argc, argv);
    bool json = wants_json(argc, argv);
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForVersion& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        report(kernhub::Error(kernhub::ErrorCode::usage, std::string(e.what()) + "; run 'kernhub --help'"), json);
        return static_cast<int>(kernhub::ErrorCode::usage);
    }
    const auto chosen = std::find_if(commands.begin(), commands.end(),
                                     [](const kernhub::cli::Command& command) { return command.app->parsed(); });
    if (chosen == commands.end()) return static_cast<int>(kernhub::ErrorCode::usage);
    kernhub::cli::install_interrupt_handlers();
    try {
        return chosen->run();
    } catch (const kernhub::Error& error) {
        if (error.code() == kernhub::ErrorCode::interrupted) {
            return report_interrupt(error, json, chosen->interrupted_note);
        }
        report(error, json);
        return static_cast<int>(error.code());
    } catch (const std::exception& error) {
        report(kernhub::Error(kernhub::ErrorCode::internal,
                              std::string("internal error: ") + error.what() + "; please report it"),
               json);
        return static_cast<int>(kernhub::ErrorCode::internal);
    }
}

}  // namespace

// Building the commands and reporting an error can throw too (an allocation,
// a CLI11 definition error): end with exit 1 and a line instead of
// std::terminate's abort.
int main(int argc, char** argv) {
    try {
        return run_cli(argc, argv);
    } catch (const std::exception& error) {
        (void)std::fprintf(stderr, "kernhub: internal error: %s; please report it\n", error.what());
    } catch (...) {
        (void)std::fprintf(stderr, "kernhub: internal error; please report it\n");
    }
    return static_cast<int>(kernhub::ErrorCode::internal);
}
