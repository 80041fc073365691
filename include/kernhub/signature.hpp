// Sigstore signatures (README, "Signatures"): who may sign a kernel, what a
// verified signature established, and verifying any file against a bundle
// (the CLI's verify-blob).
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

// Verifies `bundle_file` (a Sigstore bundle, media types v0.1 to v0.3) as
// a signature over `file` made by someone `policy` accepts. The trusted
// root is `trusted_root_file` when not empty, else the file
// KERNHUB_SIGSTORE_TRUSTED_ROOT names, else the public-good root built into
// kernhub. Offline: nothing is fetched. Throws Error(verification) naming
// the step that failed ("sigstore: <step>: ..."), Error(not_found) for a
// missing file, Error(usage) for an empty issuer or identity list.
KERNHUB_API SignatureInfo verify_blob(const std::string& file, const std::string& bundle_file,
                                      const SignaturePolicy& policy, const std::string& trusted_root_file = {});

}  // namespace kernhub
