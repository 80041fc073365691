#include "support/hub_builder.hpp"

#include <fstream>

#include <catch2/catch.hpp>

#include "support/build_paths.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"

namespace kernhub::test {

void make_hub(const nlohmann::json& given, const std::filesystem::path& out) {
    // A hub of trusted kernel publishers unless the spec has its own
    // "organizations": every organisation of its repos gets an overview
    // marking it one, so
    // ad-hoc ORG/REPO fetches pass the trusted-publisher check (docs/trust.md,
    // "Trusted publishers") as they would on the real hub for such orgs.
    nlohmann::json spec = given;
    if (spec.is_object() && !spec.contains("organizations") && spec.contains("repos") && spec["repos"].is_array()) {
        nlohmann::json& organizations = spec["organizations"];
        organizations = nlohmann::json::object();
        for (const nlohmann::json& repo : spec["repos"]) {
            if (!repo.is_object() || !repo.contains("repo_id") || !repo["repo_id"].is_string()) continue;
            const std::string id = repo["repo_id"].get<std::string>();
            const std::string org = id.substr(0, id.find('/'));
            if (!organizations.contains(org)) organizations[org] = {{"trusted_kernel_publisher", true}};
        }
    }
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
