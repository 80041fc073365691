// The property that ties selection to loading: over the whole variant
// grammar (legacy and dotted names; torch with and without an ABI tag,
// torch-stable-abi, tvm-ffi, noarch, universal and SDK; every backend), a
// spread of torch versions, C++ ABIs and builds (CUDA, without CUDA, not
// told), every variant that selection accepts for a torch passes the
// loader's own check for that torch (loader::torch_fit_problem, which the
// torch-op kind calls), or is refused by the one documented load rule
// (select::rules::load_refusal). And the converse where the loader checks
// the same thing: a torch or CUDA mismatch selection rejects, the loader
// refuses too.
#include <catch2/catch.hpp>

#include "loader/torch_fit.hpp"
#include "select/rules.hpp"
#include "select/variant.hpp"

using namespace kernhub;
using namespace kernhub::select;

namespace {

const std::vector<std::pair<int, int>> k_versions{{2, 7}, {2, 8}, {2, 10}, {2, 11}, {2, 15}, {3, 0}, {3, 2}};

// How the loader learns a fact of the LibTorch in the process: from the
// library itself, from the stated torch only (the fallback), or not at all.
enum class Told { library, stated, nobody };

// One LibTorch in the process, and what the loader is told of it.
struct LibTorch {
    std::pair<int, int> version;
    std::optional<bool> cxx11;  // its ABI, as far as anyone knows
    Told abi_told = Told::library;
    std::optional<std::string> cuda;  // "12.8", "" without CUDA; nullopt: not known
    Told cuda_told = Told::library;
    Backend backend;  // the backend selection sees with this torch

    loader::TorchRuntime runtime() const {
        loader::TorchRuntime out;
        out.library = "/torch/lib/libtorch_cpu.so";
        out.major = version.first;
        out.minor = version.second;
        out.version = rules::version_text(version.first, version.second) + ".0";
        if (abi_told == Told::library) out.cxx11_abi = cxx11;
        return out;
    }
    std::optional<std::string> library_cuda() const { return cuda_told == Told::library ? cuda : std::nullopt; }
    // Whether the loader learns the CUDA: a stated torch's empty cuda is
    // also its default, so it says nothing.
    bool cuda_known() const {
        return cuda && (cuda_told == Told::library || (cuda_told == Told::stated && !cuda->empty()));
    }
    std::optional<TorchInfo> stated() const {
        if (abi_told != Told::stated && cuda_told != Told::stated) return std::nullopt;
        TorchInfo info;
        info.major = version.first;
        info.minor = version.second;
        if (abi_told == Told::stated) info.cxx11_abi = cxx11;
        if (cuda_told == Told::stated) info.cuda = cuda.value_or("");
        return info;
    }
    std::optional<std::string> problem(const Variant& variant) const {
        const auto refusal = loader::torch_fit_problem(variant, "org/kernel", runtime(), library_cuda(), stated());
        if (!refusal) return std::nullopt;
        return refusal->message;
    }
};

Backend versioned(BackendKind kind, int major, int minor) {
    return Backend{kind, major, minor, true};
}

// The builds of torch: a CUDA one (its CUDA told by its files or the
// stated torch), one without CUDA for each backend that is not CUDA, and
// one whose CUDA nobody tells.
std::vector<LibTorch> libtorches() {
    struct Build {
        std::optional<std::string> cuda;
        Told told;
        Backend backend;
    };
    const std::vector<Build> builds{
        {"12.8", Told::library, versioned(BackendKind::cuda, 12, 8)},
        {"13.2", Told::stated, versioned(BackendKind::cuda, 13, 2)},
        {"13.0", Told::library, versioned(BackendKind::cuda, 13, 0)},
        {"", Told::library, Backend{BackendKind::cpu, 0, 0, false}},
        {"", Told::stated, Backend{BackendKind::cpu, 0, 0, false}},
        {"", Told::library, versioned(BackendKind::rocm, 7, 14)},
        {"", Told::library, versioned(BackendKind::xpu, 2025, 1)},
        {"", Told::library, versioned(BackendKind::cann, 8, 1)},
        {"", Told::library, Backend{BackendKind::neuron, 0, 0, false}},
        {"", Told::library, Backend{BackendKind::tpu, 0, 0, false}},
        {"", Told::library, Backend{BackendKind::metal, 0, 0, false}},
        {std::nullopt, Told::nobody, versioned(BackendKind::cuda, 12, 6)},
        {std::nullopt, Told::nobody, Backend{BackendKind::cpu, 0, 0, false}},
    };
    std::vector<LibTorch> out;
    for (const auto& version : k_versions) {
        for (const Build& build : builds) {
            for (const std::optional<bool>& cxx11 : {std::optional<bool>(true), std::optional<bool>(false)}) {
                for (const Told told : {Told::library, Told::stated}) {
                    out.push_back({version, cxx11, told, build.cuda, build.told, build.backend});
                }
            }
            out.push_back({version, std::nullopt, Told::nobody, build.cuda, build.told, build.backend});
        }
    }
    return out;
}

// Backends as the two name forms spell them.
struct Spelled {
    std::string legacy;
    std::string dotted;
};

const std::vector<Spelled> k_backends{
    {"cpu", "cpu"},           {"cu118", "cuda-11.8"},
    {"cu126", "cuda-12.6"},   {"cu128", "cuda-12.8"},
    {"cu129", "cuda-12.9"},   {"cu130", "cuda-13.0"},
    {"cu132", "cuda-13.2"},   {"rocm63", "rocm-6.3"},
    {"rocm714", "rocm-7.14"}, {"xpu20251", "xpu-2025.1"},
    {"cann81", "cann-8.1"},   {"metal", "metal"},
    {"neuron", "neuron"},     {"tpu", "tpu"},
};

// Every variant name of the grammar over those backends and torches.
std::vector<std::string> variant_names() {
    std::vector<std::string> names;
    const std::string arch = "-x86_64-linux";
    for (const Spelled& backend : k_backends) {
        for (const auto& [major, minor] : k_versions) {
            const std::string mm = std::to_string(major) + std::to_string(minor);
            const std::string dotted = rules::version_text(major, minor);
            for (const std::string tag : {"", "-cxx11", "-cxx98"}) {
                names.push_back("torch" + mm + tag + "-" + backend.legacy + arch);
                names.push_back("torch-" + dotted + tag + "-" + backend.dotted + "-cpython-3.9-abi3" + arch);
            }
            names.push_back("torch-stable-abi" + mm + "-" + backend.legacy + arch);
            names.push_back("torch-stable-abi-" + dotted + "-" + backend.dotted + "-cpython-3.12-abi3" + arch);
        }
        names.push_back("tvm-ffi01-" + backend.legacy + arch);
        names.push_back("tvm-ffi-0.1-" + backend.dotted + "-cpython-3.9-abi3" + arch);
        names.push_back("sdk-" + backend.dotted + "-cpython-3.9-abi3" + arch);
    }
    for (const std::string word : {"cpu", "cuda", "rocm", "xpu", "cann", "metal", "neuron", "tpu", "universal"}) {
        names.push_back(std::string("torch-") + word);
        names.push_back(std::string("sdk-") + word);
    }
    for (const std::string name : {"mlx-metal", "mlx-universal", "sdk", "sdk-cpython-3.9-abi3-x86_64-linux"}) {
        names.push_back(name);
    }
    return names;
}

bool torch_family(const Variant& variant) {
    return variant.family == Family::torch || variant.family == Family::torch_stable_abi;
}

}  // namespace

TEST_CASE("every variant selection accepts for a torch passes the loader's fit check, or the one documented refusal",
          "[select]") {
    std::size_t checked = 0;
    std::size_t accepted = 0;
    std::size_t refused_by_rule = 0;
    std::size_t torch_rejected = 0;
    std::size_t cuda_rejected = 0;
    std::vector<std::pair<std::string, Variant>> variants;
    for (const std::string& name : variant_names()) {
        const std::optional<Variant> variant = parse_variant(name);
        INFO(name);
        REQUIRE(variant.has_value());
        variants.emplace_back(name, *variant);
    }
    const std::vector<LibTorch> builds = libtorches();
    for (const LibTorch& torch : builds) {
        HostFacts host;
        host.cpu = "x86_64";
        host.os = "linux";
        host.torch = torch.version;
        host.torch_cxx11_abi = torch.cxx11;
        host.backend = torch.backend;
        for (const auto& [name, variant] : variants) {
            INFO(name << " with torch " << rules::version_text(torch.version.first, torch.version.second) << ", cxx11 "
                      << (torch.cxx11 ? (*torch.cxx11 ? "true" : "false") : "unknown") << " told by "
                      << static_cast<int>(torch.abi_told) << ", CUDA " << torch.cuda.value_or("unknown") << " told by "
                      << static_cast<int>(torch.cuda_told));
            ++checked;
            const std::optional<std::string> problem = torch.problem(variant);
            const std::optional<std::string> refusal = rules::load_refusal(variant);
            const std::optional<std::string> rejected = rules::kernels_reason(host, torch.backend, variant);
            if (!rejected) {
                ++accepted;
                if (torch_family(variant)) {
                    // Passes, or fails with exactly the documented refusal.
                    CHECK(problem.has_value() == refusal.has_value());
                    if (problem && refusal) {
                        CHECK(*problem == "variant " + variant.name + " of org/kernel: " + *refusal);
                        ++refused_by_rule;
                    }
                } else {
                    // Not loaded against LibTorch; noarch and SDK builds are
                    // refused by load_refusal, tvm-ffi is loaded.
                    CHECK_FALSE(problem.has_value());
                    CHECK(refusal.has_value() == (variant.family == Family::noarch || variant.family == Family::sdk));
                }
                continue;
            }
            if (!torch_family(variant)) continue;
            // The converse, where the loader checks what selection checked.
            const std::optional<std::string> torch_reason =
                rules::torch_reason(variant, host.torch, host.torch_cxx11_abi);
            if (torch_reason) {
                ++torch_rejected;
                CHECK(*rejected == *torch_reason);
                REQUIRE(problem.has_value());
                CHECK(problem->find(": it " + *torch_reason + ";") != std::string::npos);
            } else if (variant.backend.kind == BackendKind::cuda && torch.cuda_known() && !refusal) {
                ++cuda_rejected;
                CHECK(problem.has_value());
            }
        }
    }
    INFO("checked " << checked << ", accepted " << accepted << ", refused at load by the documented rule "
                    << refused_by_rule << ", rejected for the torch " << torch_rejected << ", for the CUDA "
                    << cuda_rejected);
    CHECK(checked > 50000);
    CHECK(accepted > 1000);
    CHECK(refused_by_rule > 0);
    CHECK(torch_rejected > 1000);
    CHECK(cuda_rejected > 100);
}

TEST_CASE("the loader's fit check on the ABI the stated torch fills in, and on an ABI nobody tells", "[select]") {
    const std::optional<Variant> tagged = parse_variant("torch-2.10-cxx11-cpu-cpython-3.9-abi3-x86_64-linux");
    REQUIRE(tagged.has_value());
    loader::TorchRuntime runtime;
    runtime.library = "/torch/lib/libtorch_cpu.so";
    runtime.major = 2;
    runtime.minor = 10;
    runtime.version = "2.10.0";
    TorchInfo stated;
    stated.major = 2;
    stated.minor = 10;
    stated.cxx11_abi = true;
    // The library does not tell its ABI: the stated torch's stands in.
    CHECK_FALSE(loader::torch_fit_problem(*tagged, "org/kernel", runtime, std::nullopt, stated).has_value());
    // Nobody tells: an unknown ABI fits untagged builds only.
    const auto unknown = loader::torch_fit_problem(*tagged, "org/kernel", runtime, std::nullopt, std::nullopt);
    REQUIRE(unknown.has_value());
    CHECK(unknown->message.find("built for the cxx11 ABI, torch uses an unknown ABI") != std::string::npos);
    // The library's own ABI wins over the stated one.
    runtime.cxx11_abi = false;
    CHECK(loader::torch_fit_problem(*tagged, "org/kernel", runtime, std::nullopt, stated).has_value());
    // A stable-ABI variant fits a later major.
    const std::optional<Variant> stable = parse_variant("torch-stable-abi211-cpu-x86_64-linux");
    REQUIRE(stable.has_value());
    runtime.major = 3;
    runtime.minor = 0;
    CHECK_FALSE(loader::torch_fit_problem(*stable, "org/kernel", runtime, std::nullopt, std::nullopt).has_value());
    // A CUDA variant in a LibTorch without CUDA: refused, with the backend hint.
    const std::optional<Variant> cuda = parse_variant("torch-stable-abi211-cu128-x86_64-linux");
    REQUIRE(cuda.has_value());
    const auto no_cuda = loader::torch_fit_problem(*cuda, "org/kernel", runtime, std::string(), std::nullopt);
    REQUIRE(no_cuda.has_value());
    CHECK(no_cuda->message.find("is a build without CUDA") != std::string::npos);
    CHECK(no_cuda->hint.kind == ErrorHint::Kind::setting);
}
