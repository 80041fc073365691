// A loopback hub serving tvm-ffi variants of the fixture kernels
// (tests/fixtures/tvm_ffi), laid out as kernel-builder publishes them:
// build/tvm-ffi01-<backend>-<cpu>-<os>/ holding the _<name>_<backend>_<hash>.so
// library, Python glue and a metadata.json whose digest covers them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <fstream>

#include "support/temp_dir.hpp"
#include "support/zip_craft.hpp"
#include <string>
#include <vector>

#include "support/hub_builder.hpp"
#include "support/hub_server.hpp"
#include "support/kernel_hub.hpp"
#include "support/temp_dir.hpp"
#include "support/tvm_ffi_fixture.hpp"

namespace kernhub::test::tvm {

namespace fs = std::filesystem;
using nlohmann::json;

// "x86_64-linux" on this host.
inline std::string host_platform() {
    const std::string native = host_cpu_variant();  // native-cpu-<cpu>-<os>
    return native.substr(std::string("native-cpu-").size());
}

inline std::string cpu_variant() {
    return "tvm-ffi01-cpu-" + host_platform();
}

// A variant that claims tvm-ffi 0.2: no 0.1 runtime may select it.
inline std::string future_variant() {
    return "tvm-ffi02-cpu-" + host_platform();
}

// The CUDA fixture's variant, from the backend in its file name
// (_kh_tvm_cuda_cu130_<hash>.so -> tvm-ffi01-cu130-<cpu>-<os>); "" when
// it was not built.
inline std::string cuda_variant() {
    const std::string name = tvm_ffi_cuda_fixture_so().filename().string();
    const std::string prefix = "_kh_tvm_cuda_";
    if (name.rfind(prefix, 0) != 0) return "";
    const std::string backend = name.substr(prefix.size(), name.find('_', prefix.size()) - prefix.size());
    return "tvm-ffi01-" + backend + "-" + host_platform();
}

inline const char* k_repo = "kernhub-test/tvm-ops";
inline const char* k_nested_repo = "kernhub-test/tvm-nested";
inline const char* k_needs_repo = "kernhub-test/tvm-needs-ops";
inline const char* k_zip_repo = "kernhub-test/tvm-zipped";

inline json variant_files(const std::string& variant, const fs::path& library) {
    const std::string dir = "build/" + variant + "/";
    return {{dir + library.filename().string(), {{"path", library.string()}}},
            {dir + "__init__.py", {{"text", "from ._ops import ops\n"}}},
            {dir + "_ops.py", {{"text", "ops = None\n"}}}};
}

inline json spec() {
    json files = variant_files(cpu_variant(), tvm_ffi_fixture_so());
    files.update(variant_files(future_variant(), tvm_ffi_fixture_so()));
    if (!cuda_variant().empty()) files.update(variant_files(cuda_variant(), tvm_ffi_cuda_fixture_so()));
    json commit = {{"message", "tvm-ffi kernels"}, {"branches", {"main"}}, {"metadata", true}, {"files", files}};
    // The layout with the library inside a Python package folder.
    const std::string nested_dir = "build/" + cpu_variant() + "/kh_tvm_ops/";
    json nested = {{"message", "nested tvm-ffi library"},
                   {"branches", {"main"}},
                   {"metadata", true},
                   {"files",
                    {{nested_dir + tvm_ffi_fixture_so().filename().string(), {{"path", tvm_ffi_fixture_so().string()}}},
                     {nested_dir + "__init__.py", {{"text", "from ._ops import ops\n"}}}}}};
    // A tvm-ffi kernel that needs tvm-ops (docs/registry.md, "Kernel dependencies").
    json needs = {{"message", "a tvm-ffi kernel with a dependency"},
                  {"branches", {"main"}},
                  {"metadata", true},
                  {"metadata_extra", {{"kernel-depends", {{{"repo-id", k_repo}, {"revision", "main"}}}}}},
                  {"files", variant_files(cpu_variant(), tvm_ffi_fixture_so())}};
    // The zip build layout of kernels 0.19: the Python package in <id>.zip,
    // the library beside it (docs/kernels.md, "The zip build layout").
    static TempDir zip_dir;
    const fs::path zip = zip_dir.path() / "_tvm_zipped_5e2a.zip";
    std::ofstream(zip, std::ios::binary) << make_zip({{"__init__.py", "from ._ops import ops\n"}, {"_ops.py", "ops = None\n"}});
    const std::string zip_variant_dir = "build/" + cpu_variant() + "/";
    json zipped = {{"message", "a tvm-ffi kernel in the zip layout"},
                   {"branches", {"main"}},
                   {"metadata", true},
                   {"metadata_extra", {{"id", "_tvm_zipped_5e2a"}, {"build-layout", "zip"}}},
                   {"files",
                    {{zip_variant_dir + tvm_ffi_fixture_so().filename().string(), {{"path", tvm_ffi_fixture_so().string()}}},
                     {zip_variant_dir + "_tvm_zipped_5e2a.zip", {{"path", zip.string()}}}}}};
    return {{"repos",
             {{{"repo_id", k_repo}, {"type", "kernel"}, {"commits", {commit}}},
              {{"repo_id", k_zip_repo}, {"type", "kernel"}, {"commits", {zipped}}},
              {{"repo_id", k_nested_repo}, {"type", "kernel"}, {"commits", {nested}}},
              {{"repo_id", k_needs_repo}, {"type", "kernel"}, {"commits", {needs}}}}}};
}

// Registry names for each fixture function (and one it lacks).
inline json registry() {
    auto entry = [](const char* symbol) { return json{{"repo_id", k_repo}, {"revision", "main"}, {"symbol", symbol}}; };
    return {{"format", 1},
            {"kernels",
             {{"tvm-add-one", entry("add_one")},
              {"tvm-add-int", entry("add_int")},
              {"tvm-scaled-sum", entry("scaled_sum")},
              {"tvm-length", entry("length_or_minus_one")},
              {"tvm-missing", entry("add_two")},
              {"tvm-greeting", entry("greeting")},
              {"tvm-current-stream", entry("current_stream")},
              {"tvm-nested", {{"repo_id", k_nested_repo}, {"revision", "main"}, {"symbol", "add_int"}}},
              {"tvm-zipped", {{"repo_id", k_zip_repo}, {"revision", "main"}, {"symbol", "add_int"}}},
              {"tvm-needs-ops", {{"repo_id", k_needs_repo}, {"revision", "main"}, {"symbol", "add_int"}}},
              {"tvm-data", entry("not_code")},
              {"tvm-internal", entry("_library_ctx")},
              {"tvm-cuda-add-one", entry("add_one_cuda")}}}};
}

// The hub tree (built once per process) and a server over it.
class TvmHub {
public:
    TvmHub() {
        static TempDir tree;
        static bool made = false;
        if (!made) {
            make_hub(spec(), tree.path() / "hub");
            made = true;
        }
        m_root = tree.path() / "hub";
        m_server = std::make_unique<HubServer>(m_root);
    }
    HubServer& server() { return *m_server; }
    const fs::path& root() const { return m_root; }

private:
    fs::path m_root;
    std::unique_ptr<HubServer> m_server;
};

// Writes registry() to dir/tvm-registry.json.
inline fs::path write_registry(const fs::path& dir) {
    const fs::path path = dir / "tvm-registry.json";
    std::ofstream(path) << registry().dump(2);
    return path;
}

}  // namespace kernhub::test::tvm
