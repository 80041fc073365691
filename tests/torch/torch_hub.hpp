// A loopback hub serving torch variants of the torch op fixtures
// (tests/fixtures/torch), laid out as kernel-builder publishes them:
// build/<variant>/ holding the _<name>_<hash>.abi3.so op library,
// __init__.py, _ops.py (ops = torch.ops._<name>_<hash>) and a metadata.json
// whose digest covers them. The variants are named for the torch the tests
// compile against (TORCH_VERSION_MAJOR/MINOR), so the tests select them
// with explicit targets.
#pragma once

#include <link.h>
#include <torch/headeronly/version.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "support/build_paths.hpp"
#include "support/elf_craft.hpp"
#include "support/hub_builder.hpp"
#include "support/hub_server.hpp"
#include "support/kernel_hub.hpp"
#include "support/slurp.hpp"
#include "support/temp_dir.hpp"
#include "support/zip_craft.hpp"

namespace kernhub::test::torch_hub {

namespace fs = std::filesystem;
using nlohmann::json;

inline constexpr const char* k_repo = "kernhub-test/torch-ops";
inline constexpr const char* k_pydata_repo = "kernhub-test/torch-pydata";
inline constexpr const char* k_bare_repo = "kernhub-test/torch-bare";
inline constexpr const char* k_needs_repo = "kernhub-test/torch-needs-ops";
inline constexpr const char* k_ops_ns = "_kh_torch_ops_9e1b2c7";
inline constexpr const char* k_stable_ns = "_kh_torch_stable_9e1b2c7";
inline constexpr const char* k_pydata_ns = "_kh_torch_pydata_9e1b2c7";
// The CUDA variant's library (built where nvcc and a CUDA torch are).
inline constexpr const char* k_cuda_repo = "kernhub-test/torch-cuda";
inline constexpr const char* k_cuda_ns = "_kh_torch_cuda_9e1b2c7";

inline fs::path fixture(const std::string& ns) {
    return fs::path(build::torch_fixture_dir) / (ns + ".abi3.so");
}
// Another build of the same namespace (other bytes), or the library as
// `strip --strip-unneeded` leaves it.
inline fs::path other_fixture(const std::string& ns) {
    return fs::path(build::torch_fixture_dir) / "other" / (ns + ".abi3.so");
}
inline fs::path stripped_fixture(const std::string& ns) {
    return fs::path(build::torch_fixture_dir) / "stripped" / (ns + ".abi3.so");
}

// How many objects of this process have a file name starting with
// `stem` (each ctest entry is a process of its own).
inline int objects_named(const std::string& stem) {
    struct Count {
        std::string stem;
        int found = 0;
    } count{stem, 0};
    dl_iterate_phdr(
        [](struct dl_phdr_info* info, std::size_t, void* data) {
            auto* c = static_cast<Count*>(data);
            if (info->dlpi_name != nullptr && fs::path(info->dlpi_name).filename().string().rfind(c->stem, 0) == 0) {
                ++c->found;
            }
            return 0;
        },
        &count);
    return count.found;
}

// Whether an object whose file name starts with `ns` is loaded.
inline bool namespace_loaded(const std::string& ns) {
    return objects_named(ns) > 0;
}

// Why the torch tests cannot run here, "" when they can.
inline std::string why_no_torch() {
    if (*build::torch_why_not != 0) return build::torch_why_not;
    for (const char* ns : {k_ops_ns, k_stable_ns, k_pydata_ns}) {
        if (!fs::exists(fixture(ns))) return "the torch fixture " + fixture(ns).string() + " was not built";
    }
    for (const char* ns : {k_ops_ns, k_stable_ns}) {
        for (const fs::path& copy : {other_fixture(ns), stripped_fixture(ns)}) {
            if (!fs::exists(copy)) return "the torch fixture " + copy.string() + " was not built";
        }
    }
    return {};
}

// "x86_64-linux" on this host.
inline std::string host_platform() {
    return host_cpu_variant().substr(std::string("native-cpu-").size());
}

// torch{MM}: the torch the tests compile against, or another minor.
inline std::string torch_tag(int minor_offset = 0) {
    return "torch" + std::to_string(TORCH_VERSION_MAJOR) + std::to_string(TORCH_VERSION_MINOR + minor_offset);
}

// The three layouts a torch kernel ships in.
inline std::string cxx11_variant() {
    return torch_tag() + "-cxx11-cpu-" + host_platform();
}
inline std::string untagged_variant() {
    return torch_tag() + "-cpu-" + host_platform();
}
inline std::string stable_variant() {
    return "torch-stable-abi212-cpu-" + host_platform();
}
// Variants this process's LibTorch does not fit.
inline std::string older_torch_variant() {
    return torch_tag(-1) + "-cxx11-cpu-" + host_platform();
}
inline std::string cxx98_variant() {
    return torch_tag() + "-cxx98-cpu-" + host_platform();
}
// torch{MM}-cxx11-cu<nvcc>-...: the CUDA fixture's variant; "" when it is
// not built.
inline std::string cuda_variant() {
    if (*build::torch_cuda_tag == 0) return {};
    return torch_tag() + "-cxx11-" + build::torch_cuda_tag + "-" + host_platform();
}
// A CUDA build for an older CUDA major than the test torch's (which is
// CUDA 13 or a CPU build): refused at load, before its library is opened.
inline std::string older_cuda_variant() {
    return torch_tag() + "-cxx11-cu126-" + host_platform();
}
// A ROCm build, which kernhub selects (under --host) but does not load.
inline std::string rocm_variant() {
    return torch_tag() + "-cxx11-rocm64-" + host_platform();
}
inline std::string future_stable_variant() {
    return "torch-stable-abi" + std::to_string(TORCH_VERSION_MAJOR) + std::to_string(TORCH_VERSION_MINOR + 1) +
           "-cpu-" + host_platform();
}

// The Python package of a variant, as kernel-builder writes it.
inline json variant_files(const std::string& variant, const std::string& ns) {
    const std::string dir = "build/" + variant + "/";
    const std::string ops_py = "import torch\nfrom . import " + ns + "\nops = torch.ops." + ns +
                               "\n\n\ndef add_op_namespace_prefix(op_name: str):\n    return f\"" + ns +
                               "::{op_name}\"\n";
    const std::string init_py =
        "import torch\n\nfrom ._ops import ops\n\n\ndef add_one(x: torch.Tensor) -> torch.Tensor:\n"
        "    return ops.add_one(x)\n";
    return {{dir + ns + ".abi3.so", {{"path", fixture(ns).string()}}},
            {dir + "__init__.py", {{"text", init_py}}},
            {dir + "_ops.py", {{"text", ops_py}}}};
}

// The repos of the op-namespace attack (docs/kernels.md, "Torch ops"), one
// set per registration form: `form` is "ops" (TORCH_LIBRARY) or "stable"
// (STABLE_TORCH_LIBRARY); each is kernhub-test/<form>-<shape>, its variant
// cxx11_variant(). `other_ns` is the other form's namespace.
inline json attack_repos(const std::string& form, const std::string& ns, const std::string& other_ns) {
    const std::string dir = "build/" + cxx11_variant() + "/";
    const auto ops_py = [](const std::string& claim, const std::string& more = {}) {
        return json{{"text", "import torch\nops = torch.ops." + claim + "\n" + more}};
    };
    const auto library = [&](const fs::path& path, const std::string& claim, const std::string& name = {}) {
        json files = {{dir + (name.empty() ? ns : name) + ".abi3.so", {{"path", path.string()}}}};
        if (!claim.empty()) files[dir + "_ops.py"] = {{"text", "import torch\nops = torch.ops." + claim + "\n"}};
        return files;
    };
    const auto repo = [&](const std::string& shape, const json& files, const std::string& depends = {}) {
        json extra = {{"name", form + "-" + shape}, {"python-depends", json::array()}};
        if (!depends.empty()) {
            extra["kernel-depends"] = {{{"repo-id", "kernhub-test/" + form + "-" + depends}, {"revision", "main"}}};
        }
        return json{{"repo_id", "kernhub-test/" + form + "-" + shape},
                    {"type", "kernel"},
                    {"commits",
                     {{{"message", shape},
                       {"branches", {"main"}},
                       {"metadata", true},
                       {"files", files},
                       {"metadata_extra", extra}}}}};
    };
    json two_lines = library(fixture(ns), "");
    two_lines[dir + "_ops.py"] = ops_py(ns, "ops = torch.ops.zzz\n");
    return json::array({
        repo("honest", library(fixture(ns), ns)),
        repo("copy", library(fixture(ns), ns)),
        // _ops.py claims a namespace the bytes do not register.
        repo("spoof", library(fixture(ns), "zzz")),
        repo("real", library(fixture(ns), ns), "spoof"),
        repo("stripped", library(stripped_fixture(ns), ns)),
        repo("spoof-stripped", library(stripped_fixture(ns), "zzz")),
        // No _ops.py, and a file name that is not the namespace.
        repo("renamed", library(fixture(ns), "", "_renamed_ns")),
        repo("renamed-stripped", library(stripped_fixture(ns), "", "_renamed_ns")),
        // The same bytes twice in one tree.
        repo("twice", library(fixture(ns), ns), "copy"),
        // Another build of the namespace in one tree with the first.
        repo("other", library(other_fixture(ns), ns), "copy"),
        // A dependency whose _ops.py claims this kernel's namespace.
        repo("claims-mine", library(fixture(other_ns), ns, other_ns)),
        repo("blocked", library(fixture(ns), ns), "claims-mine"),
        repo("class", library(fixture(ns), "__class__")),
        repo("two-lines", two_lines),
    });
}

// A zip written once per process under a folder of its own, for a hub
// file's "path".
inline fs::path zip_fixture(const std::string& name, const std::vector<std::pair<std::string, std::string>>& members) {
    static TempDir dir;
    const fs::path path = dir.path() / (name + ".zip");
    std::ofstream(path, std::ios::binary) << make_zip(members);
    return path;
}

// The zip build layout of kernels 0.19 (docs/kernels.md, "The zip build
// layout"): the Python package is <id>.zip, the op library lies beside it.
// kernhub-test/<form>-zip-<shape>, variant cxx11_variant(): "honest",
// "spoof" (the zip's _ops.py claims zzz), "twice" (two _ops.py in the zip),
// "no-zip" (the layout without its zip), "unknown-layout" (a layout
// kernels 0.19.1 does not know).
inline json zip_repos(const std::string& form, const std::string& ns) {
    const std::string dir = "build/" + cxx11_variant() + "/";
    const std::string id = "_" + form + "_zipped_7c1d";
    const std::string init_py = "from ._ops import ops\n\n\ndef add_one(x):\n    return ops.add_one(x)\n";
    const auto ops_py = [](const std::string& claim) {
        return "import torch\nfrom . import " + claim + "\nops = torch.ops." + claim + "\n";
    };
    const auto repo = [&](const std::string& shape, const std::vector<std::pair<std::string, std::string>>& zipped,
                          const std::string& layout = "zip") {
        json files = {{dir + ns + ".abi3.so", {{"path", fixture(ns).string()}}}};
        if (!zipped.empty()) files[dir + id + ".zip"] = {{"path", zip_fixture(form + "-" + shape, zipped).string()}};
        json extra = {{"name", form + "-zip-" + shape}, {"id", id}, {"build-layout", layout},
                      {"python-depends", json::array()}};
        return json{{"repo_id", "kernhub-test/" + form + "-zip-" + shape},
                    {"type", "kernel"},
                    {"commits",
                     {{{"message", shape},
                       {"branches", {"main"}},
                       {"metadata", true},
                       {"files", files},
                       {"metadata_extra", extra}}}}};
    };
    const std::vector<std::pair<std::string, std::string>> honest = {{"__init__.py", init_py},
                                                                     {"_ops.py", ops_py(ns)}};
    return json::array({
        repo("honest", honest),
        repo("spoof", {{"__init__.py", init_py}, {"_ops.py", ops_py("zzz")}}),
        repo("twice", {{"__init__.py", init_py}, {"_ops.py", ops_py(ns)}, {"_ops.py", ops_py("zzz")}}),
        repo("no-zip", {}),
        repo("unknown-layout", honest, "tar"),
    });
}

// The stripped TORCH_LIBRARY library holding the stable library's
// namespace as one more string of its read-only data: it may register it,
// as far as its bytes can tell.
inline fs::path holds_stable_fixture() {
    static TempDir dir;
    const fs::path path = dir.path() / (std::string(k_ops_ns) + ".abi3.so");
    if (!fs::exists(path)) {
        const std::string ns = k_stable_ns;
        std::vector<std::uint8_t> payload(1, 0);
        payload.insert(payload.end(), ns.begin(), ns.end());
        payload.push_back(0);
        const std::vector<std::uint8_t> bytes =
            with_read_only_section(slurp_bytes(stripped_fixture(k_ops_ns)), payload);
        std::ofstream(path, std::ios::binary)
            .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    }
    return path;
}

inline json spec() {
    json files = variant_files(cxx11_variant(), k_ops_ns);
    files.update(variant_files(untagged_variant(), k_ops_ns));
    files.update(variant_files(stable_variant(), k_stable_ns));
    files.update(variant_files(older_torch_variant(), k_ops_ns));
    files.update(variant_files(cxx98_variant(), k_ops_ns));
    files.update(variant_files(future_stable_variant(), k_stable_ns));
    files.update(variant_files(rocm_variant(), k_ops_ns));
    files.update(variant_files(older_cuda_variant(), k_ops_ns));
    // kernels needs a Python name and its minimum version in metadata.json.
    const json extra = {{"name", "torch-ops"}, {"python-depends", json::array()}};
    json commit = {{"message", "torch ops"},
                   {"branches", {"main"}},
                   {"metadata", true},
                   {"files", files},
                   {"metadata_extra", extra}};
    json pydata = {{"message", "an op library with a Python data reference"},
                   {"branches", {"main"}},
                   {"metadata", true},
                   {"files", variant_files(cxx11_variant(), k_pydata_ns)}};
    // No Python glue, the library a folder down beside a second .so: the
    // registry's "file" names it and the namespace is its file name's.
    const std::string bare_dir = "build/" + cxx11_variant() + "/lib/";
    json bare = {{"message", "an op library without _ops.py"},
                 {"branches", {"main"}},
                 {"metadata", true},
                 {"files",
                  {{bare_dir + k_ops_ns + ".abi3.so", {{"path", fixture(k_ops_ns).string()}}},
                   {bare_dir + "_helper.so", {{"path", fixture(k_stable_ns).string()}}}}}};
    // An op library (the stable fixture's namespace) that needs torch-ops
    // (docs/registry.md, "Kernel dependencies").
    json needs = {{"message", "an op library with a dependency"},
                  {"branches", {"main"}},
                  {"metadata", true},
                  {"files", variant_files(cxx11_variant(), k_stable_ns)},
                  {"metadata_extra", {{"kernel-depends", {{{"repo-id", k_repo}, {"revision", "main"}}}}}}};
    json repos = {{{"repo_id", k_repo}, {"type", "kernel"}, {"commits", {commit}}},
                  {{"repo_id", k_needs_repo}, {"type", "kernel"}, {"commits", {needs}}},
                  {{"repo_id", k_pydata_repo}, {"type", "kernel"}, {"commits", {pydata}}},
                  {{"repo_id", k_bare_repo}, {"type", "kernel"}, {"commits", {bare}}}};
    for (const json& attack : {attack_repos("ops", k_ops_ns, k_stable_ns), attack_repos("stable", k_stable_ns, k_ops_ns),
                               zip_repos("ops", k_ops_ns), zip_repos("stable", k_stable_ns)}) {
        repos.insert(repos.end(), attack.begin(), attack.end());
    }
    json holds = variant_files(cxx11_variant(), k_ops_ns);
    holds["build/" + cxx11_variant() + "/" + k_ops_ns + ".abi3.so"] = {{"path", holds_stable_fixture().string()}};
    repos.push_back({{"repo_id", "kernhub-test/ops-holds-stable"},
                     {"type", "kernel"},
                     {"commits",
                      {{{"message", "a stripped library holding another's namespace string"},
                        {"branches", {"main"}},
                        {"metadata", true},
                        {"files", holds},
                        {"metadata_extra", {{"name", "ops-holds-stable"}, {"python-depends", json::array()}}}}}}});
    // The CUDA variant beside a CPU one of the same kernel: which one a
    // host gets is the backend's choice.
    if (!cuda_variant().empty()) {
        json cuda_files = variant_files(cuda_variant(), k_cuda_ns);
        cuda_files.update(variant_files(cxx11_variant(), k_ops_ns));
        repos.push_back({{"repo_id", k_cuda_repo},
                         {"type", "kernel"},
                         {"commits",
                          {{{"message", "a CUDA op library"},
                            {"branches", {"main"}},
                            {"metadata", true},
                            {"files", cuda_files},
                            {"metadata_extra", extra}}}}});
    }
    return {{"repos", repos}};
}

// Registry names: the Python wrapper as "symbol", the op as "op" where the
// two differ.
inline json registry() {
    const auto entry = [](const char* symbol, const char* op) {
        json e = {{"repo_id", k_repo}, {"revision", "main"}, {"symbol", symbol}};
        if (op != nullptr) e["op"] = op;
        return e;
    };
    return {{"format", 1},
            {"kernels",
             {{"torch-add-one", entry("add_one", nullptr)},
              {"torch-add-one-out", entry("add_one_out", "add_one.out")},
              {"torch-scale", entry("scale", nullptr)},
              {"torch-missing", entry("add_two", nullptr)},
              {"torch-pydata", {{"repo_id", k_pydata_repo}, {"revision", "main"}, {"symbol", "add_one"}}},
              {"torch-needs-ops", {{"repo_id", k_needs_repo}, {"revision", "main"}, {"symbol", "add_one"}}},
              {"torch-bare",
               {{"repo_id", k_bare_repo},
                {"revision", "main"},
                {"symbol", "add_one_wrapper"},
                {"op", "scale"},
                {"file", std::string("lib/") + k_ops_ns + ".abi3.so"}}},
              {"torch-bare-unnamed", {{"repo_id", k_bare_repo}, {"revision", "main"}, {"symbol", "scale"}}},
              {"torch-cuda-add-one", {{"repo_id", k_cuda_repo}, {"revision", "main"}, {"symbol", "add_one"}}}}}};
}

// The hub tree (laid out once per process) and a server over it.
class TorchHub {
public:
    TorchHub() {
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

// Writes registry() to dir/torch-registry.json.
inline fs::path write_registry(const fs::path& dir) {
    const fs::path path = dir / "torch-registry.json";
    std::ofstream(path) << registry().dump(2);
    return path;
}

}  // namespace kernhub::test::torch_hub
