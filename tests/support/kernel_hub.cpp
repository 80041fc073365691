#include "support/kernel_hub.hpp"

#include <sys/utsname.h>

#include <fstream>

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

// The hub tree is the same for every test in a process: build it once.
static const std::filesystem::path& shared_hub_root() {
    static TempDir dir;
    static bool built = false;
    if (!built) {
        make_hub(standard_hub_spec(), dir.path() / "hub");
        built = true;
    }
    static const std::filesystem::path root = dir.path() / "hub";
    return root;
}

KernelHub::KernelHub(HubServer::Options options) : m_root(shared_hub_root()) {
    m_server = std::make_unique<HubServer>(m_root, options);
}

std::filesystem::path write_standard_registry(const std::filesystem::path& dir) {
    auto path = dir / "registry.json";
    std::ofstream(path) << standard_registry().dump(2);
    return path;
}

}  // namespace kernhub::test
