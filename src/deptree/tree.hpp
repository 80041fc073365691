// A kernel's dependency tree (docs/registry.md, "Kernel dependencies"):
// the walk over "kernel-depends", with the cycle check and the bounds. Pure:
// the caller's expand() fetches a kernel and says what it depends on.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "deptree/metadata.hpp"

namespace kernhub::deptree {

// Bounds on one tree: kernels in a chain from the top one (the top one
// counts), and distinct kernels besides the top one.
inline constexpr std::size_t k_max_dependency_depth = 16;
inline constexpr std::size_t k_max_dependency_kernels = 256;

// What `node` depends on; called once per distinct kernel (by label()).
using Expand = std::function<std::vector<KernelDependency>(const KernelDependency& node)>;

// The dependencies of `top` (whose own list is `top_depends`), each once,
// in load order: every kernel after the kernels it depends on. A kernel
// that depends on one of the kernels it is reached from (a cycle), a chain
// longer than k_max_dependency_depth or more than k_max_dependency_kernels
// kernels is Error(verification) naming the chain ("a@v1 -> b@v1 -> a@v1"):
// the hub's metadata is at fault.
std::vector<KernelDependency> walk(const KernelDependency& top, const std::vector<KernelDependency>& top_depends,
                                   const Expand& expand);

}  // namespace kernhub::deptree
