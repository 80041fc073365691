// Sigstore signatures over any file (`kernhub verify-blob`): a bundle is
// verified offline against a trusted root and an identity policy
// (docs/ARCHITECTURE.md, "Signatures").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernhub/export.hpp"

namespace kernhub {

// Who may have signed: the OIDC issuer, the certificate identities (SAN URI
// or email, exact match of any), and optionally the source repository
// ("org/repo" for GitHub, or a full URI).
struct SignaturePolicy {
    std::string issuer;
    std::vector<std::string> identities;
    std::string repository;  // empty: not checked
};

struct BlobVerifyOptions {
    std::string file;    // the artifact
    std::string bundle;  // its Sigstore bundle (.sigstore / .sigstore.json)
    // A trusted_root.json; empty: KERNHUB_SIGSTORE_TRUSTED_ROOT, else the
    // built-in public-good root.
    std::string trusted_root;
    SignaturePolicy policy;
};

// What a successful verification established.
struct SignatureReport {
    std::string identity;       // the certificate identity that matched
    std::string issuer;         // the OIDC issuer in the certificate
    std::string repository;     // the source repository in the certificate, "" if none
    std::int64_t log_time = 0;  // the log's integrated time (Unix seconds)
    std::int64_t log_index = 0;
    std::string log_id;        // hex key id of the transparency log
    std::string trusted_root;  // which root verified it (a path, or "built-in")
};

// Verifies `options.bundle` over `options.file`. Throws Error: not_found
// (3) when the file, bundle or root is missing, usage (2) when no trusted
// root is given and none is built in, verification (4) naming the failed
// step ("sigstore: <step>: ...").
KERNHUB_API SignatureReport verify_blob(const BlobVerifyOptions& options);

}  // namespace kernhub
