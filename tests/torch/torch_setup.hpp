// What the torch tests share: a Client on the torch hub with an explicit
// target and float32 CPU tensors from values. Include it before anything
// that includes Catch (see CHECK below).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include "kernhub/torch.hpp"

// c10's logging header defines a glog-style CHECK that aborts the process
// on failure; in the tests CHECK is Catch's, so torch's headers come first.
#undef CHECK
#include <catch2/catch.hpp>

#include <functional>
#include <string>
#include <vector>

#include "kernhub/kernhub.hpp"
#include "support/temp_dir.hpp"
#include "torch/torch_hub.hpp"

namespace kernhub::test::torch_hub {

// A Client on the torch hub, its own cache, variants chosen by target.
struct Setup {
    TempDir dir;
    TorchHub hub;
    fs::path registry = write_registry(dir.path());

    kernhub::Options options(const std::string& target, bool verify_on_load = false) const {
        kernhub::Options o;
        o.endpoint = const_cast<TorchHub&>(hub).server().endpoint();
        o.cache_dir = (dir.path() / "cache").string();
        o.registries = {registry.string()};
        o.no_default_registry = true;
        o.targets = {target};
        o.verify_on_load = verify_on_load;
        o.retries = 0;
        return o;
    }
};

inline at::Tensor tensor(const std::vector<float>& values) {
    at::Tensor t = at::empty({static_cast<std::int64_t>(values.size())}, at::kFloat);
    std::copy(values.begin(), values.end(), t.data_ptr<float>());
    return t;
}

inline std::vector<float> values(const at::Tensor& t) {
    const float* data = t.data_ptr<float>();
    return std::vector<float>(data, data + t.numel());
}

inline kernhub::Error error_of(const std::function<void()>& call) {
    try {
        call();
    } catch (const kernhub::Error& e) {
        return e;
    }
    FAIL("no kernhub::Error was thrown");
    return kernhub::Error(ErrorCode::ok, "");
}

inline bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

}  // namespace kernhub::test::torch_hub
