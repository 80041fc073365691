#include "commands.hpp"
#include "common.hpp"

namespace kernhub::cli {

Command add_prewarm_command(CLI::App& app) {
    CLI::App* command = app.add_subcommand("prewarm", "(not yet implemented)");
    return {command, []() -> int { throw Error(ErrorCode::internal, "kernhub prewarm is not implemented yet"); }};
}

}  // namespace kernhub::cli
