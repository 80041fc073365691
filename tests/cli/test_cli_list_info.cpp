// `kernhub list` (registry stacking) and `kernhub info` (variant choice).
#include "cli/cli_support.hpp"

using namespace kernhub::test;
using namespace kernhub::test::cli;

namespace {

// name -> entry of `list --json`.
std::map<std::string, json> list_json(const Sandbox& box, const std::vector<std::string>& args,
                                      const EnvChanges& extra = {}) {
    std::vector<std::string> argv{"list", "--json"};
    argv.insert(argv.end(), args.begin(), args.end());
    ProcessResult r = box.run(argv, extra);
    INFO(describe(r));
    REQUIRE(r.exit_code == 0);
    json j = parse_stdout(r);
    REQUIRE(keys_of(j) == std::vector<std::string>{"kernels"});
    std::map<std::string, json> out;
    std::vector<std::string> order;
    for (const auto& k : j["kernels"]) {
        order.push_back(k["name"]);
        out[k["name"]] = k;
    }
    CHECK(std::is_sorted(order.begin(), order.end()));
    CHECK(order.size() == out.size());  // each name once
    return out;
}

// A registry that redefines vector-add and adds a name of its own.
fs::path write_override(const Sandbox& box, const std::string& file, const std::string& extra_name) {
    fs::path path = box.dir.path() / file;
    json doc = {
        {"format", 1},
        {"kernels",
         {{"vector-add", {{"repo_id", "kernhub-test/two-objects"}, {"revision", "main"}, {"symbol", "kh_add_i32"}}},
          {extra_name, {{"repo_id", "kernhub-test/model-kernel"}, {"version", 3}, {"symbol", "kh_x"}}}}}};
    write_text(path, doc.dump());
    return path;
}

}  // namespace

TEST_CASE("list prints the stacked registry's names", "[cli]") {
    Sandbox box;
    const std::string reg = box.registry.string();

    ProcessResult r = box.run({"list", "--registry", reg});
    INFO(describe(r));
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find("vector-add  kernhub-test/vector-add@main  kh_vector_add  (libvector_add.so)\n") !=
          std::string::npos);
    CHECK(r.out.find("vector-add-v2  kernhub-test/vector-add@v2  kh_saxpy\n") != std::string::npos);
    CHECK(r.out.find("model-kernel  kernhub-test/model-kernel@main  kh_add_i32\n") != std::string::npos);

    auto entries = list_json(box, {"--registry", reg});
    const json registry = standard_registry();  // the loop must not iterate a temporary
    for (const auto& [name, spec] : registry["kernels"].items()) {
        INFO(name);
        REQUIRE(entries.count(name) == 1);
        const json& e = entries[name];
        CHECK(e["repo_id"] == spec["repo_id"]);
        CHECK(e["symbol"] == spec["symbol"]);
        CHECK(e["source"] == reg);
        CHECK(e["repo_type"] == spec.value("repo_type", "kernel"));
        if (spec.contains("version")) {
            CHECK(e["version"] == spec["version"]);
            CHECK_FALSE(e.contains("revision"));
        } else {
            CHECK(e["revision"] == spec["revision"]);
        }
        CHECK(e.value("file", "") == spec.value("file", ""));
    }
    // The installed default registry is stacked first.
    REQUIRE(entries.count("flash-attn3") == 1);
    CHECK(entries["flash-attn3"]["repo_id"] == "kernels-community/flash-attn3");
    CHECK(entries["flash-attn3"]["version"] == 1);
}

TEST_CASE("registries stack: later --registry wins, KERNHUB_REGISTRY is a colon list below --registry", "[cli]") {
    KernelHub hub;
    Sandbox box;
    const std::string std_reg = box.registry.string();
    const std::string a = write_override(box, "a.json", "only-in-a").string();
    const std::string b = write_override(box, "b.json", "only-in-b").string();

    auto e = list_json(box, {"--registry", std_reg, "--registry", a});
    CHECK(e["vector-add"]["repo_id"] == "kernhub-test/two-objects");
    CHECK(e["vector-add"]["source"] == a);
    CHECK(e["vector-add-v1"]["source"] == std_reg);  // untouched names stay
    CHECK(e.count("only-in-a") == 1);

    e = list_json(box, {"--registry", a, "--registry", std_reg});
    CHECK(e["vector-add"]["repo_id"] == "kernhub-test/vector-add");
    CHECK(e["vector-add"]["source"] == std_reg);
    CHECK(e["only-in-a"]["source"] == a);

    e = list_json(box, {}, {{"KERNHUB_REGISTRY", std_reg + ":" + a}});
    CHECK(e["vector-add"]["source"] == a);
    CHECK(e["vector-add-v2"]["source"] == std_reg);
    e = list_json(box, {}, {{"KERNHUB_REGISTRY", a + ":" + std_reg + ":" + b}});
    CHECK(e["vector-add"]["source"] == b);
    CHECK(e["only-in-a"]["source"] == a);
    CHECK(e["only-in-b"]["source"] == b);
    e = list_json(box, {}, {{"KERNHUB_REGISTRY", a + ":" + std_reg}});
    CHECK(e["vector-add"]["source"] == std_reg);

    // --registry is stacked after KERNHUB_REGISTRY.
    e = list_json(box, {"--registry", std_reg}, {{"KERNHUB_REGISTRY", a}});
    CHECK(e["vector-add"]["source"] == std_reg);
    CHECK(e.count("only-in-a") == 1);

    // A kernhub.json in the current directory is stacked below KERNHUB_REGISTRY.
    write_text(
        box.dir.path() / "kernhub.json",
        json({{"format", 1},
              {"kernels",
               {{"vector-add", {{"repo_id", "kernhub-test/private"}, {"revision", "main"}, {"symbol", "s"}}},
                {"project-only", {{"repo_id", "kernhub-test/private"}, {"revision", "main"}, {"symbol", "s"}}}}}})
            .dump());
    e = list_json(box, {});
    CHECK(e["vector-add"]["repo_id"] == "kernhub-test/private");
    CHECK(fs::path(e["project-only"]["source"].get<std::string>()).filename() == "kernhub.json");
    e = list_json(box, {}, {{"KERNHUB_REGISTRY", std_reg}});
    CHECK(e["vector-add"]["source"] == std_reg);
    CHECK(e.count("project-only") == 1);
    fs::remove(box.dir.path() / "kernhub.json");

    // fetch follows the winning entry.
    ProcessResult r = box.kh("fetch", "vector-add", hub.server().endpoint(), {"--json", "--registry", a});
    REQUIRE(r.exit_code == 0);
    json j = parse_stdout(r);
    CHECK(j["repo_id"] == "kernhub-test/two-objects");
    CHECK(j["files"].size() == 3);  // two shared objects + metadata.json
}

TEST_CASE("info --json shows the variants, the selected one and why the others are rejected", "[cli]") {
    KernelHub hub;
    Sandbox box;
    const std::string ep = hub.server().endpoint();
    const std::string cuda = "native-cu128-x86_64-linux";

    ProcessResult r = box.kh("info", "vector-add", ep, {"--json"});
    INFO(describe(r));
    REQUIRE(r.exit_code == 0);
    json j = parse_stdout(r);
    CHECK(keys_of(j) == std::vector<std::string>{"commit", "host", "host_facts", "local_folder", "name", "provenance",
                                                 "python_depends", "repo_id", "requests", "revision", "selected", "signature", "signature_policy",
                                                 "symbol", "targets", "variants"});
    CHECK(j["local_folder"].is_null());
    // The test registry's entry has no policy: nothing was verified.
    CHECK(j["signature_policy"].is_null());
    CHECK(j["signature"].is_null());
    CHECK(j["name"] == "vector-add");
    CHECK(j["repo_id"] == "kernhub-test/vector-add");
    CHECK(j["symbol"] == "kh_vector_add");
    CHECK(j["selected"] == host_cpu_variant());
    CHECK(j["targets"] == json::array());
    std::map<std::string, json> variants;
    for (const auto& v : j["variants"]) variants[v["name"]] = v;
    CHECK(variants.size() == 4);  // host cpu, other cpu, cu128, torch
    REQUIRE(variants.count(host_cpu_variant()) == 1);
    CHECK(variants[host_cpu_variant()]["selected"] == true);
    CHECK_FALSE(variants[host_cpu_variant()].contains("reason"));
    REQUIRE(variants.count(cuda) == 1);
    CHECK(variants[cuda]["selected"] == false);
    CHECK(variants[cuda]["reason"].get<std::string>().find("CUDA") != std::string::npos);
    CHECK(variants.count("torch28-cxx11-cu128-x86_64-linux") == 1);
    for (const auto& [name, v] : variants) {
        INFO(name);
        if (name != host_cpu_variant()) CHECK_FALSE(v["reason"].get<std::string>().empty());
    }
    CHECK(hub.server().count_requests("/lfs/") == 0);  // info downloads no artifact

    r = box.kh("info", "vector-add", ep, {"--json", "--target", cuda});
    REQUIRE(r.exit_code == 0);
    j = parse_stdout(r);
    CHECK(j["selected"] == cuda);
    CHECK(j["targets"] == json::array({cuda}));
    REQUIRE(j["variants"].size() == 4);
    for (const auto& v : j["variants"]) {
        INFO(v.dump());
        CHECK(v["selected"] == (v["name"] == cuda));
    }

    // Human form on stdout: the selected variant is starred.
    r = box.kh("info", "vector-add", ep);
    INFO(describe(r));
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find("  * " + host_cpu_variant() + "  (selected)\n") != std::string::npos);
    CHECK(r.out.find("    " + cuda + "  - ") != std::string::npos);

    // A target no variant matches: exit 0, selected is null, every variant has
    // a reason, and the missing target is listed as missing.
    r = box.kh("info", "vector-add", ep, {"--json", "--target", "native-cpu-riscv64-linux"});
    REQUIRE(r.exit_code == 0);
    j = parse_stdout(r);
    CHECK(j["selected"].is_null());
    REQUIRE(j["variants"].size() == 5);  // the repo's four and the target it lacks
    for (const auto& v : j["variants"]) {
        INFO(v.dump());
        CHECK(v["selected"] == false);
        CHECK_FALSE(v.value("reason", "").empty());
    }
    const auto missing = std::find_if(j["variants"].begin(), j["variants"].end(),
                                      [](const json& v) { return v["name"] == "native-cpu-riscv64-linux"; });
    REQUIRE(missing != j["variants"].end());
    CHECK((*missing)["reason"] == "no such variant in the repo");
}
