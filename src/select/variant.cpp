// parse_variant: the `kernels` naming grammar, legacy and dotted, as its
// release k_kernels_release parses it, plus kernhub's native family.
//
// kernels' grammar is loose where its parser is (any <cpu>-<os> pair, any
// word after torch- or mlx-, version digits with leading zeros), so that a
// name kernels accepts is accepted here and compared by the same rules; a
// name it refuses is refused. kernhub's native family keeps its own strict
// grammar. Version numbers are bounded (k_max_version_digits): a name with
// a longer one is refused.
#include "select/variant.hpp"

#include <array>

namespace kernhub::select {
namespace {

using Tokens = std::vector<std::string_view>;

// Significant digits of one version number in a variant name; more would
// not fit an int, and no real version has them.
constexpr std::size_t k_max_version_digits = 9;

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

std::string join(const Tokens& tokens, std::size_t first, std::size_t last) {
    std::string text;
    for (std::size_t i = first; i < last && i < tokens.size(); ++i) {
        if (i > first) text += '-';
        text += tokens[i];
    }
    return text;
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

bool starts_with(std::string_view text, std::string_view prefix) {
    return text.substr(0, prefix.size()) == prefix;
}

bool starts_with_digit(std::string_view text) {
    return !text.empty() && text.front() >= '0' && text.front() <= '9';
}

// A run of digits as a number, as a version component reads it ("012" is
// 12); nullopt past k_max_version_digits significant digits.
std::optional<int> number(std::string_view digits) {
    if (!is_digits(digits)) return std::nullopt;
    while (digits.size() > 1 && digits.front() == '0') digits.remove_prefix(1);
    if (digits.size() > k_max_version_digits) return std::nullopt;
    int value = 0;
    for (const char c : digits) value = value * 10 + (c - '0');
    return value;
}

using Version = std::pair<int, int>;

std::optional<Version> digits_version(std::string_view major, std::string_view minor) {
    const std::optional<int> a = number(major);
    const std::optional<int> b = number(minor);
    if (!a || !b) return std::nullopt;
    return Version{*a, *b};
}

// "X.Y", one or more digits each.
std::optional<Version> dotted(std::string_view text) {
    const std::size_t dot = text.find('.');
    if (dot == std::string_view::npos) return std::nullopt;
    return digits_version(text.substr(0, dot), text.substr(dot + 1));
}

// Legacy "{MAJ}{MIN}" digits: the minor is the last digit, the major the
// rest (cu128 -> 12.8, cu92 -> 9.2); at least two digits.
std::optional<Version> last_digit_minor(std::string_view digits) {
    if (digits.size() < 2) return std::nullopt;
    return digits_version(digits.substr(0, digits.size() - 1), digits.substr(digits.size() - 1));
}

// Legacy framework "{M}{MM}" digits: the major is the first digit, the
// minor the rest (torch210 -> 2.10, tvm-ffi01 -> 0.1).
std::optional<Version> first_digit_major(std::string_view digits) {
    if (digits.size() < 2) return std::nullopt;
    return digits_version(digits.substr(0, 1), digits.substr(1));
}

Backend unversioned(BackendKind kind) {
    Backend backend;
    backend.kind = kind;
    return backend;
}

Backend make_versioned(BackendKind kind, Version version) {
    return Backend{kind, version.first, version.second, true};
}

std::optional<BackendKind> unversioned_kind(std::string_view word) {
    static constexpr std::array<std::pair<std::string_view, BackendKind>, 4> k_kinds{{
        {"cpu", BackendKind::cpu},
        {"metal", BackendKind::metal},
        {"neuron", BackendKind::neuron},
        {"tpu", BackendKind::tpu},
    }};
    for (const auto& [spelled, kind] : k_kinds) {
        if (word == spelled) return kind;
    }
    return std::nullopt;
}

std::optional<BackendKind> versioned_kind(std::string_view word) {
    static constexpr std::array<std::pair<std::string_view, BackendKind>, 4> k_kinds{{
        {"cann", BackendKind::cann},
        {"cuda", BackendKind::cuda},
        {"rocm", BackendKind::rocm},
        {"xpu", BackendKind::xpu},
    }};
    for (const auto& [spelled, kind] : k_kinds) {
        if (word == spelled) return kind;
    }
    return std::nullopt;
}

// A legacy backend: one token. The prefix decides the kind before the
// digits are read, so "cuda12" is a malformed CUDA name, not CANN or CPU.
std::optional<Backend> legacy_backend(std::string_view token) {
    if (const auto kind = unversioned_kind(token)) return unversioned(*kind);
    std::optional<Version> version;
    BackendKind kind = BackendKind::none;
    if (starts_with(token, "cu")) {
        kind = BackendKind::cuda;
        version = last_digit_minor(token.substr(2));
    } else if (starts_with(token, "rocm")) {
        kind = BackendKind::rocm;
        // ROCm minors have one digit, except 7.14 (rocm714).
        const std::string_view digits = token.substr(4);
        version = digits == "714" ? std::optional<Version>(Version{7, 14}) : last_digit_minor(digits);
    } else if (starts_with(token, "xpu")) {
        kind = BackendKind::xpu;
        version = last_digit_minor(token.substr(3));
    } else if (starts_with(token, "cann")) {
        kind = BackendKind::cann;
        version = last_digit_minor(token.substr(4));
    }
    if (!version) return std::nullopt;
    return make_versioned(kind, *version);
}

// A dotted-form backend: "cpu" (one token) or "cuda" "12.8" (two).
std::optional<Backend> dotted_backend(const Tokens& tokens) {
    if (tokens.empty()) return std::nullopt;
    if (const auto kind = unversioned_kind(tokens[0])) {
        if (tokens.size() != 1) return std::nullopt;
        return unversioned(*kind);
    }
    const auto kind = versioned_kind(tokens[0]);
    if (!kind || tokens.size() != 2) return std::nullopt;
    const std::optional<Version> version = dotted(tokens[1]);
    if (!version) return std::nullopt;
    return make_versioned(*kind, *version);
}

// "cpython" "X.Y" "abi3|abi3t": exactly these three tokens; abi3t needs 3.15.
std::optional<PythonTag> python_tag(const Tokens& tokens) {
    if (tokens.size() != 3 || tokens[0] != "cpython") return std::nullopt;
    const std::optional<Version> version = dotted(tokens[1]);
    if (!version || (tokens[2] != "abi3" && tokens[2] != "abi3t")) return std::nullopt;
    PythonTag tag;
    tag.major = version->first;
    tag.minor = version->second;
    tag.abi3t = tokens[2] == "abi3t";
    tag.legacy = false;
    if (tag.abi3t && *version < Version{3, 15}) return std::nullopt;
    return tag;
}

Tokens slice(const Tokens& tokens, std::size_t first, std::size_t last) {
    if (first >= last || first >= tokens.size()) return {};
    return Tokens(tokens.begin() + static_cast<long>(first),
                  tokens.begin() + static_cast<long>(std::min(last, tokens.size())));
}

// The tail of an arch name after its framework: [backend...] [cpython X.Y
// abi] <cpu> <os>. The Python tag starts at the first "cpython" and is
// required in the dotted form; a legacy name has none.
bool parse_arch_tail(const Tokens& tail, Variant& variant) {
    if (tail.size() < 2) return false;
    variant.cpu = std::string(tail[tail.size() - 2]);
    variant.os = std::string(tail[tail.size() - 1]);
    Tokens backend = slice(tail, 0, tail.size() - 2);
    if (variant.legacy) {
        variant.python = PythonTag{};
    } else {
        const auto marker = std::find(backend.begin(), backend.end(), "cpython");
        if (marker == backend.end()) return false;
        variant.python = python_tag(Tokens(marker, backend.end()));
        if (!variant.python) return false;
        backend.erase(marker, backend.end());
    }
    if (backend.empty()) return false;
    const std::optional<Backend> parsed =
        variant.legacy ? (backend.size() == 1 ? legacy_backend(backend[0]) : std::nullopt) : dotted_backend(backend);
    if (!parsed) return false;
    variant.backend = *parsed;
    return true;
}

void set_family_version(Variant& variant, Version version) {
    variant.family_major = version.first;
    variant.family_minor = version.second;
}

// The framework of a kernels arch name: how many tokens it takes, or 0.
std::size_t parse_framework(const Tokens& tokens, std::string_view name, Variant& variant) {
    const auto has = [&](std::size_t i) { return tokens.size() > i; };
    if (starts_with(name, "torch-stable-abi")) {
        variant.family = Family::torch_stable_abi;
        // Legacy torch-stable-abi211, dotted torch-stable-abi-2.11.
        variant.legacy = !(tokens.size() > 3 && tokens[2] == "abi");
        std::optional<Version> version;
        if (variant.legacy) {
            if (tokens.size() >= 3 && tokens[1] == "stable" && starts_with(tokens[2], "abi")) {
                version = first_digit_major(tokens[2].substr(3));
            }
        } else if (tokens[1] == "stable") {
            version = dotted(tokens[3]);
        }
        if (!version) return 0;
        set_family_version(variant, *version);
        return variant.legacy ? 3 : 4;
    }
    if (tokens[0] == "tvm") {
        variant.family = Family::tvm_ffi;
        variant.legacy = !(tokens.size() > 2 && tokens[1] == "ffi");
        const std::optional<Version> version =
            variant.legacy ? first_digit_major(tokens[1].substr(3)) : dotted(tokens[2]);
        if (!version) return 0;
        set_family_version(variant, *version);
        return variant.legacy ? 2 : 3;
    }
    // torch-X.Y[-cxx11|-cxx98] (dotted) or torch{M}{MM}[-cxx11|-cxx98] (legacy).
    variant.family = Family::torch;
    variant.legacy = tokens[0] != "torch";
    const std::optional<Version> version =
        variant.legacy ? first_digit_major(tokens[0].substr(5)) : (has(1) ? dotted(tokens[1]) : std::nullopt);
    if (!version) return 0;
    set_family_version(variant, *version);
    std::size_t used = variant.legacy ? 1 : 2;
    if (has(used) && (tokens[used] == "cxx11" || tokens[used] == "cxx98")) {
        variant.cxx_abi = std::string(tokens[used]);
        ++used;
    }
    return used;
}

// sdk, sdk-<word>, sdk[-<backend>]-cpython-X.Y-<abi>-<cpu>-<os>.
bool parse_sdk(const Tokens& tokens, Variant& variant) {
    variant.family = Family::sdk;
    const Tokens rest = slice(tokens, 1, tokens.size());
    if (std::find(rest.begin(), rest.end(), "cpython") != rest.end()) {
        if (rest.size() < 2) return false;
        variant.cpu = std::string(rest[rest.size() - 2]);
        variant.os = std::string(rest[rest.size() - 1]);
        Tokens front = slice(rest, 0, rest.size() - 2);
        const auto marker = std::find(front.begin(), front.end(), "cpython");
        if (marker == front.end()) return false;  // "cpython" was the <cpu> or <os>
        variant.python = python_tag(Tokens(marker, front.end()));
        if (!variant.python) return false;
        front.erase(marker, front.end());
        if (front.empty()) return true;  // compiled, for any backend
        const std::optional<Backend> backend = dotted_backend(front);
        if (!backend) return false;
        variant.backend = *backend;
        return true;
    }
    variant.noarch = true;
    if (rest.empty()) return true;  // sdk
    if (rest.size() != 1) return false;
    variant.backend_word = std::string(rest[0]);
    return true;
}

bool parse_kernels(const Tokens& tokens, std::string_view name, Variant& variant) {
    if (tokens[0] == "sdk") return parse_sdk(tokens, variant);
    const bool stable = starts_with(name, "torch-stable-abi");
    const bool dotted_torch = tokens[0] == "torch" && tokens.size() >= 2 && starts_with_digit(tokens[1]);
    if (!stable && !dotted_torch &&
        (tokens[0] == "torch" || (tokens[0] == "mlx" && tokens.size() >= 2 && !starts_with_digit(tokens[1])))) {
        variant.family = Family::noarch;
        variant.noarch = true;
        variant.mlx = tokens[0] == "mlx";
        variant.backend_word = join(tokens, 1, tokens.size());
        return true;
    }
    const bool tvm = tokens[0] == "tvm" && tokens.size() >= 2 && starts_with(tokens[1], "ffi");
    if (!stable && !dotted_torch && !tvm && !starts_with(tokens[0], "torch")) return false;
    const std::size_t used = parse_framework(tokens, name, variant);
    if (used == 0) return false;
    return parse_arch_tail(slice(tokens, used, tokens.size()), variant);
}

// kernhub's native family, strict: <cpu> is x86_64 or aarch64, <os> linux,
// darwin or windows.
bool is_cpu(std::string_view token) {
    return token == "x86_64" || token == "aarch64";
}

bool is_os(std::string_view token) {
    return token == "linux" || token == "darwin" || token == "windows";
}

bool parse_native(const Tokens& tokens, Variant& variant) {
    variant.family = Family::native;
    if (tokens.size() == 2 && tokens[1] == "cuda") {
        variant.noarch = true;
        variant.backend = unversioned(BackendKind::cuda);
        return true;
    }
    if (tokens.size() != 4 || !is_cpu(tokens[2]) || !is_os(tokens[3])) return false;
    variant.cpu = std::string(tokens[2]);
    variant.os = std::string(tokens[3]);
    // kernhub builds native code for the CPU and for CUDA, cu{MAJ}{MIN} with
    // a two-digit major.
    const std::string_view digits = tokens[1].substr(2);
    if (starts_with(tokens[1], "cu") && (digits.size() != 3 || !is_digits(digits) || digits.front() == '0')) {
        return false;
    }
    const std::optional<Backend> backend = legacy_backend(tokens[1]);
    if (!backend || (backend->kind != BackendKind::cpu && backend->kind != BackendKind::cuda)) return false;
    variant.backend = *backend;
    return true;
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
        case BackendKind::cann:
            return "cann";
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
    return (backend.kind == BackendKind::cuda ? std::string("cu") : kind_word(backend.kind)) + digits;
}

std::string backend_dotted(const Backend& backend) {
    if (!backend.versioned) return kind_word(backend.kind);
    return kind_word(backend.kind) + "-" + std::to_string(backend.major) + "." + std::to_string(backend.minor);
}

std::optional<Variant> parse_variant(std::string_view name) {
    const Tokens tokens = split_on_dash(name);
    Variant variant;
    variant.name = std::string(name);
    const bool ok = tokens[0] == "native" ? parse_native(tokens, variant) : parse_kernels(tokens, name, variant);
    if (!ok) {
        return std::nullopt;
    }
    return variant;
}

}  // namespace kernhub::select
