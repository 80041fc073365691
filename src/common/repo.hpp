// Repository identity shared by the registry, the hub client and the cache.
#pragma once

#include <string>

namespace kernhub {

enum class RepoType { kernel, model };

inline const char* to_string(RepoType type) {
    return type == RepoType::kernel ? "kernel" : "model";
}

// True for a 40-character lowercase hexadecimal git commit id.
bool is_commit_sha(const std::string& revision);

// Throws Error(usage) unless repo_id is "org/name" with safe characters
// ([A-Za-z0-9._-], no leading dot, no "..").
void validate_repo_id(const std::string& repo_id);

}  // namespace kernhub
