// The test Sigstore instance (tests/support/sigstore_instance.hpp) as the
// signature tests use it from C++: init, sign in every bundle version, faults
// passed through, failures thrown. That its bundles are right is proven
// against sigstore-python by tests/interop/test_sigstore_signer.py.
#include <catch2/catch.hpp>

#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "support/sigstore_instance.hpp"
#include "support/slurp.hpp"
#include "support/temp_dir.hpp"

namespace kt = kernhub::test;

namespace {

const char* const k_identity = "https://github.com/kernels-community/relu/.github/workflows/build.yaml@refs/heads/main";
const char* const k_issuer = "https://token.actions.githubusercontent.com";

nlohmann::json read_json(const std::filesystem::path& path) {
    return nlohmann::json::parse(kt::slurp(path));
}

}  // namespace

TEST_CASE("the test Sigstore instance writes a root and signs bundles of each version", "[needs:sigstore-signer]") {
    kt::TempDir tmp;
    const kt::SigstoreInstance instance(tmp.path() / "instance");
    const auto root = read_json(instance.trusted_root_path());
    CHECK(root["mediaType"] == "application/vnd.dev.sigstore.trustedroot+json;version=0.1");
    CHECK(root["tlogs"].size() == 1);
    CHECK(root["ctlogs"].size() == 1);
    CHECK(root["certificateAuthorities"][0]["certChain"]["certificates"].size() == 2);

    const auto artifact = tmp.path() / "metadata.json";
    std::ofstream(artifact) << "{}\n";
    std::int64_t last_index = -1;
    for (const auto& [version, media_type] : {std::pair{"0.1", "application/vnd.dev.sigstore.bundle+json;version=0.1"},
                                              std::pair{"0.2", "application/vnd.dev.sigstore.bundle+json;version=0.2"},
                                              std::pair{"0.3", "application/vnd.dev.sigstore.bundle.v0.3+json"}}) {
        const auto out = tmp.path() / (std::string("bundle-") + version + ".json");
        instance.sign(artifact, out, k_identity, k_issuer, "https://github.com/kernels-community/relu", {}, version);
        const auto bundle = read_json(out);
        CHECK(bundle["mediaType"] == media_type);
        const auto& material = bundle["verificationMaterial"];
        CHECK(material.contains("certificate") == (std::string(version) == "0.3"));
        const auto index = std::stoll(material["tlogEntries"][0]["logIndex"].get<std::string>());
        CHECK(index > last_index);
        last_index = index;
    }
}

TEST_CASE("the test Sigstore instance passes faults through and reports failures", "[needs:sigstore-signer]") {
    kt::TempDir tmp;
    const kt::SigstoreInstance instance(tmp.path() / "instance");
    const auto artifact = tmp.path() / "metadata.json";
    std::ofstream(artifact) << "{}\n";

    kt::SigstoreSignOptions options{k_identity, k_issuer, "", {"no-set"}};
    instance.sign(artifact, tmp.path() / "no-set.json", options);
    CHECK_FALSE(
        read_json(tmp.path() / "no-set.json")["verificationMaterial"]["tlogEntries"][0].contains("inclusionPromise"));

    options.faults = {"dsse"};
    instance.sign(artifact, tmp.path() / "dsse.json", options);
    const auto dsse = read_json(tmp.path() / "dsse.json");
    CHECK(dsse.contains("dsseEnvelope"));
    CHECK_FALSE(dsse.contains("messageSignature"));

    options.faults = {"no-such-fault"};
    CHECK_THROWS_AS(instance.sign(artifact, tmp.path() / "x.json", options), std::runtime_error);
    CHECK_FALSE(std::filesystem::exists(tmp.path() / "x.json"));
}

TEST_CASE("the test Sigstore instance makes a timestamp authority and timestamps bundles", "[needs:sigstore-signer]") {
    kt::TempDir tmp;
    kt::SigstoreInitOptions init;
    init.tsa = true;
    init.backdate_days = 400;
    const kt::SigstoreInstance instance(tmp.path() / "instance", init);
    CHECK(read_json(instance.trusted_root_path())["timestampAuthorities"].size() == 1);

    const auto artifact = tmp.path() / "metadata.json";
    std::ofstream(artifact) << "{}\n";
    kt::SigstoreSignOptions options{k_identity, k_issuer, "", {"no-set"}};
    options.timestamp = true;
    instance.sign(artifact, tmp.path() / "tsa.json", options);
    const auto material = read_json(tmp.path() / "tsa.json")["verificationMaterial"];
    CHECK(material["timestampVerificationData"]["rfc3161Timestamps"].size() == 1);
    CHECK_FALSE(material["tlogEntries"][0].contains("inclusionPromise"));
}
