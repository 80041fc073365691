// Sigstore bundle verification, offline (docs/trust.md, "How signatures are verified"):
// a bundle (media types v0.1, v0.2, v0.3; message signatures) over an
// artifact is checked against a trusted root (Sigstore's trusted_root.json)
// and an identity policy. The sigstore module owns certificate, SCT and
// transparency-log checks; it binds libcrypto at run time like the digest
// module (common/dynlib.hpp), so nothing that verifies no signature maps it.
//
// Error policy: every failure is Error(verification) whose message starts
// with "sigstore: <step>: " where <step> is one of the names in
// k_step_names below, then names the object and what to do. A document that
// is not JSON of the expected shape is the `bundle` or `trusted-root` step.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kernhub::sigstore {

// The verification steps, in the order they run; each failure names one.
//   bundle            the bundle JSON: media type, shape, sizes, DSSE refused
//   trusted-root      the trusted_root.json: shape, keys, validity windows
//   certificate-chain the leaf chains to a Fulcio CA of the root valid at the log time
//   certificate-validity  the leaf was valid at the log's integrated time
//   sct               the embedded SCT verifies against a CT log key of the root
//   tlog-entry        the log entry's SET verifies with the root's Rekor key
//   inclusion-proof   the inclusion proof hashes to the checkpoint's root
//   checkpoint        the checkpoint is signed by the log
//   tlog-body         the entry's body matches the signature, digest and certificate
//   timestamp         RFC 3161 timestamps (refused or verified against the TSAs)
//   signature         the artifact's signature verifies with the leaf's key
//   artifact-digest   the artifact's digest equals the bundle's messageDigest
//   issuer / identity / repository   the identity policy
inline constexpr const char* k_step_names[] = {"bundle",    "trusted-root", "certificate-chain", "certificate-validity",
                                               "sct",       "tlog-entry",   "inclusion-proof",   "checkpoint",
                                               "tlog-body", "timestamp",    "signature",         "artifact-digest",
                                               "issuer",    "identity",     "repository"};

// Caps on the documents read (each names itself in its error).
inline constexpr std::size_t k_max_bundle_bytes = 1u << 20;        // 1 MiB
inline constexpr std::size_t k_max_trusted_root_bytes = 4u << 20;  // 4 MiB

class TrustedRoot;  // parsed trusted_root.json; immutable, shareable across threads

// Parses a trusted_root.json (media type
// application/vnd.dev.sigstore.trustedroot+json;version=0.1). `origin` names
// the document in errors (a path, or "the built-in public-good root").
// Throws Error(verification) at step `trusted-root`.
std::shared_ptr<const TrustedRoot> parse_trusted_root(std::string_view json, const std::string& origin);

// Reads and parses the trusted_root.json at `path` (a regular file of at
// most k_max_trusted_root_bytes). Error(not_found) when it is missing;
// otherwise as parse_trusted_root.
std::shared_ptr<const TrustedRoot> load_trusted_root(const std::filesystem::path& path);

// The bytes of the bundle file at `path` (a regular file of at most
// k_max_bundle_bytes, else Error(verification) at step `bundle`).
// Error(not_found) when it is missing.
std::string read_bundle(const std::filesystem::path& path);

// The newest validFor.start among the root's log keys and CAs (Unix
// seconds; timestamp authorities, unused by kernhub, left out), for the
// staleness warning.
std::int64_t newest_key_start(const TrustedRoot& root);

// Who may have signed: an OIDC issuer (certificate extension
// 1.3.6.1.4.1.57264.1.8, or the legacy .1.1), the SAN identity (URI or
// email; exact match against any of `identities`), and optionally the
// source repository (extension .1.12): "org/repo" matches
// "https://github.com/org/repo"; a full URI matches exactly.
struct Policy {
    std::string issuer;
    std::vector<std::string> identities;
    std::string repository;  // empty: not checked
};

// What a successful verification established.
struct Verified {
    std::string identity;       // the SAN that matched
    std::string issuer;         // the OIDC issuer in the certificate
    std::string repository;     // extension .1.12, empty when absent
    std::int64_t log_time = 0;  // the tlog entry's integratedTime (Unix seconds)
    std::int64_t log_index = 0;
    std::string log_id;  // hex key id of the log that holds the entry
};

// The artifact a bundle signs, given as its SHA-256 (32 raw bytes), so a
// large file is hashed while streaming and never held in memory.
struct ArtifactDigest {
    std::vector<std::uint8_t> sha256;
};

// Runs every step on `bundle_json` (at most k_max_bundle_bytes) for the
// artifact whose SHA-256 is `artifact`, against `root` and `policy`.
// Returns what it established, or throws Error(verification) naming the
// failed step. Thread-safe.
Verified verify_bundle(std::string_view bundle_json, const ArtifactDigest& artifact, const TrustedRoot& root,
                       const Policy& policy);

}  // namespace kernhub::sigstore

namespace kernhub::sigstore {

// A trusted root ready to use, with what the variant record and messages
// need to know about it.
struct RootDocument {
    std::shared_ptr<const TrustedRoot> root;
    std::string sha256;  // hex, of the document's bytes
    std::string origin;  // a path, or the built-in root's description
    std::int64_t newest_key_start = 0;
};

// The public-good root compiled in at build time (cmake/sigstore_root.cmake:
// the production trusted_root.json of the pinned `sigstore` wheel from
// PyPI), parsed once.
const RootDocument& built_in_root();

// A trusted_root.json file: a regular file of at most
// k_max_trusted_root_bytes. Error(not_found) when it does not exist,
// Error(verification) at step `trusted-root` when it is not one.
RootDocument read_root(const std::filesystem::path& path);

// A root whose newest key started longer ago than this may miss a key
// Sigstore has rotated in since; kernhub then warns (docs/trust.md, "Signatures").
inline constexpr std::int64_t k_root_stale_after_days = 548;  // about 18 months

// The warning to show for `root` at `now` (Unix seconds), or empty.
std::string staleness_warning(const RootDocument& root, std::int64_t now);

}  // namespace kernhub::sigstore
