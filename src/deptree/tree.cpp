#include "deptree/tree.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "common/join.hpp"
#include "kernhub/error.hpp"

namespace kernhub::deptree {

namespace {

class Walker {
public:
    explicit Walker(const Expand& expand) : m_expand(expand) {}

    void visit(const KernelDependency& node, const std::vector<KernelDependency>& depends) {
        m_chain.push_back(node.label());
        if (m_chain.size() > k_max_dependency_depth) {
            throw Error(ErrorCode::verification,
                        "kernel dependencies nest deeper than k_max_dependency_depth (" +
                            std::to_string(k_max_dependency_depth) + "): " + join(m_chain, " -> ") +
                            "; the publishers of these kernels must flatten their kernel-depends");
        }
        for (const KernelDependency& dep : depends) {
            const std::string label = dep.label();
            if (std::find(m_chain.begin(), m_chain.end(), label) != m_chain.end()) {
                throw Error(ErrorCode::verification, "kernel dependencies form a cycle: " + join(m_chain, " -> ") +
                                                         " -> " + label +
                                                         "; the publishers of these kernels must fix their "
                                                         "kernel-depends");
            }
            if (m_done.count(label) != 0) continue;
            if (m_order.size() >= k_max_dependency_kernels) {
                throw Error(ErrorCode::verification,
                            "the kernel dependency tree of " + m_chain.front() +
                                " has more than k_max_dependency_kernels (" + std::to_string(k_max_dependency_kernels) +
                                ") kernels, reached through " + join(m_chain, " -> ") + " -> " + label);
            }
            visit(dep, m_expand(dep));
            m_done.insert(label);
            m_order.push_back(dep);
        }
        m_chain.pop_back();
    }

    std::vector<KernelDependency> take() { return std::move(m_order); }

private:
    const Expand& m_expand;
    std::vector<std::string> m_chain;
    std::set<std::string> m_done;
    std::vector<KernelDependency> m_order;
};

}  // namespace

std::vector<KernelDependency> walk(const KernelDependency& top, const std::vector<KernelDependency>& top_depends,
                                   const Expand& expand) {
    Walker walker(expand);
    walker.visit(top, top_depends);
    return walker.take();
}

}  // namespace kernhub::deptree
