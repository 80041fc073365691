// Sigstore bundles: sigstore::verify_bundle on hostile bytes against a small
// trusted root made for this target (a self-signed P-256 CA and log key
// generated for kernhub's fuzzing; it signs nothing, so no input verifies).
// Every refusal must be Error(verification) naming a step.
#include <cstdlib>
#include <cstring>

#include "fuzz_target.hpp"
#include "sigstore/sigstore.hpp"

namespace {

const char* const k_root =
    R"json({"mediaType":"application/vnd.dev.sigstore.trustedroot+json;version=0.1","tlogs":[{"baseUrl":"https://rekor.example","hashAlgorithm":"SHA2_256","publicKey":{"rawBytes":"MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEUZqroYojS+JapugiRsm/AW5kna4qL01KLpyD/I3qVeHGOISPjGg9+HJKdoZGSgaGiZUGpDaXVYer+xjuJXcBtw==","keyDetails":"PKIX_ECDSA_P256_SHA_256","validFor":{"start":"2024-01-01T00:00:00Z"}},"logId":{"keyId":"F7JLqlo+FTV7YGHYIQkobgrwXyRH9zL1qQ8jr32PIwI="}}],"certificateAuthorities":[{"subject":{"organization":"kernhub-fuzz","commonName":"fuzz-ca"},"uri":"https://fulcio.example","certChain":{"certificates":[{"rawBytes":"MIIBlDCCATqgAwIBAgIBATAKBggqhkjOPQQDAjApMRUwEwYDVQQKDAxrZXJuaHViLWZ1enoxEDAOBgNVBAMMB2Z1enotY2EwHhcNMjYxMjAxMTM0NTE3WhcNMzYxMTI4MTM0NTE3WjApMRUwEwYDVQQKDAxrZXJuaHViLWZ1enoxEDAOBgNVBAMMB2Z1enotY2EwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAARRmquhiiNL4lqm6CJGyb8BbmSdriovTUounIP8jepV4cY4hI+MaD34ckp2hkZKBoaJlQakNpdVh6v7GO4ldwG3o1MwUTAdBgNVHQ4EFgQUENQaW36slkMuTbrbuPEdHRsdpBEwHwYDVR0jBBgwFoAUENQaW36slkMuTbrbuPEdHRsdpBEwDwYDVR0TAQH/BAUwAwEB/zAKBggqhkjOPQQDAgNIADBFAiBDtzQEo/ccuNSPTceYkywyH8lALr3D30mYtv6O3LuiyAIhAJ4GTcXwyPllWVU8/uODKUI+fnnpfThDXekgY9hP5BHx"}]},"validFor":{"start":"2024-01-01T00:00:00Z","end":"2034-01-01T00:00:00.5Z"}}],"ctlogs":[{"baseUrl":"https://ct.example","hashAlgorithm":"SHA2_256","publicKey":{"rawBytes":"MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEUZqroYojS+JapugiRsm/AW5kna4qL01KLpyD/I3qVeHGOISPjGg9+HJKdoZGSgaGiZUGpDaXVYer+xjuJXcBtw==","keyDetails":"PKIX_ECDSA_P256_SHA_256","validFor":{"start":"2024-01-01T00:00:00+00:00"}},"logId":{"keyId":"F7JLqlo+FTV7YGHYIQkobgrwXyRH9zL1qQ8jr32PIwI="}}],"timestampAuthorities":[]})json";

const kernhub::sigstore::TrustedRoot& root() {
    static const auto parsed = kernhub::sigstore::parse_trusted_root(k_root, "the fuzz root");
    return *parsed;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string text = fuzz::as_text(data, size);
    const kernhub::sigstore::ArtifactDigest artifact{std::vector<std::uint8_t>(32, 0)};
    const kernhub::sigstore::Policy policy{"https://issuer.example", {"someone@example.com"}, "org/repo"};
    try {
        kernhub::sigstore::verify_bundle(text, artifact, root(), policy);
        std::abort();  // nothing can verify against a root that signed nothing
    } catch (const kernhub::Error& e) {
        if (e.code() != kernhub::ErrorCode::verification || e.message().rfind("sigstore: ", 0) != 0) std::abort();
    }
    return 0;
}
