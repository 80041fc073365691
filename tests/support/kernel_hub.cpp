#include "support/kernel_hub.hpp"

#include <sys/utsname.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

#include "digest/digest.hpp"
#include "support/build_paths.hpp"
#include "support/hub_builder.hpp"

namespace kernhub::test {

using nlohmann::json;

std::filesystem::path vector_add_so() {
    return std::filesystem::path(KERNHUB_BINARY_DIR) / "examples" / "libvector_add.so";
}
std::filesystem::path good_fixture_so() {
    return std::filesystem::path(KERNHUB_FIXTURE_DIR) / "libkh_good.so";
}
std::filesystem::path undefined_fixture_so() {
    return std::filesystem::path(KERNHUB_FIXTURE_DIR) / "libkh_undefined.so";
}

std::filesystem::path cuda_fixture_fatbin() {
    return std::filesystem::path(KERNHUB_FIXTURE_DIR) / "multi.fatbin";
}

std::string host_cpu_variant() {
    utsname name{};
    uname(&name);
    std::string machine = name.machine;
    if (machine == "arm64") machine = "aarch64";
    return "native-cpu-" + machine + "-linux";
}

static json so_file(const std::filesystem::path& path) {
    return {{"path", path.string()}, {"lfs", true}};
}

static json commit(std::vector<std::string> branches, json files, json extra = nullptr) {
    json c = {
        {"message", "test commit"}, {"branches", std::move(branches)}, {"metadata", true}, {"files", std::move(files)}};
    if (!extra.is_null()) c["metadata_extra"] = std::move(extra);
    return c;
}

json standard_hub_spec() {
    const std::string cpu = "build/" + host_cpu_variant() + "/";
    const std::string other_cpu = host_cpu_variant().find("x86_64") != std::string::npos
                                      ? "build/native-cpu-aarch64-linux/"
                                      : "build/native-cpu-x86_64-linux/";
    json vector_add_a = {
        {"README.md", {{"text", "vector-add for tests\n"}}},
        {cpu + "libvector_add.so", so_file(vector_add_so())},
        {"build/native-cu128-x86_64-linux/libvector_add.so", {{"text", "not really cuda"}, {"lfs", true}}},
        {other_cpu + "libvector_add.so", {{"text", "other machine"}, {"lfs", true}}},
        {"build/torch28-cxx11-cu128-x86_64-linux/vector_add/__init__.py", {{"text", "import torch\n"}}},
    };
    json vector_add_b = {{cpu + "libvector_add.so", so_file(vector_add_so())}, {cpu + "NOTES.txt", {{"text", "v2\n"}}}};
    json bad_digest_extra = {
        {"digest",
         {{"algorithm", "sha256"}, {"files", {{"libvector_add.so", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}}}}}};
    json repos = json::array({
        {{"repo_id", "kernhub-test/vector-add"},
         {"type", "kernel"},
         {"commits", {commit({"main", "v1"}, vector_add_a), commit({"v2"}, vector_add_b)}}},
        {{"repo_id", "kernhub-test/private"},
         {"type", "kernel"},
         {"private", true},
         {"commits", {commit({"main"}, {{cpu + "libvector_add.so", so_file(vector_add_so())}})}}},
        {{"repo_id", "kernhub-test/bad-digest"},
         {"type", "kernel"},
         {"commits", {commit({"main"}, {{cpu + "libvector_add.so", so_file(vector_add_so())}}, bad_digest_extra)}}},
        {{"repo_id", "kernhub-test/undefined"},
         {"type", "kernel"},
         {"commits", {commit({"main"}, {{cpu + "libkh_undefined.so", so_file(undefined_fixture_so())}})}}},
        {{"repo_id", "kernhub-test/two-objects"},
         {"type", "kernel"},
         {"commits",
          {commit({"main"}, {{cpu + "libvector_add.so", so_file(vector_add_so())},
                             {cpu + "libkh_good.so", so_file(good_fixture_so())}})}}},
        {{"repo_id", "kernhub-test/model-kernel"},
         {"type", "model"},
         {"commits", {commit({"main"}, {{cpu + "libkh_good.so", so_file(good_fixture_so())}})}}},
    });
    if (std::filesystem::exists(cuda_fixture_fatbin())) {
        json cuda_files = {{"build/native-cuda/vector_add.fatbin", so_file(cuda_fixture_fatbin())},
                           {cpu + "libvector_add.so", so_file(vector_add_so())}};
        repos.push_back({{"repo_id", "kernhub-test/vector-add-cuda"},
                         {"type", "kernel"},
                         {"commits", {commit({"main"}, cuda_files)}}});
    }
    return {{"repos", repos}};
}

json standard_registry() {
    return {
        {"format", 1},
        {"kernels",
         {{"vector-add",
           {{"repo_id", "kernhub-test/vector-add"},
            {"revision", "main"},
            {"symbol", "kh_vector_add"},
            {"file", "libvector_add.so"}}},
          {"vector-add-v1", {{"repo_id", "kernhub-test/vector-add"}, {"version", 1}, {"symbol", "kh_vector_add"}}},
          {"vector-add-v2", {{"repo_id", "kernhub-test/vector-add"}, {"version", 2}, {"symbol", "kh_saxpy"}}},
          {"vector-add-v7", {{"repo_id", "kernhub-test/vector-add"}, {"version", 7}, {"symbol", "kh_vector_add"}}},
          {"missing-symbol", {{"repo_id", "kernhub-test/vector-add"}, {"revision", "main"}, {"symbol", "kh_nope"}}},
          {"private", {{"repo_id", "kernhub-test/private"}, {"revision", "main"}, {"symbol", "kh_vector_add"}}},
          {"bad-digest", {{"repo_id", "kernhub-test/bad-digest"}, {"revision", "main"}, {"symbol", "kh_vector_add"}}},
          {"undefined", {{"repo_id", "kernhub-test/undefined"}, {"revision", "main"}, {"symbol", "kh_calls_missing"}}},
          {"two-objects", {{"repo_id", "kernhub-test/two-objects"}, {"revision", "main"}, {"symbol", "kh_add_i32"}}},
          {"model-kernel",
           {{"repo_id", "kernhub-test/model-kernel"},
            {"revision", "main"},
            {"symbol", "kh_add_i32"},
            {"repo_type", "model"}}},
          {"wrong-file",
           {{"repo_id", "kernhub-test/vector-add"},
            {"revision", "main"},
            {"symbol", "kh_vector_add"},
            {"file", "libmissing.so"}}},
          {"vector-add-cuda",
           {{"repo_id", "kernhub-test/vector-add-cuda"},
            {"revision", "main"},
            {"symbol", "kh_vector_add"},
            {"file", "vector_add.fatbin"}}},
          {"cuda-missing-kernel",
           {{"repo_id", "kernhub-test/vector-add-cuda"},
            {"revision", "main"},
            {"symbol", "kh_nope"},
            {"file", "vector_add.fatbin"}}}}}};
}

// What the tree is made of: the spec and the size and time of every file it
// names (a rebuilt example kernel makes another tree).
static void add_sources(const nlohmann::json& node, std::string& key) {
    if (node.is_object()) {
        for (const auto& [name, value] : node.items()) {
            if (name == "path" && value.is_string()) {
                std::error_code ec;
                const auto path = std::filesystem::path(value.get<std::string>());
                const auto size = std::filesystem::file_size(path, ec);
                const auto time = std::filesystem::last_write_time(path, ec).time_since_epoch().count();
                key += "\n" + path.string() + " " + std::to_string(size) + " " + std::to_string(time);
            }
            add_sources(value, key);
        }
    } else if (node.is_array()) {
        for (const auto& value : node) add_sources(value, key);
    }
}

// The hub tree is the same for every test, and tests only read it, so it is
// laid out once per build folder (and again only when what it is made of
// changes), in tests/standard-hubs/<key>/ of the build folder, and every
// test process shares it: ctest runs each test case in a process of its
// own, and laying it out took a Python run per test. The process that finds
// it missing lays it out in a folder of its own and renames that into
// place; one that loses that race uses the winner's tree.
static const std::filesystem::path& shared_hub_root() {
    static const std::filesystem::path root = [] {
        namespace fs = std::filesystem;
        const nlohmann::json spec = standard_hub_spec();
        // The layout program is part of what the tree is made of.
        // So is hub_builder.cpp, which adds the organisations' overviews.
        std::string key =
            spec.dump() + "\n" +
            digest::sha256_file_hex(fs::path(KERNHUB_SOURCE_DIR) / "examples" / "hub" / "make_hub.py") + "\n" +
            digest::sha256_file_hex(fs::path(KERNHUB_SOURCE_DIR) / "tests" / "support" / "hub_builder.cpp");
        add_sources(spec, key);
        const fs::path base = fs::path(KERNHUB_BINARY_DIR) / "tests" / "standard-hubs";
        const fs::path tree = base / digest::sha256_hex(key).substr(0, 16);
        // complete: written last, inside the folder that is renamed into place.
        if (fs::is_regular_file(tree / "complete")) return tree / "hub";
        fs::create_directories(base);
        const fs::path mine = base / (tree.filename().string() + ".new-" + std::to_string(::getpid()));
        fs::remove_all(mine);
        make_hub(spec, mine / "hub");
        std::ofstream(mine / "complete") << key;
        std::error_code ec;
        fs::rename(mine, tree, ec);
        if (ec) {
            fs::remove_all(mine);
            if (!fs::is_regular_file(tree / "complete")) {
                FAIL("the shared test hub " << tree << " is there but not complete (" << ec.message() << "); remove "
                                            << base << " and run the tests again");
            }
        }
        return tree / "hub";
    }();
    return root;
}

KernelHub::KernelHub(HubServer::Options options) : m_root(shared_hub_root()) {
    m_server = std::make_unique<HubServer>(m_root, options);
}

Options file_hub_options(const std::filesystem::path& root) {
    Options options;
    options.endpoint = "file://" + (root / "hub").string();
    options.cache_dir = (root / "cache").string();
    options.no_default_registry = true;
    options.project_dir = root.string();
    return options;
}

std::filesystem::path write_standard_registry(const std::filesystem::path& dir) {
    auto path = dir / "registry.json";
    std::ofstream(path) << standard_registry().dump(2);
    return path;
}

}  // namespace kernhub::test
