// The loader's torch fit verdict (torch_fit.hpp): selection's rules applied
// to the LibTorch in the process, with the messages a load gives.
#include "loader/torch_fit.hpp"

#include <utility>

#include "common/hint.hpp"
#include "select/rules.hpp"
#include "torchenv/torch_facts.hpp"

namespace kernhub::loader {

std::optional<TorchFitRefusal> torch_fit_problem(const select::Variant& variant, const std::string& repo_id,
                                                 const TorchRuntime& libtorch,
                                                 const std::optional<std::string>& libtorch_cuda,
                                                 const std::optional<TorchInfo>& stated) {
    if (variant.family != select::Family::torch && variant.family != select::Family::torch_stable_abi) {
        return std::nullopt;
    }
    const std::string what = "variant " + variant.name + " of " + repo_id;
    std::optional<bool> cxx11 = libtorch.cxx11_abi;
    if (!cxx11 && stated) cxx11 = stated->cxx11_abi;
    if (auto reason = select::rules::torch_reason(variant, std::make_pair(libtorch.major, libtorch.minor), cxx11)) {
        return TorchFitRefusal{what + " does not fit this process's LibTorch " + libtorch.library + " (torch " +
                                   libtorch.version + "): it " + *reason +
                                   "; fetch the variant for this torch (kernhub selects it when it knows this "
                                   "torch: KERNHUB_TORCH_DIR), or run with the torch the variant needs",
                               {}};
    }
    if (auto refusal = select::rules::load_refusal(variant)) return TorchFitRefusal{what + ": " + *refusal, {}};
    if (variant.backend.kind != select::BackendKind::cuda) return std::nullopt;
    std::optional<std::string> cuda = libtorch_cuda;
    if (!cuda && stated && !stated->cuda.empty()) cuda = stated->cuda;
    if (!cuda) return std::nullopt;
    const std::string need = select::rules::version_text(variant.backend.major, variant.backend.minor);
    const std::string ours = "this process's LibTorch " + (libtorch.library.empty() ? "" : libtorch.library + " ");
    if (cuda->empty()) {
        return TorchFitRefusal{what + " is built for CUDA " + need + ", and " + ours +
                                   "is a build without CUDA; fetch a CPU variant, or run with a CUDA build of torch",
                               hint::setting("backend")};
    }
    const std::optional<std::pair<int, int>> has = torchenv::major_minor(*cuda);
    if (!has) return std::nullopt;
    const select::Backend built_with{select::BackendKind::cuda, has->first, has->second, true};
    if (auto reason = select::rules::backend_reason(select::HostFacts{}, built_with, variant.backend)) {
        return TorchFitRefusal{what + " does not fit " + ours + "(built with CUDA " + *cuda + "): it " + *reason +
                                   "; fetch the variant for CUDA " + *cuda,
                               {}};
    }
    return std::nullopt;
}

}  // namespace kernhub::loader
