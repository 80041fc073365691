// Options::host (the CLI's --host): a machine described as KEY=VALUE pairs, for
// selecting what that machine would select (an image builder prewarming for
// GPU nodes). Nothing of the machine kernhub runs on is used: a key not
// named is absent.
#include <array>
#include <regex>

#include "common/hint.hpp"
#include "common/text.hpp"
#include "kernhub/error.hpp"
#include "select/variant.hpp"

namespace kernhub::select {
namespace {

// A description longer than this is not a machine's.
constexpr std::size_t k_max_host_spec = 512;
constexpr std::array<std::string_view, 16> k_keys{
    "cpu",   "os",     "cuda",  "rocm",      "xpu",     "cann",  "metal",  "neuron",
    "tpu",   "torch",  "cxx11-abi", "tvm-ffi", "macos", "python", "free-threaded", "mlx"};
constexpr const char* k_key_list =
    "cpu, os, cuda, rocm, xpu, cann, metal, neuron, tpu, torch, cxx11-abi, tvm-ffi, macos, python, "
    "free-threaded, mlx";

Error bad(const std::string& what) {
    return Error(ErrorCode::usage, "the host description " + what, hint::setting("host"));
}

// "13.0" -> (13, 0): digits.digits, each at most four digits.
std::pair<int, int> version_of(const std::string& key, const std::string& value) {
    static const std::regex k_version(R"((\d{1,4})\.(\d{1,4}))");
    std::smatch match;
    if (!std::regex_match(value, match, k_version)) {
        throw bad(key + "=" + quoted_name(value) + " is not a version X.Y");
    }
    return {std::stoi(match[1]), std::stoi(match[2])};
}

bool flag_of(const std::string& key, const std::string& value) {
    if (value == "true") return true;
    if (value == "false") return false;
    throw bad(key + "=" + quoted_name(value) + " is neither true nor false");
}

Backend versioned(BackendKind kind, std::pair<int, int> version) {
    Backend backend;
    backend.kind = kind;
    backend.major = version.first;
    backend.minor = version.second;
    backend.versioned = true;
    return backend;
}

// Sets the backend key `key` once; a second backend is an error.
void set_backend(HostFacts& host, const std::string& key, const std::string& value) {
    if (host.backend) {
        throw bad("names two backends: at most one of cuda, rocm, xpu, cann, metal, neuron and tpu");
    }
    if (key == "cuda") {
        host.cuda = version_of(key, value);
        host.backend = versioned(BackendKind::cuda, *host.cuda);
    } else if (key == "rocm") {
        host.backend = versioned(BackendKind::rocm, version_of(key, value));
    } else if (key == "xpu") {
        host.backend = versioned(BackendKind::xpu, version_of(key, value));
    } else if (key == "cann") {
        host.backend = versioned(BackendKind::cann, version_of(key, value));
    } else if (value == "true") {
        const BackendKind kind =
            key == "metal" ? BackendKind::metal : key == "neuron" ? BackendKind::neuron : BackendKind::tpu;
        host.backend = Backend{kind, 0, 0, false};
    } else {
        throw bad(key + "=" + quoted_name(value) + " is not true (leave " + key + " out for another backend)");
    }
}

void set_key(HostFacts& host, const std::string& key, const std::string& value) {
    if (key == "cpu") {
        if (value != "x86_64" && value != "aarch64")
            throw bad("cpu=" + quoted_name(value) + " is not x86_64 or aarch64");
        host.cpu = value;
    } else if (key == "os") {
        if (value != "linux" && value != "darwin" && value != "windows") {
            throw bad("os=" + quoted_name(value) + " is not linux, darwin or windows");
        }
        host.os = value;
    } else if (key == "torch") {
        host.torch = version_of(key, value);
    } else if (key == "cxx11-abi") {
        host.torch_cxx11_abi = flag_of(key, value);
    } else if (key == "macos") {
        host.macos = version_of(key, value);
    } else if (key == "python") {
        host.python = version_of(key, value);
    } else if (key == "free-threaded") {
        host.free_threaded = flag_of(key, value);
    } else if (key == "mlx") {
        host.mlx = flag_of(key, value);
    } else if (key == "tvm-ffi") {
        const std::pair<int, int> version = version_of(key, value);
        host.tvm_ffi = [version] { return RuntimeProbe{version, {}}; };
    } else {
        set_backend(host, key, value);
    }
}

}  // namespace

HostFacts parse_host_spec(std::string_view spec) {
    if (spec.size() > k_max_host_spec) throw bad("is over " + std::to_string(k_max_host_spec) + " bytes");
    HostFacts host;
    host.tvm_ffi = [] { return RuntimeProbe{std::nullopt, "the host description names no tvm-ffi"}; };
    std::vector<std::string> seen;
    for (std::size_t start = 0; start <= spec.size();) {
        std::size_t end = spec.find(',', start);
        if (end == std::string_view::npos) end = spec.size();
        const std::string pair(spec.substr(start, end - start));
        start = end + 1;
        const std::size_t equals = pair.find('=');
        if (equals == std::string::npos || equals == 0 || equals + 1 == pair.size()) {
            throw bad(quoted_name(pair) + " is not KEY=VALUE");
        }
        const std::string key = pair.substr(0, equals);
        if (std::find(k_keys.begin(), k_keys.end(), key) == k_keys.end()) {
            throw bad("key " + quoted_name(key) + " is unknown; keys: " + k_key_list);
        }
        if (std::find(seen.begin(), seen.end(), key) != seen.end()) throw bad("names " + key + " twice");
        seen.push_back(key);
        set_key(host, key, pair.substr(equals + 1));
    }
    if (host.cpu.empty() || host.os.empty()) throw bad("needs both cpu and os");
    if (host.torch_cxx11_abi && !host.torch) throw bad("names cxx11-abi without torch");
    if (host.free_threaded && !host.python) throw bad("names free-threaded without python");
    if (!host.backend) host.backend = Backend{BackendKind::cpu, 0, 0, false};
    return host;
}

}  // namespace kernhub::select
