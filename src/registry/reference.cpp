// Resolving a reference: "NAME[@REV]" through the stacked registry, or
// "ORG/REPO[@REV]" directly with the fields the registry's entries for that
// repo agree on; and the signature policy those entries set for a repo.
#include <algorithm>

#include "common/hint.hpp"
#include "common/repo.hpp"
#include "common/text.hpp"
#include "kernhub/error.hpp"
#include "registry/reference.hpp"

namespace kernhub::registry {

bool same_policy(const SignaturePolicy& a, const SignaturePolicy& b) {
    std::vector<std::string> left = a.identities;
    std::vector<std::string> right = b.identities;
    std::sort(left.begin(), left.end());
    std::sort(right.begin(), right.end());
    return a.issuer == b.issuer && left == right && a.repository == b.repository;
}

std::optional<SignaturePolicy> registry_policy(const Registry& registry, const std::string& repo_id,
                                               const std::string& name) {
    // The hub compares repo ids ignoring case, so "Org/Repo" must not
    // escape a policy written for "org/repo".
    const std::string wanted = ascii_lowercase(repo_id);
    std::optional<SignaturePolicy> policy;
    for (const auto& entry : registry.entries()) {
        if (!entry.signature || (ascii_lowercase(entry.repo_id) != wanted && entry.name != name)) continue;
        if (policy && !same_policy(*policy, *entry.signature)) {
            throw Error(ErrorCode::verification,
                        "registry entries for " + repo_id + " carry different \"signature\" policies (" + entry.name +
                            " from " + entry.source +
                            " is one); use the kernel by its registry name, or make the policies agree");
        }
        policy = entry.signature;
    }
    return policy;
}

bool names_repo(const Registry& registry, const std::string& repo_id) {
    const std::vector<KernelSpec> all = registry.entries();
    const std::string key = ascii_lowercase(repo_id);
    return std::any_of(all.begin(), all.end(),
                       [&](const KernelSpec& entry) { return ascii_lowercase(entry.repo_id) == key; });
}

KernelSpec resolve_ref(const Registry& registry, const std::string& ref) {
    auto at = ref.find('@');
    std::string base = ref.substr(0, at);
    std::string revision = at == std::string::npos ? std::string() : ref.substr(at + 1);
    if (at != std::string::npos && revision.empty()) {
        throw Error(ErrorCode::usage, quoted_name(ref) + " has an empty revision after '@'");
    }
    if (!revision.empty()) {
        if (std::string problem = revision_problem(revision); !problem.empty()) {
            throw Error(ErrorCode::usage,
                        "revision " + quoted_name(revision) + " in " + quoted_name(ref) + " " + problem);
        }
    }
    KernelSpec spec;
    if (base.find('/') != std::string::npos) {
        validate_repo_id(base);
        spec.name = base;
        spec.repo_id = base;
        spec.revision = revision.empty() ? "main" : revision;
        spec.source = "command line";
        // The registry still knows how to use the repo: each of its symbol,
        // file, op and repo type is taken from the entries naming it when they
        // all agree on that field.
        std::vector<KernelSpec> naming;
        for (auto& entry : registry.entries()) {
            if (entry.repo_id == base) naming.push_back(std::move(entry));
        }
        const auto agreed = [&naming](auto field) {
            return !naming.empty() && std::all_of(naming.begin(), naming.end(), [&](const KernelSpec& e) {
                return field(e) == field(naming.front());
            });
        };
        if (agreed([](const KernelSpec& e) { return e.symbol; })) spec.symbol = naming.front().symbol;
        if (agreed([](const KernelSpec& e) { return e.file; })) spec.file = naming.front().file;
        if (agreed([](const KernelSpec& e) { return e.op; })) spec.op = naming.front().op;
        if (agreed([](const KernelSpec& e) { return e.repo_type; })) spec.repo_type = naming.front().repo_type;
        spec.signature = registry_policy(registry, base, {});
        spec.registry_named = names_repo(registry, base);
        return spec;
    }
    const KernelSpec* found = registry.find(base);
    if (found == nullptr) {
        throw Error(ErrorCode::not_found,
                    "unknown kernel " + quoted_name(base) +
                        "; give ORG/REPO[@REVISION], or one of the names the registries define",
                    hint::action("list"));
    }
    spec = *found;
    if (!revision.empty()) {
        spec.revision = revision;
        spec.version.reset();
    }
    // An entry without a policy of its own still gets the one other entries
    // set for its repo: naming a pinned repo again must not unpin it.
    if (!spec.signature) spec.signature = registry_policy(registry, spec.repo_id, {});
    return spec;
}

}  // namespace kernhub::registry
