// Sigstore signatures (docs/trust.md, "Signatures"): who may sign a kernel, what a
// verified signature established, and verifying any file against a bundle
// (the CLI's verify-blob). Bundles are verified offline against a trusted
// root and an identity policy.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernhub/export.hpp"

namespace kernhub {

// Who may have signed: the OIDC issuer of the signing certificate, its
// identity (the certificate's SAN URI or email, equal to one of
// `identities`), and optionally the source repository the certificate
// names ("org/repo" stands for https://github.com/org/repo; a full URI is
// compared as it is; empty: not checked). A registry entry's "signature".
struct SignaturePolicy {
    std::string issuer;
    std::vector<std::string> identities;
    std::string repository;
};

// What a verified signature established.
struct SignatureInfo {
    std::string identity;       // the certificate's SAN that the policy accepted
    std::string issuer;         // the OIDC issuer in the certificate
    std::string repository;     // the source repository URI in the certificate; may be empty
    std::int64_t log_time = 0;  // when the transparency log took the entry, Unix seconds
    std::int64_t log_index = 0;
};

struct BlobVerifyOptions {
    std::string file;    // the artifact
    std::string bundle;  // its Sigstore bundle (.sigstore / .sigstore.json)
    // A trusted_root.json; empty: KERNHUB_SIGSTORE_TRUSTED_ROOT, else the
    // public-good root built into kernhub.
    std::string trusted_root;
    SignaturePolicy policy;
};

// What verify_blob established, and against what.
struct SignatureReport {
    SignatureInfo signature;
    std::string log_id;        // hex key id of the transparency log
    std::string trusted_root;  // which root verified it (a path, or the built-in root's description)
    // Set when the root's newest key is older than kernhub trusts a root to
    // be current (docs/trust.md, "Signatures"): what to refresh, and how.
    std::string root_warning;
};

// Verifies `options.bundle` over `options.file`, offline. Throws Error:
// not_found (3) when the file, bundle or root is missing, usage (2) for a
// policy without an issuer or identities, verification (4) naming the
// failed step ("sigstore: <step>: ...").
KERNHUB_API SignatureReport verify_blob(const BlobVerifyOptions& options);

}  // namespace kernhub
