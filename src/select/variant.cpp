// parse_variant: the `kernels` naming grammar plus kernhub's native family.
// The grammar is strict on purpose: a name we half-understand could be
// selected for a host it cannot run on, so anything unexpected is nullopt.
#include "select/variant.hpp"

#include <array>

namespace kernhub::select {
namespace {

using Tokens = std::vector<std::string_view>;

Tokens split_on_dash(std::string_view name) {
    Tokens tokens;
    std::size_t start = 0;
    while (true) {
        const std::size_t dash = name.find('-', start);
        tokens.push_back(name.substr(start, dash == std::string_view::npos ? dash : dash - start));
        if (dash == std::string_view::npos) {
            return tokens;
        }
        start = dash + 1;
    }
}

bool is_digits(std::string_view text) {
    if (text.empty()) {
        return false;
    }
    for (const char c : text) {
        if (c < '0' || c > '9') {
            return false;
        }
    }
    return true;
}

// Callers bound the length (at most 4 digits), so this cannot overflow.
int to_int(std::string_view digits) {
    int value = 0;
    for (const char c : digits) {
        value = value * 10 + (c - '0');
    }
    return value;
}

bool has_leading_zero(std::string_view digits) {
    return digits.size() > 1 && digits.front() == '0';
}

// "{MM}" of torch28 / torch210 / tvm-ffi01: first digit major, rest minor.
// The major may be 0 (tvm-ffi 0.1); a multi-digit minor may not start with 0,
// since "201" would otherwise read as both 2.01 and 2.1.
std::optional<std::pair<int, int>> parse_family_version(std::string_view digits) {
    if (!is_digits(digits) || digits.size() < 2 || digits.size() > 3) {
        return std::nullopt;
    }
    const std::string_view minor = digits.substr(1);
    if (has_leading_zero(minor)) {
        return std::nullopt;
    }
    return std::make_pair(to_int(digits.substr(0, 1)), to_int(minor));
}

// A versioned backend "<prefix>{MAJ}{MIN}": the minor is the last digit and the
// major the rest, with an allowed range of total digits per prefix.
std::optional<Backend> parse_versioned(std::string_view token, std::string_view prefix, BackendKind kind,
                                       std::size_t min_digits, std::size_t max_digits) {
    if (token.substr(0, prefix.size()) != prefix) {
        return std::nullopt;
    }
    const std::string_view digits = token.substr(prefix.size());
    if (!is_digits(digits) || digits.size() < min_digits || digits.size() > max_digits) {
        return std::nullopt;
    }
    const std::string_view major = digits.substr(0, digits.size() - 1);
    if (major.front() == '0') {
        return std::nullopt;
    }
    Backend backend;
    backend.kind = kind;
    backend.major = to_int(major);
    backend.minor = to_int(digits.substr(digits.size() - 1));
    backend.versioned = true;
    return backend;
}

Backend unversioned(BackendKind kind) {
    Backend backend;
    backend.kind = kind;
    return backend;
}

// Backends of host-specific names: cpu, cu{MAJ}{MIN}, rocm{MAJ}{MIN},
// xpu{YYYY}{m}, cann{MAJ}{MIN}, metal, neuron, tpu. (npu is a
// noarch word only.) CUDA majors have two digits (cu118 .. cu130), so
// "cu12" is malformed rather than CUDA 1.2.
std::optional<Backend> parse_backend(std::string_view token) {
    if (token == "cpu") {
        return unversioned(BackendKind::cpu);
    }
    if (token == "metal") {
        return unversioned(BackendKind::metal);
    }
    if (token == "neuron") {
        return unversioned(BackendKind::neuron);
    }
    if (token == "tpu") {
        return unversioned(BackendKind::tpu);
    }
    if (auto cann = parse_versioned(token, "cann", BackendKind::cann, 2, 3)) {
        return cann;
    }
    if (auto cuda = parse_versioned(token, "cu", BackendKind::cuda, 3, 3)) {
        return cuda;
    }
    if (auto rocm = parse_versioned(token, "rocm", BackendKind::rocm, 2, 3)) {
        return rocm;
    }
    return parse_versioned(token, "xpu", BackendKind::xpu, 5, 5);
}

// The backend word of noarch names: torch-<kind>, native-cuda.
std::optional<BackendKind> parse_backend_kind(std::string_view token) {
    static constexpr std::array<std::pair<std::string_view, BackendKind>, 8> k_kinds{{
        {"cpu", BackendKind::cpu},
        {"cuda", BackendKind::cuda},
        {"rocm", BackendKind::rocm},
        {"metal", BackendKind::metal},
        {"xpu", BackendKind::xpu},
        {"npu", BackendKind::npu},
        {"neuron", BackendKind::neuron},
        {"tpu", BackendKind::tpu},
    }};
    for (const auto& [word, kind] : k_kinds) {
        if (token == word) {
            return kind;
        }
    }
    return std::nullopt;
}

bool is_cpu(std::string_view token) {
    return token == "x86_64" || token == "aarch64";
}

bool is_os(std::string_view token) {
    return token == "linux" || token == "darwin" || token == "windows";
}

// Fills backend, cpu and os from exactly three tokens "<backend>-<cpu>-<os>".
bool parse_backend_platform(const Tokens& tail, Variant& variant) {
    if (tail.size() != 3 || !is_cpu(tail[1]) || !is_os(tail[2])) {
        return false;
    }
    const std::optional<Backend> backend = parse_backend(tail[0]);
    if (!backend) {
        return false;
    }
    variant.backend = *backend;
    variant.cpu = std::string(tail[1]);
    variant.os = std::string(tail[2]);
    return true;
}

Tokens tail_from(const Tokens& tokens, std::size_t first) {
    if (first >= tokens.size()) {
        return {};
    }
    return Tokens(tokens.begin() + static_cast<long>(first), tokens.end());
}

// A family prefix such as "torch28", "abi28" or "ffi01": fixed word + {MM}.
bool parse_family_prefix(std::string_view token, std::string_view word, Variant& variant) {
    if (token.substr(0, word.size()) != word) {
        return false;
    }
    const auto version = parse_family_version(token.substr(word.size()));
    if (!version) {
        return false;
    }
    variant.family_major = version->first;
    variant.family_minor = version->second;
    return true;
}

bool parse_native(const Tokens& tokens, Variant& variant) {
    variant.family = Family::native;
    if (tokens.size() == 2 && tokens[1] == "cuda") {
        variant.noarch = true;
        variant.backend = unversioned(BackendKind::cuda);
        return true;
    }
    // kernhub builds native shared objects only for the CPU and for CUDA.
    if (!parse_backend_platform(tail_from(tokens, 1), variant)) {
        return false;
    }
    return variant.backend.kind == BackendKind::cpu || variant.backend.kind == BackendKind::cuda;
}

// torch-<kind>, torch-universal, torch-stable-abi{MM}-<backend>-<cpu>-<os>.
bool parse_torch_dashed(const Tokens& tokens, Variant& variant) {
    if (tokens.size() == 2) {
        variant.noarch = true;
        if (tokens[1] == "universal") {
            variant.family = Family::torch_universal;
            return true;
        }
        const auto kind = parse_backend_kind(tokens[1]);
        variant.family = Family::torch_noarch;
        variant.backend = unversioned(kind.value_or(BackendKind::none));
        return kind.has_value();
    }
    variant.family = Family::torch_stable_abi;
    return tokens.size() == 6 && tokens[1] == "stable" && parse_family_prefix(tokens[2], "abi", variant) &&
           parse_backend_platform(tail_from(tokens, 3), variant);
}

// torch{MM}[-cxx11|-cxx98]-<backend>-<cpu>-<os>
bool parse_torch_versioned(const Tokens& tokens, Variant& variant) {
    variant.family = Family::torch;
    if (!parse_family_prefix(tokens[0], "torch", variant)) {
        return false;
    }
    std::size_t next = 1;
    if (tokens.size() > 1 && (tokens[1] == "cxx11" || tokens[1] == "cxx98")) {
        variant.cxx_abi = std::string(tokens[1]);
        next = 2;
    }
    return parse_backend_platform(tail_from(tokens, next), variant);
}

bool parse_tvm_ffi(const Tokens& tokens, Variant& variant) {
    variant.family = Family::tvm_ffi;
    return tokens.size() == 5 && parse_family_prefix(tokens[1], "ffi", variant) &&
           parse_backend_platform(tail_from(tokens, 2), variant);
}

}  // namespace

std::string kind_word(BackendKind kind) {
    switch (kind) {
        case BackendKind::cpu:
            return "cpu";
        case BackendKind::cuda:
            return "cuda";
        case BackendKind::rocm:
            return "rocm";
        case BackendKind::xpu:
            return "xpu";
        case BackendKind::metal:
            return "metal";
        case BackendKind::npu:
        case BackendKind::cann:
            return "npu";
        case BackendKind::neuron:
            return "neuron";
        case BackendKind::tpu:
            return "tpu";
        case BackendKind::none:
            break;
    }
    return "none";
}

std::string backend_spelling(const Backend& backend) {
    if (!backend.versioned) return kind_word(backend.kind);
    const std::string digits = std::to_string(backend.major) + std::to_string(backend.minor);
    switch (backend.kind) {
        case BackendKind::cuda:
            return "cu" + digits;
        case BackendKind::cann:
            return "cann" + digits;
        default:
            return kind_word(backend.kind) + digits;
    }
}

std::optional<Variant> parse_variant(std::string_view name) {
    const Tokens tokens = split_on_dash(name);
    Variant variant;
    variant.name = std::string(name);
    bool ok = false;
    if (tokens[0] == "native") {
        ok = parse_native(tokens, variant);
    } else if (tokens[0] == "torch") {
        ok = parse_torch_dashed(tokens, variant);
    } else if (tokens[0] == "tvm") {
        ok = parse_tvm_ffi(tokens, variant);
    } else {
        ok = parse_torch_versioned(tokens, variant);
    }
    if (!ok) {
        return std::nullopt;
    }
    return variant;
}

}  // namespace kernhub::select
