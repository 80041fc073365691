// A reference to a kernel as a user writes it, resolved against a registry
// stack (docs/ARCHITECTURE.md, "Pipeline", step 1).
#pragma once

#include <optional>
#include <string>

#include "registry/registry.hpp"

namespace kernhub::registry {

// "NAME[@REV]" from the registry, or "ORG/REPO[@REV]" directly (its symbol,
// file and repo type from the entries naming the repo, field by field, when
// they agree). Error(usage) for an empty or invalid revision or repo id,
// Error(not_found) for an unknown name.
KernelSpec resolve_ref(const Registry& registry, const std::string& ref);

// Whether an entry of the registry names `repo_id` (ASCII case ignored, as
// the hub ignores it in repo ids): such a repo is the user's explicit choice
// (KernelSpec::registry_named).
bool names_repo(const Registry& registry, const std::string& repo_id);

// Whether two policies ask for the same issuer, identities (in any order)
// and source repository.
bool same_policy(const SignaturePolicy& a, const SignaturePolicy& b);

// The policy of the registry entries naming `repo_id` (ASCII case ignored)
// or called `name`; nullopt when none has one. Error(verification) when
// they disagree.
std::optional<SignaturePolicy> registry_policy(const Registry& registry, const std::string& repo_id,
                                               const std::string& name);

}  // namespace kernhub::registry
