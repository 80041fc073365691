// Registry files on disk: add_file, load_stack and the shipped default.json.
#include <sys/stat.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernhub/error.hpp"
#include "registry/registry.hpp"
#include "support/build_paths.hpp"
#include "support/temp_dir.hpp"

namespace fs = std::filesystem;
using kernhub::ErrorCode;
using kernhub::RepoType;
using kernhub::registry::KernelSpec;
using kernhub::registry::load_stack;
using kernhub::registry::Registry;
using kernhub::registry::StackSources;
using kernhub::test::TempDir;

namespace {

void write_text(const fs::path& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary);
    out << text;
    REQUIRE(out.good());
}

// A registry where every name maps to a kernel whose symbol is `symbol`, so a
// test can tell which layer won.
fs::path write_layer(const fs::path& path, const std::vector<std::string>& names, const std::string& symbol) {
    nlohmann::json document = {{"format", 1}, {"kernels", nlohmann::json::object()}};
    for (const auto& name : names) {
        document["kernels"][name] = {{"repo_id", "org/" + name}, {"version", 1}, {"symbol", symbol}};
    }
    write_text(path, document.dump(2));
    return path;
}

std::string usage_message(const StackSources& sources) {
    try {
        load_stack(sources);
    } catch (const kernhub::Error& error) {
        CHECK(error.code() == ErrorCode::usage);
        return error.message();
    }
    FAIL("load_stack did not throw");
    return {};
}

}  // namespace

TEST_CASE("add_file reads a file and records it as the source", "[registry]") {
    TempDir dir;
    const fs::path file = write_layer(dir.path() / "r.json", {"a"}, "sym");
    Registry registry;
    registry.add_file(file);
    REQUIRE(registry.find("a") != nullptr);
    CHECK(registry.find("a")->source == file.string());
    CHECK(registry.find("a")->symbol == "sym");
}

TEST_CASE("add_file errors name the file", "[registry]") {
    TempDir dir;
    Registry registry;
    const fs::path missing = dir.path() / "missing.json";
    auto message_of = [&registry](const fs::path& path) {
        try {
            registry.add_file(path);
        } catch (const kernhub::Error& error) {
            CHECK(error.code() == ErrorCode::usage);
            return error.message();
        }
        FAIL("add_file did not throw for " << path);
        return std::string();
    };
    CHECK_THAT(message_of(missing), Catch::Contains(missing.string()) && Catch::Contains("not found"));
    CHECK_THAT(message_of(dir.path()), Catch::Contains(dir.path().string()) && Catch::Contains("directory"));
    // A FIFO (or a device) is refused at once instead of waiting for a writer.
    const fs::path fifo = dir.path() / "fifo.json";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    CHECK_THAT(message_of(fifo), Catch::Contains(fifo.string()) && Catch::Contains("not a regular file"));
    CHECK_THAT(message_of("/dev/zero"), Catch::Contains("not a regular file"));

    const fs::path broken = dir.path() / "broken.json";
    write_text(broken, "{\n  \"format\": 1,\n  \"kernels\": {\n    \"x\": {\"repo_id\": \"a/b\",}\n  }\n}\n");
    CHECK_THAT(message_of(broken), Catch::Contains("registry " + broken.string() + ": invalid JSON at line 4"));

    const fs::path bad_field = write_layer(dir.path() / "bad.json", {"x"}, "");
    CHECK_THAT(message_of(bad_field),
               Catch::Contains(bad_field.string()) && Catch::Contains("kernel \"x\"") && Catch::Contains("\"symbol\""));
    CHECK(registry.entries().empty());
}

TEST_CASE("load_stack: default < project < KERNHUB_REGISTRY < explicit", "[registry]") {
    TempDir dir;
    const fs::path& d = dir.path();
    StackSources sources;
    sources.default_file = write_layer(d / "default.json", {"a", "b", "c", "d", "e", "f"}, "default");
    sources.project_file = write_layer(d / "kernhub.json", {"b", "c", "d", "e", "f"}, "project");
    const fs::path env1 = write_layer(d / "env1.json", {"c", "d", "e", "f"}, "env1");
    const fs::path env2 = write_layer(d / "env2.json", {"d", "e", "f"}, "env2");
    // Empty items (leading, doubled and trailing colons) are skipped.
    sources.env_value = ":" + env1.string() + "::" + env2.string() + ":";
    sources.explicit_files = {write_layer(d / "flag1.json", {"e", "f"}, "flag1"),
                              write_layer(d / "flag2.json", {"f"}, "flag2")};

    const Registry registry = load_stack(sources);
    const std::vector<std::pair<std::string, std::string>> expected = {
        {"a", "default"}, {"b", "project"}, {"c", "env1"}, {"d", "env2"}, {"e", "flag1"}, {"f", "flag2"}};
    REQUIRE(registry.entries().size() == expected.size());
    for (const auto& [name, layer] : expected) {
        const KernelSpec* spec = registry.find(name);
        REQUIRE(spec != nullptr);
        CHECK(spec->symbol == layer);
        CHECK(spec->source == (d / (layer == "project" ? "kernhub.json" : layer + ".json")).string());
    }
}

TEST_CASE("load_stack skips a missing default or project file", "[registry]") {
    TempDir dir;
    StackSources sources;
    CHECK(load_stack(sources).entries().empty());

    sources.default_file = dir.path() / "no-default.json";
    sources.project_file = dir.path() / "no-project.json";
    CHECK(load_stack(sources).entries().empty());

    sources.explicit_files = {write_layer(dir.path() / "x.json", {"x"}, "explicit")};
    const Registry registry = load_stack(sources);
    REQUIRE(registry.entries().size() == 1);
    CHECK(registry.find("x")->source == (dir.path() / "x.json").string());
}

TEST_CASE("load_stack rejects missing files that were named and broken optional ones", "[registry]") {
    TempDir dir;
    const fs::path missing = dir.path() / "gone.json";

    StackSources env_sources;
    env_sources.env_value = write_layer(dir.path() / "ok.json", {"a"}, "s").string() + ":" + missing.string();
    const std::string env_message = usage_message(env_sources);
    CHECK_THAT(env_message, Catch::Contains(missing.string()) && Catch::Contains("KERNHUB_REGISTRY"));

    StackSources flag_sources;
    flag_sources.explicit_files = {missing};
    CHECK_THAT(usage_message(flag_sources), Catch::Contains(missing.string()) && Catch::Contains("not found"));

    // Present but broken is an error even for the optional layers.
    const fs::path broken = dir.path() / "kernhub.json";
    write_text(broken, R"({"format": 1, "kernels": {"k": {"repo_id": "a/b", "symbol": "s"}}})");
    StackSources project_sources;
    project_sources.project_file = broken;
    CHECK_THAT(usage_message(project_sources), Catch::Contains(broken.string()) && Catch::Contains("kernel \"k\""));
}

TEST_CASE("the shipped registry/default.json loads with the expected backends", "[registry]") {
    const fs::path file = fs::path(KERNHUB_SOURCE_DIR) / "registry" / "default.json";
    StackSources sources;
    sources.default_file = file;
    const Registry registry = load_stack(sources);

    struct Expected {
        const char* name;
        const char* repo_id;
        const char* revision;  // effective revision
        const char* symbol;
        const char* file;
        // op: only where the op's name is checked in public sources
        // (docs/registry.md, "The default registry").
        const char* op = "";
    };
    const std::vector<Expected> expected = {
        {"flash-attn2", "kernels-community/flash-attn2", "v1", "flash_attn_func", ""},
        {"flash-attn3", "kernels-community/flash-attn3", "v1", "flash_attn_func", "", "fwd"},
        {"flash-attn3-varlen", "kernels-community/flash-attn3", "v1", "flash_attn_varlen_func", "", "fwd"},
        {"flash-attn4", "kernels-community/flash-attn4", "v0", "flash_attn_func", ""},
        {"sage-attention", "kernels-community/sage-attention", "v1", "sageattn", ""},
        {"saxpy", "kernhub-demo/vector-add", "main", "kh_saxpy", "libvector_add.so"},
        {"vector-add", "kernhub-demo/vector-add", "main", "kh_vector_add", "libvector_add.so"},
        {"vector-add-cuda", "kernhub-demo/vector-add", "main", "kh_vector_add", "vector_add.fatbin"},
    };
    REQUIRE(registry.entries().size() == expected.size());
    for (const auto& want : expected) {
        INFO(want.name);
        const KernelSpec* spec = registry.find(want.name);
        REQUIRE(spec != nullptr);
        CHECK(spec->repo_id == want.repo_id);
        CHECK(spec->effective_revision() == want.revision);
        CHECK(spec->symbol == want.symbol);
        CHECK(spec->file == want.file);
        CHECK(spec->op == want.op);
        CHECK(spec->repo_type == RepoType::kernel);
        CHECK(spec->source == file.string());
        // The kernels-community entries are pinned to the signers the
        // Python kernels library trusts by default; the demo is unsigned.
        if (std::string(want.repo_id).rfind("kernels-community/", 0) == 0) {
            REQUIRE(spec->signature);
            CHECK(spec->signature->issuer == "https://token.actions.githubusercontent.com");
            CHECK(spec->signature->repository == "huggingface/kernels-community");
            const std::string base = "https://github.com/huggingface/kernels-community/.github/workflows/";
            CHECK(spec->signature->identities ==
                  std::vector<std::string>{base + "build.yaml@refs/heads/main", base + "build-mac.yaml@refs/heads/main",
                                           base + "build-windows.yaml@refs/heads/main",
                                           base + "sign-old-builds.yaml@refs/heads/main"});
        } else {
            CHECK_FALSE(spec->signature);
        }
    }
    CHECK(registry.find("flash-attn4")->version == 0);
    CHECK(registry.find("vector-add")->revision == "main");

    std::ifstream in(file);
    CHECK(nlohmann::json::parse(in).at("$schema") == "./schema.json");
}

TEST_CASE("registry/schema.json is a draft 2020-12 schema for the same fields", "[registry]") {
    std::ifstream in(fs::path(KERNHUB_SOURCE_DIR) / "registry" / "schema.json");
    const nlohmann::json schema = nlohmann::json::parse(in);
    CHECK(schema.at("$schema") == "https://json-schema.org/draft/2020-12/schema");
    CHECK(schema.at("properties").at("format").at("const") == 1);
    std::vector<std::string> fields;
    for (const auto& item : schema.at("$defs").at("kernel").at("properties").items()) fields.push_back(item.key());
    std::sort(fields.begin(), fields.end());
    CHECK(fields ==
          std::vector<std::string>{"file", "op", "repo_id", "repo_type", "revision", "signature", "symbol", "version"});
}
