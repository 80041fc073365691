// kernhub for programs that link LibTorch: header-only, C++20 (as torch's
// own headers are), and the only kernhub header that includes torch. The
// kernhub library itself never includes or links torch.
//
// A torch kernel (a torch{MM} or torch-stable-abi{MM} variant) is an op its
// library registers in the c10 dispatcher when kernhub loads it
// (LoadResult::kind LoadKind::torch_op, LoadResult::torch_op its name). op<Sig>
// looks the op up once and returns the dispatcher's typed handle; calling
// the handle is the dispatcher's own call, with no name lookup:
//
//   kernhub::Options options;
//   options.torch = kernhub::torch::this_torch();
//   kernhub::Client client(options);
//   client.load("activation");
//   auto silu = kernhub::torch::op<at::Tensor(const at::Tensor&)>(client, "activation");
//   at::Tensor y = silu.call(x);
//
// docs/kernels.md, "Torch kernels".
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/headeronly/version.h>
#if __has_include(<caffe2/core/macros.h>)
#include <caffe2/core/macros.h>  // CAFFE2_BUILD_STRINGS: the CUDA and ROCm torch was built with
#endif

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "kernhub/kernhub.hpp"

namespace kernhub::torch {

// The torch this program is compiled against, from its headers: the
// version (TORCH_VERSION_MAJOR/MINOR), the C++ ABI (_GLIBCXX_USE_CXX11_ABI)
// and the CUDA or ROCm version torch was built with (CUDA_VERSION and
// ROCM_VERSION of CAFFE2_BUILD_STRINGS, what torch.__config__.show()
// prints), which decide the backend as torch.version.cuda does in Python.
// For Options::torch. No error.
inline TorchInfo this_torch() {
    TorchInfo info;
    info.major = TORCH_VERSION_MAJOR;
    info.minor = TORCH_VERSION_MINOR;
#if defined(_GLIBCXX_USE_CXX11_ABI)
    info.cxx11_abi = _GLIBCXX_USE_CXX11_ABI != 0;
#endif
#if defined(CAFFE2_BUILD_STRINGS)
    static const std::pair<const char*, const char*> k_build[] = CAFFE2_BUILD_STRINGS;
    for (const auto& [key, value] : k_build) {
        if (std::string(key) == "CUDA_VERSION") info.cuda = value;
        if (std::string(key) == "ROCM_VERSION") info.hip = value;
    }
#endif
    info.source = "kernhub/torch.hpp";
    return info;
}

// The dispatcher's handle for the op named "namespace::op[.overload]".
// Error(not_found) naming the ops the dispatcher has in that namespace
// when it has no such op.
inline c10::OperatorHandle find_op(const std::string& qualified) {
    const std::size_t colons = qualified.rfind("::");
    const std::size_t dot = qualified.find('.', colons == std::string::npos ? 0 : colons + 2);
    const std::string name = dot == std::string::npos ? qualified : qualified.substr(0, dot);
    const std::string overload = dot == std::string::npos ? std::string() : qualified.substr(dot + 1);
    const std::optional<c10::OperatorHandle> handle =
        c10::Dispatcher::singleton().findSchema(c10::OperatorName(name, overload));
    if (handle) return *handle;
    // The ops of the namespace, sorted: "name" or "name.overload".
    const std::string prefix = qualified.substr(0, qualified.rfind("::") + 2);
    std::vector<std::string> found;
    for (const c10::OperatorName& each : c10::Dispatcher::singleton().getAllOpNames()) {
        if (each.name.rfind(prefix, 0) != 0) continue;
        std::string op = each.name.substr(prefix.size());
        if (!each.overload_name.empty()) op += "." + each.overload_name;
        found.push_back(std::move(op));
    }
    std::sort(found.begin(), found.end());
    std::string ops;
    for (const std::string& each : found) ops += (ops.empty() ? "" : ", ") + each;
    throw Error(ErrorCode::not_found, "the torch dispatcher has no op " + qualified +
                                          "; the ops of its namespace: " + (ops.empty() ? std::string("none") : ops));
}

// The dispatcher's typed handle for the op named "namespace::op[.overload]",
// Sig being the op's C++ signature (at::Tensor(const at::Tensor&) for
// "f(Tensor x) -> Tensor"). find_op()'s Error(not_found); Error(usage) when
// Sig is not the op's signature.
template <class Sig>
c10::TypedOperatorHandle<Sig> op(const std::string& qualified) {
    const c10::OperatorHandle handle = find_op(qualified);
    try {
        return handle.typed<Sig>();
    } catch (const c10::Error& e) {
        throw Error(ErrorCode::usage, "the signature asked for does not match torch op " + qualified + " (" +
                                          c10::toString(handle.schema()) + "): " + e.what_without_backtrace());
    }
}

// The op a load resolved (Client::load, Client::loaded). op()'s errors, and
// Error(usage) when `result` is not a torch op.
template <class Sig>
c10::TypedOperatorHandle<Sig> op(const LoadResult& result) {
    kernhub::expect_kind(result, LoadKind::torch_op);
    return op<Sig>(result.torch_op);
}

// op<Sig>(client.loaded(ref)); Client::loaded()'s Error(not_found) too.
template <class Sig>
c10::TypedOperatorHandle<Sig> op(const Client& client, const std::string& ref) {
    return op<Sig>(client.loaded(ref));
}

}  // namespace kernhub::torch
