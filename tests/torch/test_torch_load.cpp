// Torch ops end to end in a process that links LibTorch: the three layouts
// a torch kernel ships in (torch{MM}-cxx11, untagged torch{MM},
// torch-stable-abi{MM}) fetched from a loopback hub, loaded by kernhub,
// resolved to the dispatcher's typed handle (kernhub/torch.hpp) and called
// on CPU tensors with exact results; the loads kernhub refuses and why; and
// that nothing ever calls into Python.
#include "torch/torch_setup.hpp"  // first: torch's headers before Catch's

#include <dlfcn.h>

#include <atomic>
#include <fstream>

#include "kernhub/kernhub.h"
#include "support/requirements.hpp"
#include "torchenv/torch_facts.hpp"

using namespace kernhub::test;
using namespace kernhub::test::torch_hub;
using kernhub::ErrorCode;

namespace {

KERNHUB_TEST_REQUIREMENT("needs:torch", why_no_torch);

std::atomic<int> python_module_creations{0};

}  // namespace

// Python's module constructor, exported by this program (ENABLE_EXPORTS):
// the op libraries' PyInit_<name> calls PyModule_Create2, so a call from
// any of them lands here and is counted, where a process without Python
// would die on the unbound symbol instead.
extern "C" __attribute__((visibility("default"))) void* PyModule_Create2(void* /*module*/, int /*api_version*/) {
    ++python_module_creations;
    return nullptr;
}

using UnaryOp = at::Tensor(const at::Tensor&);

TEST_CASE("this_torch() states the torch the program links, and selection follows it as kernels would",
          "[torch][needs:torch]") {
    const kernhub::TorchInfo stated = kernhub::torch::this_torch();
    // The same facts the torch package's own files give.
    std::string problem;
    const auto files = kernhub::torchenv::read_torch_dir(build::torch_dir, "test");
    CHECK(stated.major == files.info.major);
    CHECK(stated.minor == files.info.minor);
    CHECK(stated.cuda == files.info.cuda);
    CHECK(stated.cxx11_abi == files.info.cxx11_abi);
    CHECK(stated.source == "kernhub/torch.hpp");

    Setup setup;
    kernhub::Options options = setup.options(cxx11_variant());
    options.targets.clear();
    options.torch = stated;
    if (!stated.cuda.empty()) {
        // A CUDA build of torch selects CUDA variants (this repo has none),
        // as kernels' selection does, GPU or not.
        kernhub::Client cuda_client(options);
        try {
            cuda_client.load("torch-add-one");
            FAIL("a CPU-only repo loaded for a CUDA torch");
        } catch (const kernhub::Error& error) {
            CHECK(error.code() == ErrorCode::not_found);
            CHECK_THAT(error.what(), Catch::Contains("the backend is cu"));
        }
    }
    options.backend = "cpu";
    kernhub::Client client(options);
    const kernhub::LoadResult result = client.load("torch-add-one");
    CHECK(result.fetch.variant == stable_variant());  // stable-abi ranks first
    CHECK(values(kernhub::torch::op<UnaryOp>(client, "torch-add-one").call(tensor({1.0f}))) ==
          (std::vector<float>{2.0f}));
}

TEST_CASE("each torch layout is loaded and its op called through the dispatcher with exact results",
          "[torch][needs:torch]") {
    Setup setup;
    const auto [variant, ns] = GENERATE(table<std::string, std::string>({
        {cxx11_variant(), k_ops_ns},
        {untagged_variant(), k_ops_ns},
        {stable_variant(), k_stable_ns},
    }));
    INFO(variant);
    kernhub::Client client(setup.options(variant));
    const kernhub::LoadResult result = client.load("torch-add-one");
    CHECK(result.fetch.variant == variant);
    CHECK(result.kind == kernhub::LoadKind::torch_op);
    CHECK(result.torch_op == ns + std::string("::add_one"));
    CHECK(result.symbol == "add_one");
    CHECK(result.address == nullptr);
    CHECK(result.torch_version == std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) +
                                      "." + std::to_string(TORCH_VERSION_PATCH));
    CHECK(fs::path(result.torch_library).filename() == "libtorch_cpu.so");
    CHECK(fs::equivalent(fs::path(result.torch_library).parent_path(), fs::path(build::torch_dir) / "lib"));
    CHECK(fs::path(result.file).filename() == ns + std::string(".abi3.so"));

    const auto add_one = kernhub::torch::op<UnaryOp>(client, "torch-add-one");
    CHECK(values(add_one.call(tensor({1.5f, -2.0f, 0.0f, 1e6f}))) ==
          (std::vector<float>{2.5f, -1.0f, 1.0f, 1000001.0f}));
    // The same handle from the result, and a second load that finds the
    // ops already registered.
    CHECK(values(kernhub::torch::op<UnaryOp>(result).call(tensor({41.0f}))) == (std::vector<float>{42.0f}));
    CHECK(client.load("torch-add-one").torch_op == result.torch_op);
    CHECK(python_module_creations == 0);
}

TEST_CASE("an overload and a second op of one library, named by the registry's op or LoadOptions::op",
          "[torch][needs:torch]") {
    Setup setup;
    kernhub::Client client(setup.options(cxx11_variant()));
    const kernhub::LoadResult out = client.load("torch-add-one-out");
    CHECK(out.torch_op == std::string(k_ops_ns) + "::add_one.out");
    CHECK(out.symbol == "add_one_out");
    at::Tensor target = tensor({0.0f, 0.0f});
    const auto add_one_out = kernhub::torch::op<at::Tensor&(const at::Tensor&, at::Tensor&)>(out);
    at::Tensor& returned = add_one_out.call(tensor({3.0f, -0.5f}), target);
    CHECK(values(target) == (std::vector<float>{4.0f, 0.5f}));
    CHECK(returned.data_ptr() == target.data_ptr());

    kernhub::LoadOptions options;
    options.op = "scale";
    const kernhub::LoadResult scale = client.load("torch-add-one", options);
    CHECK(scale.torch_op == std::string(k_ops_ns) + "::scale");
    const auto scaled = kernhub::torch::op<at::Tensor(const at::Tensor&, double)>(scale);
    CHECK(values(scaled.call(tensor({1.5f, -4.0f}), 2.0)) == (std::vector<float>{3.0f, -8.0f}));
    CHECK(python_module_creations == 0);
}

TEST_CASE("the registry's file picks the op library, and its file name gives the namespace without _ops.py",
          "[torch][needs:torch]") {
    Setup setup;
    kernhub::Client client(setup.options(cxx11_variant()));
    const kernhub::LoadResult result = client.load("torch-bare");
    CHECK(result.torch_op == std::string(k_ops_ns) + "::scale");
    CHECK(result.symbol == "add_one_wrapper");
    const auto scale = kernhub::torch::op<at::Tensor(const at::Tensor&, double)>(result);
    CHECK(values(scale.call(tensor({2.0f}), 0.5)) == (std::vector<float>{1.0f}));
    // Without "file", the two libraries a folder down are not a choice.
    const kernhub::Error several = error_of([&] { client.load("torch-bare-unnamed"); });
    CHECK(several.code() == ErrorCode::usage);
    CHECK(contains(several.what(), "several op libraries"));
}

TEST_CASE("a missing op is not_found naming the ops the library defines", "[torch][needs:torch]") {
    Setup setup;
    const std::string variant = GENERATE(cxx11_variant(), stable_variant());
    INFO(variant);
    kernhub::Client client(setup.options(variant));
    const kernhub::Error error = error_of([&] { client.load("torch-missing"); });
    CHECK(error.code() == ErrorCode::not_found);
    const std::string message = error.what();
    CHECK(contains(message, "::add_two"));
    CHECK(
        contains(message, variant == stable_variant() ? "its ops: add_one;" : "its ops: add_one, add_one.out, scale"));
    CHECK(contains(message, "LoadOptions::op"));
}

TEST_CASE("the typed lookup names the dispatcher's ops of the namespace, and refuses a wrong signature",
          "[torch][needs:torch]") {
    Setup setup;
    kernhub::Client client(setup.options(cxx11_variant()));
    client.load("torch-add-one");
    const kernhub::Error missing = error_of([&] { kernhub::torch::op<UnaryOp>(std::string(k_ops_ns) + "::add_two"); });
    CHECK(missing.code() == ErrorCode::not_found);
    CHECK(contains(missing.what(), "add_one, add_one.out, scale"));
    const kernhub::Error wrong =
        error_of([&] { kernhub::torch::op<at::Tensor(const at::Tensor&, double)>(client, "torch-add-one"); });
    CHECK(wrong.code() == ErrorCode::usage);
    CHECK(contains(wrong.what(), "add_one(Tensor x) -> Tensor"));
    // A torch op is no C function.
    const kernhub::Error kind = error_of([&] { client.resolve<void()>("torch-add-one"); });
    CHECK(kind.code() == ErrorCode::usage);
    CHECK(contains(kind.what(), "is a torch op"));
}

TEST_CASE("a variant for another torch, another C++ ABI or a later stable ABI is a load error naming both sides",
          "[torch][needs:torch]") {
    Setup setup;
    const std::string this_torch = std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR);
    const auto [variant, needs] = GENERATE(table<std::string, std::string>({
        {older_torch_variant(), std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR - 1)},
        {cxx98_variant(), "cxx98"},
        {future_stable_variant(), std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR + 1)},
    }));
    INFO(variant);
    kernhub::Client client(setup.options(variant));
    const kernhub::Error error = error_of([&] { client.load("torch-add-one"); });
    CHECK(error.code() == ErrorCode::load);
    CHECK(contains(error.what(), variant));
    CHECK(contains(error.what(), needs));
    CHECK(contains(error.what(), variant == cxx98_variant() ? "cxx11" : this_torch));
    CHECK(contains(error.what(), "libtorch_cpu.so"));
}

TEST_CASE(
    "a ROCm variant, or a CUDA one for another CUDA major than torch's, is a load error naming both sides "
    "before its library is opened",
    "[torch][needs:torch]") {
    // The torch's side, as its version.py states it.
    const std::string torch_cuda = kernhub::torchenv::read_torch_dir(build::torch_dir, "test").info.cuda;
    const auto [variant, expected] = GENERATE_COPY(table<std::string, std::vector<std::string>>({
        {rocm_variant(), {"built for rocm", "the CPU or CUDA"}},
        {older_cuda_variant(),
         {"CUDA 12.6", torch_cuda.empty() ? "a build without CUDA" : "built with CUDA " + torch_cuda}},
    }));
    INFO(variant);
    Setup setup;
    kernhub::Client client(setup.options(variant));
    const kernhub::Error error = error_of([&] { client.load("torch-add-one"); });
    CHECK(error.code() == ErrorCode::load);
    CHECK(contains(error.what(), variant));
    for (const std::string& part : expected) CHECK(contains(error.what(), part));
    CHECK_FALSE(namespace_loaded(k_ops_ns));
}

TEST_CASE("an op library with a Python data reference is refused before it is loaded", "[torch][needs:torch]") {
    Setup setup;
    kernhub::Client client(setup.options(cxx11_variant()));
    const kernhub::Error error = error_of([&] { client.load("torch-pydata"); });
    CHECK(error.code() == ErrorCode::load);
    CHECK(contains(error.what(), "_Py_NoneStruct"));
    CHECK(contains(error.what(), "R_X86_64_GLOB_DAT"));
    // Not loaded: its namespace never reached the dispatcher.
    CHECK(::dlopen(fixture(k_pydata_ns).c_str(), RTLD_LAZY | RTLD_NOLOAD) == nullptr);
    CHECK_FALSE(c10::Dispatcher::singleton().findSchema({std::string(k_pydata_ns) + "::add_one", ""}).has_value());
}

TEST_CASE("verify_on_load loads the op library's verified bytes and refuses a changed blob", "[torch][needs:torch]") {
    Setup setup;
    kernhub::Client client(setup.options(cxx11_variant(), true));
    const kernhub::FetchResult fetched = client.fetch("torch-add-one");
    const fs::path blob = fs::canonical(fs::path(fetched.path) / (std::string(k_ops_ns) + ".abi3.so"));
    // The cache's owner changes one byte of the read-only blob in place.
    fs::permissions(blob, fs::perms::owner_write, fs::perm_options::add);
    {
        std::fstream io(blob, std::ios::in | std::ios::out | std::ios::binary);
        io.seekp(4096);
        io.put('\x5a');
    }
    const kernhub::Error error = error_of([&] { client.load("torch-add-one"); });
    CHECK(error.code() == ErrorCode::verification);
    CHECK(contains(error.what(), std::string(k_ops_ns) + ".abi3.so"));

    // Fetched again, the verified copy loads and works.
    Setup fresh;
    kernhub::Client verified(fresh.options(cxx11_variant(), true));
    const kernhub::LoadResult result = verified.load("torch-add-one");
    CHECK(values(kernhub::torch::op<UnaryOp>(result).call(tensor({-1.0f}))) == (std::vector<float>{0.0f}));
}

TEST_CASE("no Python function is ever called: the probe counts a call to the Python module init",
          "[torch][needs:torch]") {
    Setup setup;
    kernhub::Client client(setup.options(cxx11_variant()));
    const kernhub::LoadResult result = client.load("torch-add-one");
    kernhub::torch::op<UnaryOp>(result).call(tensor({1.0f}));
    CHECK(python_module_creations == 0);
    // The probe is live: calling the library's module init, as an import
    // by Python would, reaches it.
    void* library = ::dlopen(result.file.c_str(), RTLD_LAZY | RTLD_NOLOAD);
    REQUIRE(library != nullptr);
    auto* init = reinterpret_cast<void* (*)()>(::dlsym(library, ("PyInit_" + std::string(k_ops_ns)).c_str()));
    REQUIRE(init != nullptr);
    CHECK(init() == nullptr);
    CHECK(python_module_creations == 1);
}

TEST_CASE("the C API names the op a kh_load loaded, for the stable shim's dispatcher call", "[torch][needs:torch]") {
    Setup setup;
    kh_hub* hub = kh_hub_new();
    REQUIRE(hub != nullptr);
    CHECK(kh_hub_set(hub, "endpoint", setup.hub.server().endpoint().c_str()) == 0);
    CHECK(kh_hub_set(hub, "cache_dir", (setup.dir.path() / "cache").c_str()) == 0);
    CHECK(kh_hub_set(hub, "registry", setup.registry.c_str()) == 0);
    CHECK(kh_hub_set(hub, "target", stable_variant().c_str()) == 0);
    CHECK(kh_torch_op(hub, "torch-add-one") == nullptr);
    CHECK(contains(kh_last_error(hub), "not loaded"));
    REQUIRE(kh_load(hub, "torch-add-one") == 0);
    const char* op = kh_torch_op(hub, "torch-add-one");
    REQUIRE(op != nullptr);
    CHECK(std::string(op) == std::string(k_stable_ns) + "::add_one");
    CHECK(kh_symbol(hub, "torch-add-one") == nullptr);
    kh_hub_free(hub);
}

TEST_CASE("an op library's dependency is opened first and registers its ops, and the kernel's op then runs",
          "[torch][needs:torch]") {
    Setup setup;
    REQUIRE_FALSE(namespace_loaded(k_ops_ns));
    kernhub::Client client(setup.options(cxx11_variant()));
    const kernhub::LoadResult result = client.load("torch-needs-ops");
    REQUIRE(result.fetch.dependencies.size() == 1);
    CHECK(result.fetch.dependencies[0].repo_id == k_repo);
    REQUIRE(result.dependency_files.size() == 1);
    CHECK(fs::path(result.dependency_files[0]).filename() == k_ops_ns + std::string(".abi3.so"));
    // The dependency's ops are in the dispatcher, though nothing resolved one.
    CHECK(namespace_loaded(k_ops_ns));
    CHECK(c10::Dispatcher::singleton().findSchema({std::string(k_ops_ns) + "::add_one", ""}).has_value());
    CHECK(result.torch_op == k_stable_ns + std::string("::add_one"));
    const auto add_one = kernhub::torch::op<UnaryOp>(client, "torch-needs-ops");
    CHECK(values(add_one.call(tensor({1.0f, 2.0f}))) == (std::vector<float>{2.0f, 3.0f}));
}
