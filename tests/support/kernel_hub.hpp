// The standard hub the pipeline and CLI tests fetch from: real compiled
// shared objects laid out by make_hub.py and served by hub_server.py.
#pragma once

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "kernhub/kernhub.hpp"
#include "support/hub_server.hpp"
#include "support/temp_dir.hpp"

namespace kernhub::test {

inline constexpr const char* k_test_token = "hf_kernhub_test_token_5c1e";

// Paths of the real shared objects the build compiled.
std::filesystem::path vector_add_so();         // examples: kh_vector_add, kh_saxpy
std::filesystem::path good_fixture_so();       // tests/fixtures: kh_add_i32
std::filesystem::path undefined_fixture_so();  // dlopen(RTLD_NOW) refuses it
std::filesystem::path cuda_fixture_fatbin();   // nvcc-built: sm_80, sm_90a, compute_90 (absent without nvcc)

// The host's native CPU variant name, e.g. "native-cpu-x86_64-linux".
std::string host_cpu_variant();

// Repos (all kernel repos unless said otherwise):
//   kernhub-test/vector-add   main + v1 -> commit A (host cpu variant with
//                             libvector_add.so, a cu128 variant, an aarch64
//                             variant, a torch variant; metadata.json each);
//                             v2 -> commit B (host cpu variant only)
//   kernhub-test/private      private; host cpu variant (needs k_test_token)
//   kernhub-test/bad-digest   metadata.json digest does not match the .so
//   kernhub-test/undefined    host cpu variant whose .so dlopen refuses
//   kernhub-test/two-objects  host cpu variant with two .so files
//   kernhub-test/model-kernel a model repo with the host cpu variant
//   kernhub-test/vector-add-cuda  native-cuda (multi.fatbin) + host cpu variant;
//                             only when nvcc built the fixture
nlohmann::json standard_hub_spec();

// A registry document naming the standard hub's repos.
nlohmann::json standard_registry();

// A hub tree (laid out once per build folder and shared by every test
// process) plus a running server over it.
class KernelHub {
public:
    explicit KernelHub(HubServer::Options options = {});
    const std::filesystem::path& root() const { return m_root; }
    HubServer& server() { return *m_server; }
    std::string file_endpoint() const { return "file://" + m_root.string(); }

private:
    std::filesystem::path m_root;
    std::unique_ptr<HubServer> m_server;
};

// The Options of a Client on the file:// hub a test laid out in root/hub:
// its cache root/cache, root its project folder, no default registry.
Options file_hub_options(const std::filesystem::path& root);

// Writes standard_registry() into dir/registry.json and returns the path.
std::filesystem::path write_standard_registry(const std::filesystem::path& dir);

}  // namespace kernhub::test
