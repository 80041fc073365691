// The facts a Client selects variants by (docs/kernels.md, "Torch kernels" and
// "Describing another machine"): this machine's (uname, the CUDA driver,
// the torch in use, Options::backend), or a host description's, with
// where each fact came from for `info`.
#pragma once

#include <optional>
#include <vector>

#include "api/settings.hpp"
#include "kernhub/kernhub.hpp"
#include "select/variant.hpp"
#include "torchenv/torch_facts.hpp"

namespace kernhub::api {

struct HostDetection {
    select::HostFacts facts;
    std::vector<HostFact> report;
    // The torch found (or stated), with the folder of its libraries.
    std::optional<torchenv::FoundTorch> torch;
};

// Binds the CUDA driver (when no targets are set) and reads torch's files;
// never loads torch or the tvm-ffi runtime (facts.tvm_ffi asks for it
// later, only when a tvm-ffi variant could win). Error(usage) for a torch
// folder that is not one, a host description that does not parse, or a
// backend that the machine does not have.
HostDetection detect_host(const Settings& settings, const Options& options);

// VariantStatus::load_refusal of a variant name: select::rules::
// load_refusal, or empty when kernhub loads it or the name does not parse.
std::string load_refusal_of(const std::string& variant);

}  // namespace kernhub::api
