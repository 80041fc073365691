// The one JSON reader for documents from outside (lock files, registries,
// metadata.json, Sigstore bundles): one pass over the text, linear in it,
// that builds the document and stops at the first key seen twice in one
// object, the first container nested too deep or holding too many members,
// or a set cancel flag. nlohmann's own parser keeps the last of two equal
// keys without a word, and its callback parser rescans a parent object each
// time a child object closes, which is quadratic in the members.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kernhub::strict_json {

// A bound on the members (keys, or elements) of one object or array, with
// the names a message gives it.
struct MemberCap {
    std::size_t limit = 0;
    std::string limit_name;  // "k_max_lock_files"
    std::string what;        // what holds the members: "kernel \"k\", variant \"v\": \"files\""
};

// One open container on the way to a problem: whether it is an object, and
// the key its current member has ("" in an array or before the first key).
struct Step {
    bool object = false;
    std::string key;
};

// The default cap on a document's values: 2^21, about 100 MB of
// nlohmann's values at most, where the largest legitimate documents (a lock
// at k_max_lock_files, a listing of 100,000 files) hold under 1,000,000.
inline constexpr std::size_t k_max_json_values = 1u << 21;

struct Limits {
    std::size_t max_depth = 32;
    std::string depth_name;  // "k_max_lock_depth"
    // The cap of every container that cap_at gives none; no cap when its
    // limit is 0.
    MemberCap members;
    // The cap of the container reached through `path` (the open containers
    // above it, outermost first), asked once when the container opens. It
    // runs for every container: it must cost little, and build a cap's
    // words only for a container it caps.
    std::function<std::optional<MemberCap>(const std::vector<Step>& path)> cap_at;
    // Values (scalars, objects, arrays) in the whole document: a cap on what
    // it may cost in memory, as a small text of empty containers costs
    // thirty times its size.
    std::size_t max_values = k_max_json_values;
    // Checked every few hundred tokens.
    const std::atomic<bool>* cancel = nullptr;
};

struct Problem {
    enum class Kind { syntax, too_deep, too_many_members, too_many_values, duplicate_key, cancelled };
    Kind kind = Kind::syntax;
    // The containers open at the problem, outermost first; for a duplicate
    // key the last one's key is that key.
    std::vector<Step> path;
    MemberCap cap;         // too_many_members; too_deep: the depth bound
    std::size_t byte = 0;  // syntax: where the text stopped being JSON (1-based)
    std::string what;      // syntax: nlohmann's words
};

// NOLINTNEXTLINE(bugprone-exception-escape): the implicit move is nlohmann::json's, which is noexcept.
struct Parsed {
    nlohmann::json document;  // null when there is a problem
    std::optional<Problem> problem;
};

Parsed parse(std::string_view text, const Limits& limits);

// For readers that take a document or leave it: the document, or a
// discarded value (is_discarded()) on any problem, with k_max_json_depth
// nesting (64) and no member cap beyond what the text's own cap gives.
inline constexpr std::size_t k_max_json_depth = 64;
nlohmann::json parse_or_discard(std::string_view text);

// The problem in plain words, for the messages of callers that need no
// words of their own: "key 'x' appears twice in one object", "nested deeper
// than 32 levels (k_max_lock_depth)", "invalid JSON at line 3, column 7
// (byte 20): ...", "<what> has more than N members (<limit_name>)". A
// cancelled parse is the caller's to report.
std::string describe(const Problem& problem, std::string_view text);

// Where a syntax problem is and nlohmann's words for it, which already say
// what was expected: "at line 3, column 7 (byte 20): unexpected end of input".
std::string syntax_position(const Problem& problem, std::string_view text);

}  // namespace kernhub::strict_json
