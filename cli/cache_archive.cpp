#include "commands.hpp"
#include "common.hpp"

namespace kernhub::cli {

void add_cache_archive_commands(CLI::App& cache, std::vector<Command>& commands) {
    (void)cache;
    (void)commands;
}

}  // namespace kernhub::cli
