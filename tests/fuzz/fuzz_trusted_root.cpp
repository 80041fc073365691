// Sigstore trusted roots (trusted_root.json): parse_trusted_root on hostile
// bytes. A root that parses has a newest key time; a refusal is
// Error(verification) at step trusted-root.
#include <cstdlib>

#include "fuzz_target.hpp"
#include "sigstore/sigstore.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string text = fuzz::as_text(data, size);
    try {
        auto root = kernhub::sigstore::parse_trusted_root(text, "fuzz root");
        if (kernhub::sigstore::newest_key_start(*root) == INT64_MIN) std::abort();
    } catch (const kernhub::Error& e) {
        if (e.code() != kernhub::ErrorCode::verification || e.message().rfind("sigstore: trusted-root: ", 0) != 0) {
            std::abort();
        }
    }
    return 0;
}
