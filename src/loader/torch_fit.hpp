// Whether a torch or torch-stable-abi variant fits the LibTorch in this
// process: the loader's one check of it (the torch-op kind calls this and
// nothing else for it), kept pure so that a property test holds it to
// selection's verdict (tests/select/test_fit_property.cpp). The rules are
// selection's (select::rules::torch_reason, backend_reason), and what it
// refuses beyond them is select::rules::load_refusal: docs/kernels.md,
// "What a load refuses that selection accepts".
#pragma once

#include <optional>
#include <string>

#include "kernhub/error.hpp"
#include "kernhub/kernhub.hpp"
#include "loader/torch_runtime.hpp"
#include "select/variant.hpp"

namespace kernhub::loader {

// Why a load refuses the variant: an Error(load) with these.
struct TorchFitRefusal {
    std::string message;
    ErrorHint hint;
};

// The verdict on `variant` of `repo_id` (named in the message) for the
// LibTorch in the process:
// - `libtorch`: what the library tells of itself (torch_in_process), its
//   version completed from the stated torch when it did not tell it;
// - `libtorch_cuda`: the CUDA it was built with (torch_cuda_version): "13.2",
//   "" for a build without CUDA, nullopt when its files do not tell;
// - `stated`: the caller's torch facts (LoadRequest::torch), which stand in
//   for the library's C++ ABI and CUDA when it does not tell them.
// In order: the torch rule against the library's version and ABI (an ABI
// neither tells is unknown, which fits untagged builds only), then
// load_refusal, then for a CUDA variant the backend rule against that
// CUDA (none known: not checked; a build without CUDA refuses it). nullopt
// when the variant fits, and for the families other than torch and
// torch-stable-abi, which are not loaded against LibTorch. What needs the
// machine (a CUDA device and driver, LibTorch's CUDA part) is checked
// by the load after this.
std::optional<TorchFitRefusal> torch_fit_problem(const select::Variant& variant, const std::string& repo_id,
                                                 const TorchRuntime& libtorch,
                                                 const std::optional<std::string>& libtorch_cuda,
                                                 const std::optional<TorchInfo>& stated);

}  // namespace kernhub::loader
