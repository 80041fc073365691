#include "common/repo.hpp"

#include <algorithm>
#include <cctype>
#include <string_view>

#include "common/text.hpp"
#include "kernhub/error.hpp"

namespace kernhub {

bool is_commit_sha(const std::string& revision) {
    // SHA-1 (40) or SHA-256 (64) object ids, as kernels' Oid takes them;
    // an abbreviation names no commit for good.
    if (revision.size() != k_sha1_commit_length && revision.size() != k_sha256_commit_length) return false;
    for (char c : revision) {
        bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
        if (!hex) return false;
    }
    return true;
}

std::optional<std::uint64_t> version_number(const std::string& name) {
    constexpr std::size_t k_max_version_digits = 18;
    if (name.size() < 2 || name.size() > k_max_version_digits + 1 || name[0] != 'v' ||
        name.find_first_not_of("0123456789", 1) != std::string::npos) {
        return std::nullopt;
    }
    return std::stoull(name.substr(1));
}

std::optional<std::string> version_key(const std::string& name) {
    if (name.size() < 2 || name.size() > k_max_version_key_digits + 1 || name[0] != 'v' ||
        name.find_first_not_of("0123456789", 1) != std::string::npos) {
        return std::nullopt;
    }
    const std::size_t first = name.find_first_not_of('0', 1);
    return first == std::string::npos ? std::string("0") : name.substr(first);
}

bool version_key_less(const std::string& a, const std::string& b) {
    return a.size() != b.size() ? a.size() < b.size() : a < b;
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
        throw Error(ErrorCode::usage, "invalid repo id " + quoted_name(repo_id) +
                                          ": expected ORG/NAME using letters, digits, '.', '_' or '-'");
    }
}

// A revision ends up in hub URLs and in cache ref file names, so refuse what
// git refuses in ref names, which also rules out climbing out of a folder.
std::string revision_problem(const std::string& revision) {
    if (revision.empty()) return "is empty";
    // A revision becomes refs/<revision> in the cache, which the cache
    // commands walk at most k_max_cache_depth folders deep.
    constexpr std::size_t k_max_revision_bytes = 1024;
    constexpr std::size_t k_max_revision_parts = 16;
    if (revision.size() > k_max_revision_bytes) {
        return "is longer than " + std::to_string(k_max_revision_bytes) +
               " bytes (k_max_revision_bytes); use a branch, tag or commit id";
    }
    if (static_cast<std::size_t>(std::count(revision.begin(), revision.end(), '/')) >= k_max_revision_parts) {
        return "has more than " + std::to_string(k_max_revision_parts) +
               " parts (k_max_revision_parts); use a branch, tag or commit id";
    }
    const auto bad = [](char c) {
        return (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) ||
               std::string_view("~^:?*[\\").find(c) != std::string_view::npos;
    };
    if (std::any_of(revision.begin(), revision.end(), bad))
        return "contains a space, control character or one of ~^:?*[\\; use a branch, tag or "
               "commit id as git spells it";
    if (revision.find("..") != std::string::npos || revision.find("//") != std::string::npos ||
        revision.front() == '/' || revision.back() == '/' || revision.front() == '-')
        return "is not a valid git ref (no '..', '//', leading '-' or leading/trailing '/'); use a "
               "branch, tag or commit id as git spells it";
    // git's remaining rules: no component is empty (checked above), starts
    // with '.' or ends with ".lock"; the ref does not end with '.', holds no
    // "@{" and is not "@". "." and "a/./b" would otherwise pass and fail
    // only when the ref file is written, after the download.
    for (std::size_t start = 0; start <= revision.size();) {
        std::size_t end = revision.find('/', start);
        if (end == std::string::npos) end = revision.size();
        const std::string_view part(revision.data() + start, end - start);
        // A part is a file or folder name under refs/: the file system's
        // limit is git's too.
        if (part.size() > 255) {
            return "has a part longer than 255 bytes, which no ref file can be named; use a branch, tag or commit "
                   "id as git spells it";
        }
        if ((!part.empty() && part.front() == '.') ||
            (part.size() >= 5 && part.compare(part.size() - 5, 5, ".lock") == 0)) {
            return "is not a valid git ref (a part starts with '.' or ends with \".lock\"); use a branch, tag or "
                   "commit id as git spells it";
        }
        start = end + 1;
    }
    if (revision.back() == '.' || revision.find("@{") != std::string::npos || revision == "@") {
        return "is not a valid git ref (it ends with '.', holds \"@{\" or is \"@\"); use a branch, tag or commit "
               "id as git spells it";
    }
    const bool all_hex = std::all_of(revision.begin(), revision.end(),
                                     [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; });
    const bool commit_length = revision.size() == k_sha1_commit_length || revision.size() == k_sha256_commit_length;
    if (commit_length && all_hex && !is_commit_sha(revision))
        return "looks like a commit id with uppercase letters; write commit ids in lowercase";
    return {};
}

}  // namespace kernhub
