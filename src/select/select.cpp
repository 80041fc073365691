// select_variant: which build/<variant>/ a host should fetch and load.
//
// Two modes. With --target values the caller knows better than detection (an
// image builder without a GPU prewarming for GPU nodes), so the only checks
// are "is it in the repo" and "does it have the required file". Otherwise
// each candidate is matched against the host facts: kernhub's native family
// by its own rules, the families of the Python `kernels` library by that
// library's rules and preference order (rules.hpp), and the best of each
// are compared last. Every other candidate gets one reason, so a failed
// selection can explain itself.
#include <algorithm>

#include "select/rules.hpp"
#include "select/variant.hpp"

namespace kernhub::select {
namespace {

using rules::Mismatch;

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

bool is_cuda(const Variant& variant) {
    return variant.backend.kind == BackendKind::cuda;
}

// A kernels-family candidate that fits the host so far, with its key.
struct Ranked {
    rules::KernelsKey key;
    std::size_t index;
    Variant variant;
};

// The state of one detection: reasons so far, the best native candidate,
// and the kernels-family candidates in kernels' order.
struct Walk {
    const HostFacts& host;
    Backend backend;
    std::vector<std::optional<Mismatch>> reasons;
    std::optional<std::size_t> native;
    std::optional<Variant> native_variant;
    rules::NativeKey native_best{};
    std::vector<Ranked> ranked;

    // Sorts one parsed candidate into the native best, the ranked list or
    // a reason.
    void add(std::size_t index, Variant variant) {
        if (variant.family == Family::native) {
            if (auto reason = rules::native_reason(host, variant)) {
                reasons[index] = Mismatch{std::move(*reason), false, {}};
            } else if (const rules::NativeKey key = rules::native_key(variant); !native || key > native_best) {
                // Strictly greater: a listing with a duplicate name keeps its first entry.
                native = index;
                native_best = key;
                native_variant = std::move(variant);
            }
        } else if (auto reason = rules::kernels_reason(host, backend, variant)) {
            reasons[index] = Mismatch{std::move(*reason), false, {}};
        } else {
            ranked.push_back({rules::kernels_key(variant), index, std::move(variant)});
        }
    }

    // Whether a kernels-family candidate would be chosen over the native
    // best: only a CUDA one over a native CPU one.
    bool beats_native(const Variant& variant) const {
        return !native_variant || (is_cuda(variant) && !is_cuda(*native_variant));
    }

    // The kernels-family candidate kernels would choose, if it can beat the
    // native best. A tvm-ffi candidate needs the runtime, which is asked
    // only when such a candidate is next in line and could win: answering
    // binds libtvm_ffi.so, which a native or torch choice must not cost.
    // Once asked, every tvm-ffi candidate gets its real reason, so "lower
    // preference" keeps meaning "fits, but ranks lower".
    std::optional<std::size_t> kernels_choice() {
        std::stable_sort(ranked.begin(), ranked.end(), [](const Ranked& a, const Ranked& b) { return a.key < b.key; });
        std::optional<RuntimeProbe> runtime;
        std::optional<std::size_t> chosen;
        for (const Ranked& candidate : ranked) {
            if (chosen || !beats_native(candidate.variant)) break;
            if (candidate.variant.family == Family::tvm_ffi) {
                if (!runtime) runtime = host.tvm_ffi ? host.tvm_ffi() : RuntimeProbe{std::nullopt, "none is bound"};
                if (rules::tvm_ffi_reason(*runtime, candidate.variant)) continue;
            }
            chosen = candidate.index;
        }
        for (const Ranked& candidate : ranked) {
            if (runtime && candidate.variant.family == Family::tvm_ffi) {
                reasons[candidate.index] = rules::tvm_ffi_reason(*runtime, candidate.variant);
            }
        }
        return chosen;
    }
};

Selection select_by_detection(const HostFacts& host, const std::vector<Candidate>& candidates,
                              const std::optional<std::string>& required_file) {
    Walk walk{host, selected_backend(host), std::vector<std::optional<Mismatch>>(candidates.size()), {}, {}, {}, {}};
    for (std::size_t i = 0; i < candidates.size(); ++i) {
        std::optional<Variant> variant = parse_variant(candidates[i].name);
        if (!variant) {
            walk.reasons[i] = Mismatch{"unrecognised variant name", false, {}};
        } else if (lacks_file(candidates[i], required_file)) {
            walk.reasons[i] = Mismatch{lacks_reason(*required_file), false, {}};
        } else {
            walk.add(i, std::move(*variant));
        }
    }
    const std::optional<std::size_t> kernels = walk.kernels_choice();
    const std::optional<std::size_t> best = kernels ? kernels : walk.native;
    Selection selection;
    if (best) {
        selection.chosen = candidates[*best].name;
    }
    reject_all_but(candidates, best, walk.reasons, selection);
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
