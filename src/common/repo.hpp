// Repository identity shared by the registry, the hub client and the cache.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "kernhub/enums.hpp"

namespace kernhub {

// The lengths of a full git commit id: SHA-1 and SHA-256 object ids in hex.
inline constexpr std::size_t k_sha1_commit_length = 40;
inline constexpr std::size_t k_sha256_commit_length = 64;

// True for a full git commit id in lowercase hexadecimal: 40 characters
// (SHA-1) or 64 (SHA-256). Abbreviations are not commit ids.
bool is_commit_sha(const std::string& revision);

// N of a version branch "vN" (decimal digits after 'v', at most 18 of them,
// so that N fits); nullopt for any other name.
std::optional<std::uint64_t> version_number(const std::string& name);

// A version branch of any length ("v" and 1 to k_max_version_key_digits
// decimal digits, which a ref name's part holds) as a key that orders
// versions by N: its digits without leading zeros, compared shorter
// first, then as text (version_key_less). nullopt for any other name.
inline constexpr std::size_t k_max_version_key_digits = 254;
std::optional<std::string> version_key(const std::string& name);
bool version_key_less(const std::string& a, const std::string& b);

// Throws Error(usage) unless repo_id is "org/name" with safe characters
// ([A-Za-z0-9._-], no leading dot, no "..").
void validate_repo_id(const std::string& repo_id);

// Why a branch, tag or commit name is unusable (it reaches hub URLs and
// cache ref file names), or empty when it is fine. Follows git's ref-name
// rules, which also keep it from climbing out of a folder.
std::string revision_problem(const std::string& revision);

}  // namespace kernhub
