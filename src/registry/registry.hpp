// Kernel registries: JSON files mapping backend names to where a kernel lives
// (docs/registry.md, "Registry files"). Registries stack; a later file wins per name.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/repo.hpp"
#include "kernhub/signature.hpp"

namespace kernhub::registry {

struct KernelSpec {
    std::string name;
    std::string repo_id;
    RepoType repo_type = RepoType::kernel;
    std::string revision;        // empty when version is set
    std::optional<int> version;  // N means branch "vN"
    std::string symbol;
    std::string file;    // optional artifact name inside the variant directory
    std::string op;      // torch ops: the op in the library's namespace ("name" or "name.overload")
    std::string source;  // the registry file (or label) that defined this entry
    // "signature": who must have signed the variant (docs/trust.md, "Signatures").
    std::optional<SignaturePolicy> signature;
    // False for an ORG/REPO reference to a repo no registry entry names:
    // the trusted-publisher check applies to it (docs/trust.md, "Trusted
    // publishers"). A registry entry, or a lock's pin, is the user's choice.
    bool registry_named = true;

    // "vN" for a version, else the revision.
    std::string effective_revision() const;
};

class Registry {
public:
    // Parses one registry document and stacks it on top of what is loaded.
    // `source` names the file in error messages. Throws Error(usage) naming
    // the source, the entry and the field for malformed JSON, a wrong
    // "format", unknown or missing fields, wrong types, both or neither of
    // revision/version, a negative version, an invalid repo_id or repo_type,
    // a "signature" policy without an issuer or identities.
    void add_json(const std::string& text, const std::string& source);
    // Reads and stacks a file; Error(usage) when it cannot be read.
    void add_file(const std::filesystem::path& path);

    const KernelSpec* find(const std::string& name) const;
    // All entries sorted by name.
    std::vector<KernelSpec> entries() const;

private:
    std::map<std::string, KernelSpec> m_entries;
};

// Where the stack comes from, in order: the installed default,
// the project's kernhub.json, KERNHUB_REGISTRY (colon-separated), then the
// explicit --registry files. Missing default or project files are skipped;
// a missing file named explicitly (env or flag) is Error(usage).
struct StackSources {
    std::optional<std::filesystem::path> default_file;
    std::optional<std::filesystem::path> project_file;
    std::string env_value;  // the raw KERNHUB_REGISTRY value, may be empty
    std::vector<std::filesystem::path> explicit_files;
};
Registry load_stack(const StackSources& sources);

}  // namespace kernhub::registry
