// verify_bundle against bundles of a test Sigstore instance
// (tests/support/sigstore_signer.py), each with one fault: every fault must
// fail at the step it breaks, and the clean bundle of each version must pass.
// sigstore-python judges the same bundles in tests/interop/test_sigstore_signer.py.
#include <catch2/catch.hpp>

#include <fstream>
#include <string>
#include <vector>

#include "digest/digest.hpp"
#include "kernhub/error.hpp"
#include "sigstore/sigstore.hpp"
#include "support/build_paths.hpp"
#include "support/process.hpp"
#include "support/sigstore_instance.hpp"
#include "support/slurp.hpp"
#include "support/temp_dir.hpp"

namespace ss = kernhub::sigstore;
namespace kt = kernhub::test;

namespace {

const std::string k_faults_identity =
    "https://github.com/kernhub-sig/kernels/.github/workflows/build.yaml@refs/heads/main";
const std::string k_faults_issuer = "https://token.actions.githubusercontent.com";
const std::string k_repository = "https://github.com/kernhub-sig/kernels";

struct Instance {
    kt::TempDir tmp;
    kt::SigstoreInstance sigstore{tmp.path() / "instance"};
    std::filesystem::path artifact = tmp.path() / "metadata.json";
    std::shared_ptr<const ss::TrustedRoot> root;
    ss::ArtifactDigest digest;

    Instance() {
        std::ofstream(artifact) << R"({"digest": {"algorithm": "sha256", "files": {}}})" << '\n';
        root = ss::load_trusted_root(sigstore.trusted_root_path());
        digest.sha256 = *kernhub::digest::from_hex(kernhub::digest::sha256_file_hex(artifact));
    }
    std::string sign(const std::vector<std::string>& faults, const std::string& version = "0.3") const {
        const auto out = tmp.path() / "bundle.json";
        sigstore.sign(artifact, out, k_faults_identity, k_faults_issuer, k_repository, faults, version);
        return kt::slurp(out);
    }
    ss::Verified verify(const std::string& bundle) const {
        return ss::verify_bundle(bundle, digest, *root,
                                 ss::Policy{k_faults_issuer, {k_faults_identity}, "kernhub-sig/kernels"});
    }
};

// The message of the Error(verification) `bundle` fails with.
std::string failure(const Instance& instance, const std::string& bundle) {
    try {
        instance.verify(bundle);
    } catch (const kernhub::Error& e) {
        CHECK(e.code() == kernhub::ErrorCode::verification);
        return e.message();
    }
    FAIL("the bundle verified");
    return {};
}

}  // namespace

TEST_CASE("bundles of every version from the test instance verify", "[sigstore][needs:sigstore-signer]") {
    Instance instance;
    for (const char* version : {"0.1", "0.2", "0.3"}) {
        INFO("bundle v" << version);
        const ss::Verified v = instance.verify(instance.sign({}, version));
        CHECK(v.identity == k_faults_identity);
        CHECK(v.issuer == k_faults_issuer);
        CHECK(v.repository == k_repository);
        CHECK(v.log_time > 0);
    }
}

TEST_CASE("each fault fails at the step it breaks", "[sigstore][needs:sigstore-signer]") {
    Instance instance;
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"expired", "sigstore: certificate-validity:"},
        {"premature", "sigstore: certificate-validity:"},
        {"no-sct", "sigstore: sct:"},
        {"bad-sct", "sigstore: sct:"},
        {"bad-set", "sigstore: tlog-entry:"},
        {"no-set", "sigstore: bundle:"},
        {"bad-proof", "sigstore: inclusion-proof:"},
        {"no-proof", "sigstore: bundle:"},
        {"bad-checkpoint", "sigstore: checkpoint:"},
        {"body-mismatch", "sigstore: tlog-body:"},
        {"wrong-key", "sigstore: signature:"},
        // The log holds the real digest: the bundle's other one disagrees with it.
        {"digest-mismatch", "sigstore: tlog-body:"},
        {"untrusted-ca", "sigstore: certificate-chain:"},
        {"dsse", "sigstore: bundle:"},
        {"ca-leaf", "sigstore: certificate-chain:"},
        {"no-digital-signature", "sigstore: certificate-chain:"},
        {"two-sans", "sigstore: identity:"},
        {"issuer-mismatch", "sigstore: issuer:"},
    };
    for (const auto& [fault, step] : cases) {
        INFO("fault " << fault);
        CHECK_THAT(failure(instance, instance.sign({fault})), Catch::StartsWith(step));
    }
    // A v0.1 bundle may lack the proof: the SET alone vouches for the entry.
    CHECK(instance.verify(instance.sign({"no-proof"}, "0.1")).identity == k_faults_identity);
}

TEST_CASE("a root whose newest key is older than k_root_stale_after_days gets a warning",
          "[sigstore][needs:sigstore-signer]") {
    const ss::RootDocument& built_in = ss::built_in_root();
    REQUIRE(built_in.newest_key_start > 0);
    constexpr std::int64_t k_day = 86400;
    CHECK(ss::staleness_warning(built_in, built_in.newest_key_start + 10 * k_day).empty());
    const std::string warning =
        ss::staleness_warning(built_in, built_in.newest_key_start + (ss::k_root_stale_after_days + 1) * k_day);
    CHECK_THAT(warning, Catch::Contains("public-good root"));
    CHECK_THAT(warning, Catch::Contains(std::to_string(ss::k_root_stale_after_days) + " days"));

    // verify-blob says so on stderr and still verifies.
    kt::TempDir tmp;
    kt::SigstoreInitOptions old;
    old.backdate_days = static_cast<double>(ss::k_root_stale_after_days + 30);
    const kt::SigstoreInstance instance(tmp.path() / "old", old);
    const auto artifact = tmp.path() / "file.txt";
    std::ofstream(artifact) << "signed long ago\n";
    instance.sign(artifact, tmp.path() / "file.sigstore", k_faults_identity, k_faults_issuer, k_repository);
    const kt::ProcessResult r = kt::run_process({KERNHUB_CLI_PATH, "verify-blob", artifact.string(), "--bundle",
                                                 (tmp.path() / "file.sigstore").string(), "--certificate-identity",
                                                 k_faults_identity, "--certificate-oidc-issuer", k_faults_issuer,
                                                 "--trusted-root", instance.trusted_root_path().string()});
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.err, Catch::Contains("kernhub: warning: the Sigstore trusted root"));
}
