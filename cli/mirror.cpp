#include "commands.hpp"
#include "common.hpp"

namespace kernhub::cli {

Command add_mirror_command(CLI::App& app) {
    CLI::App* command = app.add_subcommand("mirror", "(not yet implemented)");
    return {command, []() -> int { throw Error(ErrorCode::internal, "kernhub mirror is not implemented yet"); }};
}

}  // namespace kernhub::cli
