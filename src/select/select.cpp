// select_variant: which build/<variant>/ a host should fetch and load.
//
// Two modes. With --target values the caller knows better than detection (an
// image builder without a GPU prewarming for GPU nodes), so the only checks
// are "is it in the repo" and "does it have the required file". Otherwise
// each candidate is matched against the host facts and the best match by
// rank_of() wins; every other candidate gets one reason, so a failed
// selection can explain itself.
#include <algorithm>
#include <array>

#include "select/variant.hpp"

namespace kernhub::select {
namespace {

std::string version_text(int major, int minor) {
    return std::to_string(major) + "." + std::to_string(minor);
}

// A candidate with an archive is taken to have the file for now: the fetch
// checks, once the archive is unpacked, that it is there.
bool lacks_file(const Candidate& candidate, const std::optional<std::string>& required_file) {
    return required_file &&
           std::find(candidate.files.begin(), candidate.files.end(), *required_file) == candidate.files.end() &&
           std::none_of(candidate.files.begin(), candidate.files.end(), is_variant_archive);
}

std::string lacks_reason(const std::string& file) {
    return "lacks " + file;
}

// Families and backends kernhub cannot load at all, whatever the host.
std::optional<std::string> unsupported_reason(const Variant& variant) {
    switch (variant.backend.kind) {
        case BackendKind::rocm:
            return "ROCm is not supported by kernhub";
        case BackendKind::xpu:
            return "XPU is not supported by kernhub";
        case BackendKind::metal:
            return "Metal is not supported by kernhub";
        case BackendKind::npu:
            return "NPU is not supported by kernhub";
        default:
            return std::nullopt;
    }
}

std::optional<std::string> platform_reason(const HostFacts& host, const Variant& variant) {
    if (variant.noarch || (variant.cpu == host.cpu && variant.os == host.os)) {
        return std::nullopt;
    }
    return "built for " + variant.cpu + "-" + variant.os + ", host is " + host.cpu + "-" + host.os;
}

// CUDA minor versions are backward compatible within a major (a 12.8 driver
// runs cu126 code), majors are not.
std::optional<std::string> cuda_reason(const HostFacts& host, const Variant& variant) {
    if (variant.backend.kind != BackendKind::cuda) {
        return std::nullopt;
    }
    if (!host.cuda) {
        return "needs CUDA, host has no CUDA driver";
    }
    const auto [host_major, host_minor] = *host.cuda;
    const Backend& need = variant.backend;
    if (!need.versioned || (need.major == host_major && need.minor <= host_minor)) {
        return std::nullopt;
    }
    return "needs CUDA " + version_text(need.major, need.minor) + ", host has " + version_text(host_major, host_minor);
}

bool is_torch_family(Family family) {
    return family == Family::torch || family == Family::torch_stable_abi || family == Family::torch_noarch ||
           family == Family::torch_universal;
}

// Torch variants are Python extensions linked against libtorch; kernhub loads
// them only when the caller states an installed torch. Versioned torch builds
// need that exact major.minor; stable-ABI builds run on that version or newer.
std::optional<std::string> torch_reason(const HostFacts& host, const Variant& variant) {
    if (!is_torch_family(variant.family)) {
        return std::nullopt;
    }
    const std::pair<int, int> built{variant.family_major, variant.family_minor};
    const bool versioned = variant.family == Family::torch;
    const bool stable = variant.family == Family::torch_stable_abi;
    const std::string need = versioned ? version_text(built.first, built.second)
                             : stable  ? ">= " + version_text(built.first, built.second)
                                       : std::string();
    if (!host.torch) {
        const std::string which = need.empty() ? std::string() : " (torch " + need + ")";
        return "needs Python and libtorch" + which + "; naming it as a target fetches it anyway";
    }
    const bool ok = versioned ? built == *host.torch : !stable || built <= *host.torch;
    if (ok) {
        return std::nullopt;
    }
    return "needs torch " + need + ", host has torch " + version_text(host.torch->first, host.torch->second);
}

struct Mismatch {
    std::string reason;
    bool missing_runtime = false;
    std::string problem;  // with missing_runtime: why it is missing
};

// tvm-ffi variants run on the runtime kernhub binds, of the same
// major.minor (0.x minors break the C ABI).
std::optional<Mismatch> tvm_ffi_reason(const RuntimeProbe& runtime, const Variant& variant) {
    const std::pair<int, int> built{variant.family_major, variant.family_minor};
    const std::string need = "tvm-ffi " + version_text(built.first, built.second);
    if (!runtime.version) {
        return Mismatch{"needs the " + need + " runtime (libtvm_ffi.so), which kernhub did not find", true,
                        runtime.problem};
    }
    if (*runtime.version == built) {
        return std::nullopt;
    }
    return Mismatch{
        "needs " + need + ", the runtime is tvm-ffi " + version_text(runtime.version->first, runtime.version->second),
        false,
        {}};
}

// Why the host cannot use this candidate, or nullopt when it can (a
// tvm-ffi variant's runtime aside: select_by_detection asks for it). The
// checks run from the most to the least fundamental so the reason names the
// real obstacle (an unsupported backend before a platform mismatch).
std::optional<std::string> mismatch_reason(const HostFacts& host, const Variant& variant) {
    for (auto check : {unsupported_reason(variant), platform_reason(host, variant), cuda_reason(host, variant),
                       torch_reason(host, variant)}) {
        if (check) return check;
    }
    return std::nullopt;
}

// Larger is better, compared left to right:
//  0. CUDA variants above the rest (only CUDA hosts ever match them);
//  1. family tier: what kernhub loads without Python first (native
//     host-specific > native noarch > tvm-ffi), then the torch families in
//     the `kernels` order stable-abi > versioned torch > noarch > universal;
//  2-3. newest family version (matters for stable-abi, where several match);
//  4-5. highest backend version;
//  6. cxx11 ABI above none above cxx98: torch wheels use cxx11 since 2.7 and
//     HostFacts does not carry the ABI.
using RankKey = std::array<int, 7>;

int family_tier(const Variant& variant) {
    switch (variant.family) {
        case Family::native:
            return variant.noarch ? 6 : 7;
        case Family::tvm_ffi:
            return 5;
        case Family::torch_stable_abi:
            return 4;
        case Family::torch:
            return 3;
        case Family::torch_noarch:
            return 2;
        case Family::torch_universal:
            return 1;
    }
    return 0;
}

RankKey rank_of(const Variant& variant) {
    const int abi = variant.cxx_abi == "cxx11" ? 2 : variant.cxx_abi.empty() ? 1 : 0;
    return {variant.backend.kind == BackendKind::cuda ? 1 : 0,
            family_tier(variant),
            variant.family_major,
            variant.family_minor,
            variant.backend.major,
            variant.backend.minor,
            abi};
}

// Fills rejected for every candidate but `chosen`, in input order; `reasons`
// holds the reason of each non-matching candidate.
void reject_all_but(const std::vector<Candidate>& candidates, std::optional<std::size_t> chosen,
                    const std::vector<std::optional<Mismatch>>& reasons, Selection& selection) {
    for (std::size_t i = 0; i < candidates.size(); ++i) {
        if (chosen && i == *chosen) {
            continue;
        }
        if (reasons[i]) {
            selection.rejected.push_back({candidates[i].name, reasons[i]->reason, reasons[i]->missing_runtime});
            if (reasons[i]->missing_runtime) selection.runtime_problem = reasons[i]->problem;
        } else {
            selection.rejected.push_back({candidates[i].name, "lower preference than " + *selection.chosen});
        }
    }
}

Selection select_by_detection(const HostFacts& host, const std::vector<Candidate>& candidates,
                              const std::optional<std::string>& required_file) {
    std::vector<std::optional<Mismatch>> reasons(candidates.size());
    std::optional<std::size_t> best;
    RankKey best_key{};
    struct Waiting {
        RankKey key;
        std::size_t index;
        Variant variant;
    };
    std::vector<Waiting> waiting;
    for (std::size_t i = 0; i < candidates.size(); ++i) {
        std::optional<Variant> variant = parse_variant(candidates[i].name);
        if (!variant) {
            reasons[i] = Mismatch{"unrecognised variant name", false, {}};
        } else if (lacks_file(candidates[i], required_file)) {
            reasons[i] = Mismatch{lacks_reason(*required_file), false, {}};
        } else if (auto reason = mismatch_reason(host, *variant)) {
            reasons[i] = Mismatch{std::move(*reason), false, {}};
        } else if (variant->family == Family::tvm_ffi) {
            waiting.push_back({rank_of(*variant), i, std::move(*variant)});
        } else if (const RankKey key = rank_of(*variant); !best || key > best_key) {
            // Strictly greater: distinct names never tie, but a listing with
            // a duplicate name keeps its first entry.
            best = i;
            best_key = key;
        }
    }
    // tvm-ffi candidates that passed every other check need the runtime,
    // which is asked only when one of them would beat the best other match:
    // answering binds libtvm_ffi.so, which a native choice must not cost.
    // Once asked, every tvm-ffi candidate gets its real reason, so "lower
    // preference" keeps meaning "fits, but ranks lower".
    std::stable_sort(waiting.begin(), waiting.end(), [](const Waiting& a, const Waiting& b) { return a.key > b.key; });
    std::optional<RuntimeProbe> runtime;
    for (const Waiting& candidate : waiting) {
        const bool could_win = !best || candidate.key > best_key;
        if (!could_win && !runtime) break;  // never asked: the rest rank lower
        if (!runtime) runtime = host.tvm_ffi ? host.tvm_ffi() : RuntimeProbe{std::nullopt, "none is bound"};
        if (auto reason = tvm_ffi_reason(*runtime, candidate.variant)) {
            reasons[candidate.index] = std::move(reason);
        } else if (could_win) {
            best = candidate.index;
            best_key = candidate.key;
        }
    }
    Selection selection;
    if (best) {
        selection.chosen = candidates[*best].name;
    }
    reject_all_but(candidates, best, reasons, selection);
    return selection;
}

bool contains(const std::vector<std::string>& values, const std::string& value) {
    return std::find(values.begin(), values.end(), value) != values.end();
}

std::optional<std::size_t> first_available_target(const std::vector<std::string>& targets,
                                                  const std::vector<Candidate>& candidates,
                                                  const std::optional<std::string>& required_file) {
    for (const std::string& target : targets) {
        for (std::size_t i = 0; i < candidates.size(); ++i) {
            if (candidates[i].name == target && !lacks_file(candidates[i], required_file)) {
                return i;
            }
        }
    }
    return std::nullopt;
}

// Targets are taken as given (unparseable names too): the caller may be
// preparing a cache for another machine, so the host facts do not apply.
Selection select_by_targets(const std::vector<std::string>& targets, const std::vector<Candidate>& candidates,
                            const std::optional<std::string>& required_file) {
    const std::optional<std::size_t> chosen = first_available_target(targets, candidates, required_file);
    Selection selection;
    std::vector<std::optional<Mismatch>> reasons(candidates.size());
    if (chosen) {
        selection.chosen = candidates[*chosen].name;
    }
    for (std::size_t i = 0; i < candidates.size(); ++i) {
        if (lacks_file(candidates[i], required_file)) {
            reasons[i] = Mismatch{lacks_reason(*required_file), false, {}};
        } else if (!contains(targets, candidates[i].name)) {
            reasons[i] = Mismatch{"not a requested target", false, {}};
        } else if (selection.chosen) {
            reasons[i] = Mismatch{"a later target than " + *selection.chosen, false, {}};
        }
    }
    reject_all_but(candidates, chosen, reasons, selection);
    std::vector<std::string> reported;
    for (const std::string& target : targets) {
        const bool in_repo =
            std::any_of(candidates.begin(), candidates.end(), [&](const Candidate& c) { return c.name == target; });
        if (!in_repo && !contains(reported, target)) {
            selection.rejected.push_back({target, "no such variant in the repo"});
            reported.push_back(target);
        }
    }
    return selection;
}

}  // namespace

bool is_variant_archive(std::string_view path) {
    for (std::string_view suffix : {".tar.gz", ".tgz", ".tar.zst", ".tar.xz"}) {
        if (path.size() > suffix.size() && path.substr(path.size() - suffix.size()) == suffix) return true;
    }
    return false;
}

Selection select_variant(const HostFacts& host, const std::vector<Candidate>& candidates,
                         const std::optional<std::string>& required_file) {
    if (!host.targets.empty()) {
        return select_by_targets(host.targets, candidates, required_file);
    }
    return select_by_detection(host, candidates, required_file);
}

}  // namespace kernhub::select
