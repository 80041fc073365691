// Whole-process warm start: from exec to a resolved kernel pointer, for a
// program that uses kernhub next to one that does a bare dlopen + dlsym of
// the same cached file. Every iteration starts one process (posix_spawn)
// and waits for it; its output goes to /dev/null.
//
//   BM_Start_BareDlopen_C      a C program: dlopen + dlsym, exit
//   BM_Start_BareDlopen_Cxx    the same in C++, linked with the shared C++
//                              runtime (libstdc++, libgcc_s)
//   BM_Start_Kernhub_Cli       `kernhub load --offline vector-add`: settings,
//                              registries, cache check, dlopen, dlsym, one
//                              line printed
//   BM_Start_Kernhub_CApi      examples/embed/c_vector_add.c on the C API
//                              (libkernhub.so): prewarm, kh_symbol, one call
//
// The cache is the demo cache of bench_common.hpp, warmed once; every
// kernhub run is offline, so no network code is even loaded.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "bench_common.hpp"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

// argv and environment of one child, kept alive for posix_spawn.
struct Command {
    std::vector<std::string> args;
    std::vector<std::string> env;
};

// The environment of the children: this process's (already scrubbed) plus
// the demo cache, offline.
std::vector<std::string> child_environment() {
    std::vector<std::string> env;
    for (char** entry = environ; *entry != nullptr; ++entry) env.emplace_back(*entry);
    env.push_back("KERNHUB_CACHE=" + khbench::demo_cache().cache.path().string());
    env.push_back("KERNHUB_OFFLINE=1");
    return env;
}

// Starts the command, waits, and returns the wall time; throws when it
// fails, so a broken setup is never timed as a fast one.
double run_once(const Command& command, const std::string& cwd) {
    std::vector<char*> argv;
    for (const auto& arg : command.args) argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    std::vector<char*> envp;
    for (const auto& entry : command.env) envp.push_back(const_cast<char*>(entry.c_str()));
    envp.push_back(nullptr);

    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    // A kernhub.json in the benchmark's working directory must not count.
    posix_spawn_file_actions_addchdir_np(&actions, cwd.c_str());
    pid_t pid = 0;
    const auto start = Clock::now();
    const int spawned = ::posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), envp.data());
    int status = 0;
    if (spawned == 0) ::waitpid(pid, &status, 0);
    const auto stop = Clock::now();
    posix_spawn_file_actions_destroy(&actions);
    if (spawned != 0) throw std::runtime_error("cannot start " + command.args[0]);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        throw std::runtime_error(command.args[0] + " failed (status " + std::to_string(status) + ")");
    }
    return std::chrono::duration<double>(stop - start).count();
}

void time_command(benchmark::State& state, const Command& command) {
    const std::string cwd = khbench::demo_cache().project.path().string();
    run_once(command, cwd);  // page cache and the loader's caches warm
    for (auto _ : state) state.SetIterationTime(run_once(command, cwd));
}

Command bare(const char* program) {
    return Command{{program, khbench::fs::canonical(khbench::demo_cache().so_path).string(), "kh_vector_add"},
                   child_environment()};
}

void BM_Start_BareDlopen_C(benchmark::State& state) {
    khbench::guarded(state, [&] { time_command(state, bare(KERNHUB_BENCH_BARE_C)); });
}

void BM_Start_BareDlopen_Cxx(benchmark::State& state) {
    khbench::guarded(state, [&] { time_command(state, bare(KERNHUB_BENCH_BARE_CXX)); });
}

void BM_Start_Kernhub_Cli(benchmark::State& state) {
    khbench::guarded(state, [&] {
        time_command(state, Command{{KERNHUB_BENCH_CLI, "load", "--offline", "vector-add"}, child_environment()});
    });
}

#ifdef KERNHUB_BENCH_C_EXAMPLE
void BM_Start_Kernhub_CApi(benchmark::State& state) {
    khbench::guarded(state, [&] { time_command(state, Command{{KERNHUB_BENCH_C_EXAMPLE}, child_environment()}); });
}
#endif

}  // namespace

BENCHMARK(BM_Start_BareDlopen_C)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Start_BareDlopen_Cxx)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Start_Kernhub_Cli)->UseManualTime()->Unit(benchmark::kMicrosecond);
#ifdef KERNHUB_BENCH_C_EXAMPLE
BENCHMARK(BM_Start_Kernhub_CApi)->UseManualTime()->Unit(benchmark::kMicrosecond);
#endif

KHBENCH_MAIN()
