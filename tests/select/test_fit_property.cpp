// The property that ties selection to loading: over the whole torch grammar
// (legacy and dotted names, with and without an ABI tag, stable ABI, every
// backend) and a spread of torch versions and ABIs, every torch variant that
// selection accepts for a torch passes the loader's fit check for that torch
// (select::rules::torch_reason, and backend_reason against the torch's
// CUDA), or is refused by the one documented load rule (load_refusal: a
// backend other than the CPU and CUDA).
#include <catch2/catch.hpp>

#include "select/rules.hpp"
#include "select/variant.hpp"

using namespace kernhub::select;

namespace {

struct Torch {
    std::pair<int, int> version;
    std::optional<bool> cxx11;
};

const std::vector<std::pair<int, int>> k_versions{{2, 7}, {2, 8}, {2, 10}, {2, 11}, {2, 15}, {3, 0}, {3, 2}};

std::vector<Torch> torches() {
    std::vector<Torch> out;
    for (const auto& version : k_versions) {
        for (const std::optional<bool>& cxx11 : {std::optional<bool>(true), std::optional<bool>(false),
                                                 std::optional<bool>()}) {
            out.push_back({version, cxx11});
        }
    }
    return out;
}

// Backends as the two name forms spell them, with the backend a host of
// that kind selects.
struct Spelled {
    std::string legacy;
    std::string dotted;
    Backend host;
};

std::vector<Spelled> backends() {
    const auto versioned = [](BackendKind kind, int major, int minor) { return Backend{kind, major, minor, true}; };
    return {
        {"cpu", "cpu", Backend{BackendKind::cpu, 0, 0, false}},
        {"cu126", "cuda-12.6", versioned(BackendKind::cuda, 12, 8)},
        {"cu130", "cuda-13.0", versioned(BackendKind::cuda, 13, 2)},
        {"rocm63", "rocm-6.3", versioned(BackendKind::rocm, 6, 3)},
        {"rocm714", "rocm-7.14", versioned(BackendKind::rocm, 7, 14)},
        {"xpu20251", "xpu-2025.1", versioned(BackendKind::xpu, 2025, 1)},
        {"cann81", "cann-8.1", versioned(BackendKind::cann, 8, 1)},
        {"neuron", "neuron", Backend{BackendKind::neuron, 0, 0, false}},
        {"tpu", "tpu", Backend{BackendKind::tpu, 0, 0, false}},
    };
}

std::vector<std::pair<std::string, Backend>> torch_names() {
    std::vector<std::pair<std::string, Backend>> names;
    for (const Spelled& backend : backends()) {
        for (const auto& [major, minor] : k_versions) {
            const std::string mm = std::to_string(major) + std::to_string(minor);
            const std::string dotted = std::to_string(major) + "." + std::to_string(minor);
            for (const std::string tag : {"", "-cxx11", "-cxx98"}) {
                if (major < 10) names.push_back({"torch" + mm + tag + "-" + backend.legacy + "-x86_64-linux", backend.host});
                names.push_back({"torch-" + dotted + tag + "-" + backend.dotted + "-cpython-3.9-abi3-x86_64-linux",
                                 backend.host});
            }
            names.push_back({"torch-stable-abi" + mm + "-" + backend.legacy + "-x86_64-linux", backend.host});
            names.push_back(
                {"torch-stable-abi-" + dotted + "-" + backend.dotted + "-cpython-3.12-abi3-x86_64-linux", backend.host});
        }
    }
    return names;
}

bool cpu_or_cuda(const Variant& variant) {
    return variant.backend.kind == BackendKind::cpu || variant.backend.kind == BackendKind::cuda;
}

}  // namespace

TEST_CASE("every torch variant selection accepts passes the loader's fit check, or the one documented refusal",
          "[select]") {
    std::size_t accepted = 0;
    std::size_t refused_by_rule = 0;
    std::size_t checked = 0;
    for (const auto& [name, backend] : torch_names()) {
        const std::optional<Variant> variant = parse_variant(name);
        INFO(name);
        REQUIRE(variant.has_value());
        for (const Torch& torch : torches()) {
            HostFacts host;
            host.cpu = "x86_64";
            host.os = "linux";
            host.torch = torch.version;
            host.torch_cxx11_abi = torch.cxx11;
            host.backend = backend;
            ++checked;
            if (rules::kernels_reason(host, backend, *variant)) continue;
            ++accepted;
            // The loader's torch check, with the same torch as the process's.
            CHECK_FALSE(rules::torch_reason(*variant, torch.version, torch.cxx11).has_value());
            // The loader's CUDA check against the torch's CUDA, which is the backend.
            if (variant->backend.kind == BackendKind::cuda) {
                CHECK_FALSE(rules::backend_reason(HostFacts{}, backend, variant->backend).has_value());
            }
            const std::optional<std::string> refusal = rules::load_refusal(*variant);
            CHECK(refusal.has_value() == !cpu_or_cuda(*variant));
            if (refusal) {
                ++refused_by_rule;
                CHECK(refusal->find("kernhub loads torch variants built for the CPU or CUDA") != std::string::npos);
            }
        }
    }
    INFO("checked " << checked << ", accepted " << accepted << ", refused at load by the documented rule "
                    << refused_by_rule);
    CHECK(checked > 5000);
    CHECK(accepted > 500);
    CHECK(refused_by_rule > 0);
    CHECK(accepted > refused_by_rule);
}

TEST_CASE("the loader's fit check refuses what selection refuses for that torch", "[select]") {
    // The converse on a few rows: the same rule, so the same verdict.
    const std::optional<Variant> tagged = parse_variant("torch-2.10-cxx11-cpu-cpython-3.9-abi3-x86_64-linux");
    REQUIRE(tagged.has_value());
    CHECK(rules::torch_reason(*tagged, std::make_pair(2, 10), true) == std::nullopt);
    CHECK(rules::torch_reason(*tagged, std::make_pair(2, 10), std::nullopt).value_or("").find("unknown ABI") !=
          std::string::npos);
    CHECK(rules::torch_reason(*tagged, std::make_pair(2, 11), true).value_or("").find("needs torch 2.10") !=
          std::string::npos);
    const std::optional<Variant> stable = parse_variant("torch-stable-abi211-cpu-x86_64-linux");
    REQUIRE(stable.has_value());
    CHECK(rules::torch_reason(*stable, std::make_pair(3, 0), std::nullopt) == std::nullopt);  // a later major
    CHECK(rules::torch_reason(*stable, std::make_pair(2, 10), true).has_value());
}
