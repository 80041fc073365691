#include "common/repo.hpp"

#include "kernhub/error.hpp"

namespace kernhub {

bool is_commit_sha(const std::string& revision) {
    if (revision.size() != 40) return false;
    for (char c : revision) {
        bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
        if (!hex) return false;
    }
    return true;
}

static bool valid_part(const std::string& part) {
    if (part.empty() || part.size() > 96 || part[0] == '.' || part[0] == '-') return false;
    if (part.find("..") != std::string::npos) return false;
    for (char c : part) {
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
                  c == '-';
        if (!ok) return false;
    }
    return true;
}

void validate_repo_id(const std::string& repo_id) {
    auto slash = repo_id.find('/');
    if (slash == std::string::npos || repo_id.find('/', slash + 1) != std::string::npos ||
        !valid_part(repo_id.substr(0, slash)) || !valid_part(repo_id.substr(slash + 1))) {
        throw Error(ErrorCode::usage,
                    "invalid repo id '" + repo_id + "': expected ORG/NAME using letters, digits, '.', '_' or '-'");
    }
}

}  // namespace kernhub
