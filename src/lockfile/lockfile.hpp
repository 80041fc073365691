// Lock files (docs/ci-images.md, "Locks and prewarming"): kernhub.lock,
// and the Python kernels library's kernels.lock in its current (0.17) and
// older (up to 0.16) formats. Parse, write and compare, pure; the one I/O
// here is read_lock_file, the bounded read every reader of a lock file uses.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/repo.hpp"
#include "digest/digest.hpp"
#include "kernhub/enums.hpp"

namespace kernhub::lockfile {

// Input bounds: a lock file is read whole, so it is capped, and so is the
// number of kernels, variants and files it may name.
inline constexpr std::size_t k_max_lock_bytes = 16u << 20;
inline constexpr std::size_t k_max_lock_kernels = 10000;
inline constexpr std::size_t k_max_lock_variants = 1000;  // per kernel
inline constexpr std::size_t k_max_lock_files = 100000;   // per variant

// A lock file's text; nullopt when it does not exist. Error(usage) naming
// k_max_lock_bytes when it is larger, Error(internal) when it cannot be read.
std::optional<std::string> read_lock_file(const std::filesystem::path& path);

struct LockedFile {
    std::uint64_t size = 0;
    std::string sha256;  // lowercase hex
};

// Who signed a variant, when a signature policy applied as it was locked
// (docs/trust.md, "Signatures"); prewarm then requires that same signer.
struct LockedSigner {
    std::string identity;
    std::string issuer;
};

struct LockedVariant {
    std::string hash;                         // "sha256-<hex>", git_lfs_concat
    std::map<std::string, LockedFile> files;  // relative to the variant directory
    std::optional<LockedSigner> signer;
};

struct LockedKernel {
    std::string repo_id;
    RepoType repo_type = RepoType::kernel;
    std::string revision;  // the branch, tag or "vN" that was resolved
    std::string commit;    // 40 or 64 lowercase hex (SHA-1 or SHA-256)
    std::string symbol;
    std::string file;  // may be empty
    std::map<std::string, LockedVariant> variants;
    // Targets (`lock --target`) the kernel has no build for at `commit`:
    // prewarm --target skips the kernel for them instead of failing.
    // Written as "missing_targets" only when not empty.
    std::set<std::string> missing_targets;
    // The lock's entries for the kernels its locked variants' metadata.json
    // names under "kernel-depends" (docs/registry.md, "Kernel dependencies"), each
    // called by its "ORG/REPO@REVISION". Written as "kernel_depends" only
    // when not empty; every name must be an entry of the same lock.
    std::set<std::string> kernel_depends;
};

// kernhub.lock: {"format": 1, "kernels": {NAME: {...}}}.
struct KernhubLock {
    std::map<std::string, LockedKernel> kernels;
};

// The canonical bytes: sorted keys, two-space indent, trailing newline.
std::string write_kernhub_lock(const KernhubLock& lock);

// One entry of the Python kernels library's kernels.lock.
struct KernelsLockEntry {
    std::string repo_id;
    // Current format: "vN" for {"version": N}, else the "revision"; the
    // older format has neither (empty).
    std::string revision;
    std::string commit;
    // Older format only: variant -> "sha256-<hex>" (git_lfs_concat).
    std::map<std::string, std::string> variant_hashes;
};

// kernhub.lock, or kernels.lock of kernels >= 0.17 or <= 0.16; the public
// enum (kernhub/enums.hpp), whose to_string names it.
using Format = LockFormat;

struct AnyLock {
    Format format = Format::kernhub_lock;
    KernhubLock kernhub;                    // Format::kernhub_lock
    std::vector<KernelsLockEntry> kernels;  // the kernels.lock formats
};

// Detects the format from the document's shape and parses it strictly:
// unknown fields, duplicate keys, wrong types, a commit that is not 40 or
// 64 lowercase hex (a full SHA-1 or SHA-256 id), an unsafe repo id, revision, variant name or file path, or
// a document over the k_max_* limits are Error(usage) naming `source`, the
// entry and the field (and the limit by name). The limits are checked as
// the text is read, and *cancel (when given) too: Error(interrupted).
AnyLock parse_lock(const std::string& text, const std::string& source, const std::atomic<bool>* cancel = nullptr);

// The Python kernels library's variant hash ("git_lfs_concat"): SHA-256
// over the variant's files sorted by their path relative to the variant
// directory (byte order); for each file its path bytes, then the raw bytes
// of its hub hash (the LFS SHA-256 for LFS files, else the git blob SHA-1).
// Returns "sha256-<hex>".
std::string variant_hash(std::vector<std::pair<std::string, digest::Bytes>> files);

// A line diff from `before` to `after` in unified style ("--- a", "+++ b",
// then " ", "-" and "+" lines with a little context); empty when equal.
std::string line_diff(const std::string& before, const std::string& after, const std::string& before_label,
                      const std::string& after_label);

}  // namespace kernhub::lockfile
