// A throwaway Sigstore instance for tests: tests/support/sigstore_signer.py
// (run with KERNHUB_TEST_PYTHON, which has the `cryptography` package) makes
// a CA, a CT log key, a Rekor key and a trusted_root.json, and signs files
// into Sigstore bundles, optionally with one fault each (the script's
// docstring lists them and what each breaks). The keys are made per test and
// protect nothing.
//
// Tests that use it carry the tag [needs:sigstore-signer]: it is unmet when
// KERNHUB_TEST_PYTHON cannot import cryptography.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace kernhub::test {

// How `init` makes the instance.
struct SigstoreInitOptions {
    long shard_offset = 0;     // logIndex = tree index + this, as a sharded Rekor
    bool tsa = false;          // also a timestamp authority, listed in the root
    double backdate_days = 1;  // every key and CA is valid from this many days ago
};

// What `sign` puts into the leaf certificate, and how the bundle is made.
struct SigstoreSignOptions {
    std::string identity;                // SAN: a URI, or an email (has '@', no scheme)
    std::string issuer;                  // OIDC issuer (extensions .1.1 and .1.8)
    std::string repository;              // source repository URI (.1.12); empty: none
    std::vector<std::string> faults;     // e.g. "expired", "bad-set"; empty: a valid bundle
    std::string bundle_version = "0.3";  // "0.1", "0.2" or "0.3"
    bool timestamp = false;              // an RFC 3161 timestamp over the signature (see the script)
};

class SigstoreInstance {
public:
    // Runs `sigstore_signer.py init dir`. Throws std::runtime_error, with the
    // script's stderr, when it fails.
    explicit SigstoreInstance(std::filesystem::path dir, const SigstoreInitOptions& options = {});

    const std::filesystem::path& dir() const { return m_dir; }
    // DIR/trusted_root.json: the root that verifies this instance's bundles.
    std::filesystem::path trusted_root_path() const { return m_dir / "trusted_root.json"; }

    // Signs `artifact` into the bundle file `bundle_out`. Throws
    // std::runtime_error, with the script's stderr, when it fails.
    void sign(const std::filesystem::path& artifact, const std::filesystem::path& bundle_out,
              const SigstoreSignOptions& options) const;
    void sign(const std::filesystem::path& artifact, const std::filesystem::path& bundle_out,
              const std::string& identity, const std::string& issuer, const std::string& repository = "",
              const std::vector<std::string>& faults = {}, const std::string& bundle_version = "0.3") const;

private:
    std::filesystem::path m_dir;
};

// "" when KERNHUB_TEST_PYTHON can run sigstore_signer.py, else why not
// (the requirement behind [needs:sigstore-signer]).
std::string why_no_sigstore_signer();

}  // namespace kernhub::test
