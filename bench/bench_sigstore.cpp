// What verifying one Sigstore signature costs, next to the one operation it
// cannot avoid: a bare ECDSA P-256 verification of the same signature with
// OpenSSL (the leaf's key over the artifact's digest).
//
//   BM_Sigstore_BareEcdsaVerify   EVP_PKEY_verify of messageSignature with the
//                                 leaf certificate's key (parsed outside the
//                                 timing): the baseline
//   BM_Sigstore_VerifyBundle      sigstore::verify_bundle of the production
//                                 GitHub Actions bundle against the production
//                                 root (parsed once): bundle JSON, chain to the
//                                 Fulcio CA, SCT, SET, inclusion proof,
//                                 checkpoint, body, signature, identity policy
//   BM_Sigstore_ParseTrustedRoot  sigstore::parse_trusted_root of the
//                                 production trusted_root.json
//
// The vectors are the real ones committed in tests/sigstore/vectors/, and the
// root is the one kernhub builds in (src/sigstore/root/).
#include <openssl/evp.h>
#include <openssl/x509.h>

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "bench_common.hpp"
#include "digest/digest.hpp"
#include "sigstore/sigstore.hpp"

namespace {

namespace fs = std::filesystem;

fs::path vectors() {
    return fs::path(KERNHUB_BENCH_SOURCE_DIR) / "tests" / "sigstore" / "vectors";
}

std::string read(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("missing Sigstore vector " + path.string());
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

struct Vectors {
    std::string bundle = read(vectors() / "bundle_v3_github.whl.sigstore");
    std::string root_text =
        read(fs::path(KERNHUB_BENCH_SOURCE_DIR) / "src" / "sigstore" / "root" / "trusted_root.json");
    std::shared_ptr<const kernhub::sigstore::TrustedRoot> root =
        kernhub::sigstore::parse_trusted_root(root_text, "production root");
    kernhub::sigstore::ArtifactDigest artifact{
        *kernhub::digest::from_hex(kernhub::digest::sha256_file_hex(vectors() / "bundle_v3_github.whl"))};
    kernhub::sigstore::Policy policy{
        "https://token.actions.githubusercontent.com",
        {"https://github.com/trailofbits/rfc8785.py/.github/workflows/release.yml@refs/tags/v0.1.2"},
        "trailofbits/rfc8785.py"};
};

const Vectors& data() {
    static const Vectors loaded;
    return loaded;
}

void BM_Sigstore_BareEcdsaVerify(benchmark::State& state) {
    khbench::guarded(state, [&] {
        const nlohmann::json bundle = nlohmann::json::parse(data().bundle);
        auto der = *kernhub::digest::from_base64(
            bundle["verificationMaterial"]["x509CertificateChain"]["certificates"][0]["rawBytes"].get<std::string>());
        auto signature = *kernhub::digest::from_base64(bundle["messageSignature"]["signature"].get<std::string>());
        const unsigned char* p = der.data();
        X509* leaf = d2i_X509(nullptr, &p, static_cast<long>(der.size()));
        EVP_PKEY* key = X509_get0_pubkey(leaf);
        for (auto _ : state) {
            EVP_PKEY_CTX* ctx = EVP_PKEY_CTX_new(key, nullptr);
            int ok = EVP_PKEY_verify_init(ctx) == 1 &&
                     EVP_PKEY_verify(ctx, signature.data(), signature.size(), data().artifact.sha256.data(),
                                     data().artifact.sha256.size()) == 1;
            EVP_PKEY_CTX_free(ctx);
            if (!ok) state.SkipWithError("the bare ECDSA verification failed");
        }
        X509_free(leaf);
    });
}

void BM_Sigstore_VerifyBundle(benchmark::State& state) {
    khbench::guarded(state, [&] {
        for (auto _ : state) {
            benchmark::DoNotOptimize(
                kernhub::sigstore::verify_bundle(data().bundle, data().artifact, *data().root, data().policy));
        }
    });
}

void BM_Sigstore_ParseTrustedRoot(benchmark::State& state) {
    khbench::guarded(state, [&] {
        for (auto _ : state) {
            benchmark::DoNotOptimize(kernhub::sigstore::parse_trusted_root(data().root_text, "production root"));
        }
    });
}

}  // namespace

BENCHMARK(BM_Sigstore_BareEcdsaVerify)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Sigstore_VerifyBundle)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Sigstore_ParseTrustedRoot)->Unit(benchmark::kMicrosecond);

KHBENCH_MAIN()
