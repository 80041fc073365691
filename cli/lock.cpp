#include "commands.hpp"
#include "common.hpp"

namespace kernhub::cli {

Command add_lock_command(CLI::App& app) {
    CLI::App* command = app.add_subcommand("lock", "(not yet implemented)");
    return {command, []() -> int { throw Error(ErrorCode::internal, "kernhub lock is not implemented yet"); }};
}

}  // namespace kernhub::cli
