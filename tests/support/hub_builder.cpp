#include "support/hub_builder.hpp"

#include <fstream>

#include <catch2/catch.hpp>

#include "support/build_paths.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"

namespace kernhub::test {

void make_hub(const nlohmann::json& spec, const std::filesystem::path& out) {
    TempDir scratch;
    const auto spec_path = scratch.path() / "spec.json";
    std::ofstream(spec_path) << spec.dump(2);
    // -S: make_hub.py is standard library only (as hub_server.py).
    const auto result =
        run_process({KERNHUB_PYTHON, "-S", std::string(KERNHUB_SOURCE_DIR) + "/examples/hub/make_hub.py", "--spec",
                     spec_path.string(), "--out", out.string()});
    if (result.exit_code != 0) {
        FAIL("make_hub.py failed with exit code " << result.exit_code << " for " << out << ":\n" << result.err);
    }
}

}  // namespace kernhub::test
