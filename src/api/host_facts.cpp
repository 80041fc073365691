// detect_host: the facts of this machine, or of a described one.
#include "api/host_facts.hpp"

#include "common/hint.hpp"
#include "common/python_env.hpp"
#include "common/text.hpp"
#include "cuda/driver.hpp"
#include "select/rules.hpp"
#include "tvmffi/runtime.hpp"

namespace kernhub::api {
namespace {

std::string version_text(const std::pair<int, int>& version) {
    return std::to_string(version.first) + "." + std::to_string(version.second);
}

select::Backend versioned(select::BackendKind kind, std::pair<int, int> version) {
    return select::Backend{kind, version.first, version.second, true};
}

// The backend a torch build decides, as `kernels` reads it: torch.version.
// cuda, else hip, else xpu ("20250101" -> 2025.1), else the CPU.
select::Backend torch_backend(const TorchInfo& torch) {
    if (auto cuda = torchenv::major_minor(torch.cuda)) return versioned(select::BackendKind::cuda, *cuda);
    if (auto hip = torchenv::major_minor(torch.hip)) return versioned(select::BackendKind::rocm, *hip);
    if (torch.xpu.size() >= 6 && torch.xpu.find_first_not_of("0123456789") == std::string::npos) {
        return versioned(select::BackendKind::xpu, {std::stoi(torch.xpu.substr(0, 4)), torch.xpu[5] - '0'});
    }
    return select::Backend{select::BackendKind::cpu, 0, 0, false};
}

void add_python_report(HostDetection& found, const std::string& source) {
    const select::HostFacts& facts = found.facts;
    // A described host's unnamed Python is the default, still a fact of the description.
    const std::string fallback = source == "host description" ? source : std::string("the default");
    found.report.push_back({"python", version_text(facts.python.value_or(select::k_default_python)),
                            facts.python ? source : fallback});
    found.report.push_back({"free-threaded", facts.free_threaded ? "true" : "false", facts.python ? source : fallback});
    found.report.push_back({"mlx", facts.mlx ? "true" : "false", facts.python || facts.mlx ? source : fallback});
}

HostDetection described(const Settings& settings) {
    HostDetection found;
    found.facts = select::parse_host_spec(settings.host);
    const std::string source = "host description";
    const select::HostFacts& facts = found.facts;
    found.report.push_back({"cpu", facts.cpu, source});
    found.report.push_back({"os", facts.os, source});
    found.report.push_back({"backend", select::backend_spelling(select::selected_backend(facts)), source});
    found.report.push_back({"torch", facts.torch ? version_text(*facts.torch) : "none", source});
    if (facts.torch_cxx11_abi) found.report.push_back({"cxx11-abi", *facts.torch_cxx11_abi ? "true" : "false", source});
    if (facts.macos) found.report.push_back({"macos", version_text(*facts.macos), source});
    const select::RuntimeProbe tvm_ffi = facts.tvm_ffi();
    found.report.push_back({"tvm-ffi", tvm_ffi.version ? version_text(*tvm_ffi.version) : "none", source});
    add_python_report(found, source);
    return found;
}

// The driver's CUDA version when it has a device; a driver that cannot
// describe its devices must not fail a CPU fetch, so it counts as none.
void add_driver(HostDetection& found) {
    std::string source = "no CUDA driver";
    if (cuda::Driver::available()) {
        source = "CUDA driver";
        try {
            cuda::DriverInfo info = cuda::Driver::instance().info();
            if (!info.devices.empty()) found.facts.cuda = std::make_pair(info.major(), info.minor());
            if (info.devices.empty()) source = "CUDA driver (no device)";
        } catch (const Error&) {
            found.facts.cuda.reset();
            source = "CUDA driver (cannot describe its devices)";
        }
    }
    found.report.push_back({"cuda", found.facts.cuda ? version_text(*found.facts.cuda) : "none", source});
}

void add_torch(HostDetection& found, const Settings& settings, const Options& options) {
    std::string problem;
    found.torch = torchenv::find_torch(options.torch, settings.torch_dir, settings.torch_dir_named_by, problem);
    if (!found.torch) {
        found.report.push_back(
            {"torch", "none", problem.empty() ? "not in " + std::string("the Python environments searched") : problem});
        return;
    }
    const TorchInfo& torch = found.torch->info;
    found.facts.torch = std::make_pair(torch.major, torch.minor);
    found.facts.torch_cxx11_abi = torch.cxx11_abi;
    found.report.push_back({"torch", version_text(*found.facts.torch), torch.source});
    found.report.push_back({"cxx11-abi", torch.cxx11_abi ? (*torch.cxx11_abi ? "true" : "false") : "unknown",
                            found.torch->abi_source.empty() ? torch.source : found.torch->abi_source});
}

// The Python whose tags variants must fit: the environment torch came from,
// else the active one ($VIRTUAL_ENV, $CONDA_PREFIX), else the default.
void add_python(HostDetection& found) {
    std::optional<python_env::PythonFacts> python;
    if (found.torch) python = python_env::python_of(found.torch->lib_dir.string());
    if (!python) python = python_env::active_python();
    if (python) {
        found.facts.python = python->version;
        found.facts.free_threaded = python->free_threaded;
        found.facts.mlx = python->mlx;
    }
    add_python_report(found, python ? python->source : std::string());
}

void add_backend(HostDetection& found, const Settings& settings) {
    std::string source;
    if (settings.backend == "cpu") {
        found.facts.backend = select::Backend{select::BackendKind::cpu, 0, 0, false};
        found.facts.cuda.reset();  // the native family's CUDA builds too
        source = "asked for (Options::backend or KERNHUB_BACKEND)";
    } else if (found.torch) {
        found.facts.backend = torch_backend(found.torch->info);
        source = "torch's build (" + found.torch->info.source + ")";
    } else {
        source = found.facts.cuda ? "CUDA driver" : "no CUDA driver";
    }
    found.report.push_back({"backend", select::backend_spelling(select::selected_backend(found.facts)), source});
}

}  // namespace

HostDetection detect_host(const Settings& settings, const Options& options) {
    if (!settings.host.empty()) return described(settings);
    HostDetection found;
    found.facts = select::detect_host();
    found.facts.targets = settings.targets;
    found.facts.tvm_ffi = [library = settings.tvm_ffi_library] {
        tvmffi::Probe probe = tvmffi::probe(library);
        return select::RuntimeProbe{probe.version, probe.problem};
    };
    found.report.push_back({"cpu", found.facts.cpu, "uname"});
    found.report.push_back({"os", found.facts.os, "uname"});
    if (settings.targets.empty()) add_driver(found);
    add_torch(found, settings, options);
    add_python(found);
    add_backend(found, settings);
    return found;
}

std::string load_refusal_of(const std::string& variant) {
    const std::optional<select::Variant> parsed = select::parse_variant(variant);
    if (!parsed) return {};
    return select::rules::load_refusal(*parsed).value_or(std::string());
}

}  // namespace kernhub::api
