// sigstore::verify_bundle on the real vectors: each accepted bundle, and
// each altered one failing at its named step.
#include <atomic>
#include <functional>
#include <thread>

#include "sigstore/sigstore.hpp"
#include "vectors.hpp"

namespace kernhub::test {
namespace {

using namespace sigstore_vectors;
namespace ss = kernhub::sigstore;

std::shared_ptr<const ss::TrustedRoot> production() {
    static const auto root = ss::load_trusted_root(production_root());
    return root;
}

std::shared_ptr<const ss::TrustedRoot> staging() {
    static const auto root = ss::load_trusted_root(dir() / "staging_trusted_root.json");
    return root;
}

ss::ArtifactDigest digest_of(const std::string& artifact) {
    auto bytes = digest::from_hex(digest::sha256_file_hex(dir() / artifact));
    REQUIRE(bytes);
    return {*bytes};
}

ss::Policy github_policy() {
    return {k_github_issuer, {k_github_identity}, k_github_repository};
}

ss::Policy staging_policy() {
    return {k_staging_issuer, {k_staging_identity}, ""};
}

ss::Verified verify_github(const json& bundle, const ss::Policy& policy = github_policy()) {
    return ss::verify_bundle(bundle.dump(), digest_of("bundle_v3_github.whl"), *production(), policy);
}

ss::Verified verify_staging(const json& bundle) {
    return ss::verify_bundle(bundle.dump(), digest_of("bundle_v3.txt"), *staging(), staging_policy());
}

// `run` throws Error(verification) whose message starts "sigstore: <step>: ".
void check_step(const std::function<void()>& run, const std::string& step, const std::string& also = {}) {
    try {
        run();
        FAIL("verification passed; expected a failure at step " << step);
    } catch (const Error& e) {
        INFO(e.what());
        CHECK(e.code() == ErrorCode::verification);
        CHECK(e.message().rfind("sigstore: " + step + ": ", 0) == 0);
        if (!also.empty()) CHECK(e.message().find(also) != std::string::npos);
    }
}

json& entry(json& bundle) {
    return bundle["verificationMaterial"]["tlogEntries"][0];
}

json entry_of(const std::string& name) {
    return bundle(name)["verificationMaterial"]["tlogEntries"][0];
}

TEST_CASE("the production GitHub Actions bundle verifies with its identity, issuer and repository", "[sigstore]") {
    const ss::Verified v = verify_github(bundle("bundle_v3_github.whl.sigstore"));
    CHECK(v.identity == k_github_identity);
    CHECK(v.issuer == k_github_issuer);
    CHECK(v.repository == "https://github.com/trailofbits/rfc8785.py");
    CHECK(v.log_time == 1710888076);
    CHECK(v.log_index == 79605083);
    CHECK(v.log_id == "c0d23d6ad406973f9559f3ba2d1ca01f84147d8ffc5b8445c224f98b9591801d");
}

TEST_CASE("one trusted root serves verifications on several threads at once", "[sigstore]") {
    const std::string good = bundle("bundle_v3_github.whl.sigstore").dump();
    const ss::ArtifactDigest artifact = digest_of("bundle_v3_github.whl");
    ss::ArtifactDigest tampered = artifact;
    tampered.sha256[5] ^= 0x10;
    std::atomic<int> verified{0};
    std::atomic<int> refused{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
            for (int i = 0; i < 5; ++i) {
                try {
                    ss::verify_bundle(good, (t + i) % 2 == 0 ? artifact : tampered, *production(), github_policy());
                    ++verified;
                } catch (const Error& e) {
                    if (e.message().rfind("sigstore: artifact-digest: ", 0) == 0) ++refused;
                }
            }
        });
    }
    for (auto& thread : threads) thread.join();
    CHECK(verified == 10);
    CHECK(refused == 10);
}

TEST_CASE("an identity list accepts any listed identity", "[sigstore]") {
    ss::Policy policy = github_policy();
    policy.identities = {"https://example.com/other", k_github_identity};
    CHECK(verify_github(bundle("bundle_v3_github.whl.sigstore"), policy).identity == k_github_identity);
    policy.repository = "https://github.com/trailofbits/rfc8785.py";  // a full URI matches exactly
    CHECK(verify_github(bundle("bundle_v3_github.whl.sigstore"), policy).repository ==
          "https://github.com/trailofbits/rfc8785.py");
}

TEST_CASE("the staging bundle (v0.3 media type) verifies against the staging root", "[sigstore]") {
    const ss::Verified v = verify_staging(bundle("bundle_v3.txt.sigstore"));
    CHECK(v.identity == k_staging_identity);
    CHECK(v.issuer == k_staging_issuer);
    CHECK(v.repository.empty());
}

TEST_CASE("a tampered artifact fails at artifact-digest", "[sigstore]") {
    ss::ArtifactDigest other = digest_of("bundle_v3_github.whl");
    other.sha256[0] ^= 0x01;
    check_step(
        [&] {
            ss::verify_bundle(bundle("bundle_v3_github.whl.sigstore").dump(), other, *production(), github_policy());
        },
        "artifact-digest");
}

TEST_CASE("a wrong identity, issuer or repository fails at its policy step", "[sigstore]") {
    const json b = bundle("bundle_v3_github.whl.sigstore");
    ss::Policy policy = github_policy();
    policy.identities = {"https://github.com/trailofbits/rfc8785.py/.github/workflows/other.yml@refs/tags/v0.1.2"};
    check_step([&] { verify_github(b, policy); }, "identity", k_github_identity);
    policy = github_policy();
    policy.issuer = "https://accounts.google.com";
    check_step([&] { verify_github(b, policy); }, "issuer", k_github_issuer);
    policy = github_policy();
    policy.repository = "trailofbits/other";
    check_step([&] { verify_github(b, policy); }, "repository", "https://github.com/trailofbits/other");
    policy = github_policy();
    policy.identities.clear();
    check_step([&] { verify_github(b, policy); }, "identity");
}

TEST_CASE("a bundle of another instance fails without its root", "[sigstore]") {
    check_step(
        [&] {
            ss::verify_bundle(bundle("bundle_v3.txt.sigstore").dump(), digest_of("bundle_v3.txt"), *production(),
                              staging_policy());
        },
        "certificate-chain", "use that instance's trusted root (Options::sigstore_trusted_root)");
    check_step(
        [&] {
            ss::verify_bundle(bundle("bundle_v3_github.whl.sigstore").dump(), digest_of("bundle_v3_github.whl"),
                              *staging(), github_policy());
        },
        "certificate-chain");
}

TEST_CASE("the CVE-2022-36056 bundle fails at tlog-body", "[sigstore]") {
    check_step(
        [&] {
            ss::verify_bundle(bundle("bundle_cve_2022_36056.txt.sigstore").dump(),
                              digest_of("bundle_cve_2022_36056.txt"), *staging(), staging_policy());
        },
        "tlog-body");
}

TEST_CASE("a swapped log entry fails", "[sigstore]") {
    // The whole entry of another signature: its log time is outside the
    // leaf's ten minutes.
    json b = bundle("bundle_v3.txt.sigstore");
    entry(b) = entry_of("bundle_cve_2022_36056.txt.sigstore");
    check_step([&] { verify_staging(b); }, "certificate-validity");
    // Only the logged body of another signature: the SET no longer covers it.
    b = bundle("bundle_v3.txt.sigstore");
    entry(b)["canonicalizedBody"] = entry_of("bundle_cve_2022_36056.txt.sigstore")["canonicalizedBody"];
    check_step([&] { verify_staging(b); }, "tlog-entry");
}

TEST_CASE("a log time outside the certificate's validity fails at certificate-validity", "[sigstore]") {
    json b = bundle("bundle_v3_github.whl.sigstore");
    entry(b)["integratedTime"] = "1710889000";  // 15 minutes later; the leaf lived 10
    check_step([&] { verify_github(b); }, "certificate-validity", "1710889000");
}

TEST_CASE("corrupted log material fails at its step", "[sigstore]") {
    json b = bundle("bundle_v3_github.whl.sigstore");
    auto& set = entry(b)["inclusionPromise"]["signedEntryTimestamp"];
    set = flip_base64(set.get<std::string>(), -1);
    check_step([&] { verify_github(b); }, "tlog-entry");

    b = bundle("bundle_v3_github.whl.sigstore");
    auto& hash = entry(b)["inclusionProof"]["hashes"][3];
    hash = flip_base64(hash.get<std::string>(), 0);
    check_step([&] { verify_github(b); }, "inclusion-proof");

    b = bundle("bundle_v3_github.whl.sigstore");
    auto& note = entry(b)["inclusionProof"]["checkpoint"]["envelope"];
    std::string text = note.get<std::string>();
    const std::size_t from = text.rfind(' ') + 1;
    const std::size_t to = text.find('\n', from);
    text.replace(from, to - from, flip_base64(text.substr(from, to - from), -1));
    note = text;
    check_step([&] { verify_github(b); }, "checkpoint", "does not verify");

    b = bundle("bundle_v3_github.whl.sigstore");
    auto& size = entry(b)["inclusionProof"]["checkpoint"]["envelope"];
    std::string resized = size.get<std::string>();
    resized.replace(resized.find("\n75441653\n"), 10, "\n75441654\n");
    size = resized;
    check_step([&] { verify_github(b); }, "checkpoint", "tree size");
}

// A valid certificate with a bad SCT needs a CA of one's own; with the
// real leaf, the CT log's key or the log itself is taken from the root.
TEST_CASE("an SCT that no CT log of the root signed fails at sct", "[sigstore]") {
    json root = json::parse(read(production_root()));
    for (auto& log : root["ctlogs"]) log["publicKey"]["rawBytes"] = root["tlogs"][0]["publicKey"]["rawBytes"];
    auto wrong_key = ss::parse_trusted_root(root.dump(), "a root with other CT keys");
    check_step(
        [&] {
            ss::verify_bundle(bundle("bundle_v3_github.whl.sigstore").dump(), digest_of("bundle_v3_github.whl"),
                              *wrong_key, github_policy());
        },
        "sct", "does not verify");
    root["ctlogs"] = json::array();
    auto no_logs = ss::parse_trusted_root(root.dump(), "a root without CT logs");
    check_step(
        [&] {
            ss::verify_bundle(bundle("bundle_v3_github.whl.sigstore").dump(), digest_of("bundle_v3_github.whl"),
                              *no_logs, github_policy());
        },
        "sct", "unknown CT log");
}

TEST_CASE("an altered signature fails", "[sigstore]") {
    json b = bundle("bundle_v3_github.whl.sigstore");
    auto& signature = b["messageSignature"]["signature"];
    signature = flip_base64(signature.get<std::string>(), -1);
    // The log holds the original signature, so the body check sees it first.
    check_step([&] { verify_github(b); }, "tlog-body", "another signature");
}

TEST_CASE("bundle shapes: versions, DSSE, sizes, JSON", "[sigstore]") {
    const json original = bundle("bundle_v3_github.whl.sigstore");
    SECTION("v0.1 label: the promise suffices, with or without a proof") {
        json b = original;
        b["mediaType"] = "application/vnd.dev.sigstore.bundle+json;version=0.1";
        CHECK(verify_github(b).identity == k_github_identity);
        entry(b).erase("inclusionProof");
        CHECK(verify_github(b).identity == k_github_identity);
    }
    SECTION("v0.2 without an inclusion proof is refused") {
        json b = original;
        entry(b).erase("inclusionProof");
        check_step([&] { verify_github(b); }, "bundle", "inclusionProof");
    }
    SECTION("without an inclusion promise is refused") {
        json b = original;
        entry(b).erase("inclusionPromise");
        check_step([&] { verify_github(b); }, "bundle", "inclusionPromise");
    }
    SECTION("a v0.3 label needs a single certificate") {
        json b = original;
        b["mediaType"] = "application/vnd.dev.sigstore.bundle.v0.3+json";
        check_step([&] { verify_github(b); }, "bundle", "certificate");
    }
    SECTION("an unknown media type") {
        json b = original;
        b["mediaType"] = "application/vnd.dev.sigstore.bundle+json;version=9.9";
        check_step([&] { verify_github(b); }, "bundle", "9.9");
    }
    SECTION("DSSE is refused by name") {
        json b = original;
        b.erase("messageSignature");
        b["dsseEnvelope"] = {{"payload", "e30="}, {"payloadType", "application/vnd.in-toto+json"}};
        check_step([&] { verify_github(b); }, "bundle", "DSSE");
    }
    SECTION("two log entries are refused") {
        json b = original;
        b["verificationMaterial"]["tlogEntries"].push_back(entry(b));
        check_step([&] { verify_github(b); }, "bundle", "exactly one");
    }
    SECTION("Rekor v2 entries are refused by name") {
        json b = original;
        entry(b)["kindVersion"]["version"] = "0.0.2";
        check_step([&] { verify_github(b); }, "bundle", "Rekor v2");
        b = original;
        entry(b).erase("integratedTime");
        check_step([&] { verify_github(b); }, "bundle", "Rekor v2");
    }
    SECTION("a bundle whose only time is an RFC 3161 timestamp is refused by name") {
        json b = original;
        b["verificationMaterial"]["timestampVerificationData"] = {
            {"rfc3161Timestamps", json::array({{{"signedTimestamp", "MAA="}}})}};
        // Next to a signed log entry, the timestamps are not relied on: the
        // log's time decides, and the bundle verifies.
        CHECK_NOTHROW(verify_github(b));
        entry(b).erase("inclusionPromise");
        check_step([&] { verify_github(b); }, "timestamp", "RFC 3161");
    }
    SECTION("an oversized bundle names its cap") {
        std::string big = original.dump();
        big.append(ss::k_max_bundle_bytes, ' ');
        check_step([&] { ss::verify_bundle(big, digest_of("bundle_v3_github.whl"), *production(), github_policy()); },
                   "bundle", "k_max_bundle_bytes");
    }
    SECTION("malformed and deeply nested JSON") {
        check_step(
            [&] {
                ss::verify_bundle("{\"mediaType\": ", digest_of("bundle_v3_github.whl"), *production(),
                                  github_policy());
            },
            "bundle", "not valid JSON");
        const std::string deep = std::string(100000, '[') + std::string(100000, ']');
        check_step([&] { ss::verify_bundle(deep, digest_of("bundle_v3_github.whl"), *production(), github_policy()); },
                   "bundle", "k_max_json_depth");
        check_step([&] { ss::verify_bundle("[]", digest_of("bundle_v3_github.whl"), *production(), github_policy()); },
                   "bundle", "not a JSON object");
    }
}

TEST_CASE("trusted roots: parse, refuse, newest key", "[sigstore]") {
    CHECK(ss::newest_key_start(*production()) >= 1751587200);  // the 2025-07-04 TSA and later
    json root = json::parse(read(production_root()));
    root["mediaType"] = "application/vnd.dev.sigstore.trustedroot+json;version=0.2";
    check_step([&] { ss::parse_trusted_root(root.dump(), "test root"); }, "trusted-root", "test root");
    root = json::parse(read(production_root()));
    root["tlogs"][0]["publicKey"]["rawBytes"] = "AAAA";
    check_step([&] { ss::parse_trusted_root(root.dump(), "test root"); }, "trusted-root", "tlogs[0]");
    root = json::parse(read(production_root()));
    root["certificateAuthorities"][0]["validFor"]["start"] = "yesterday";
    check_step([&] { ss::parse_trusted_root(root.dump(), "test root"); }, "trusted-root", "RFC 3339");
    check_step([&] { ss::parse_trusted_root("not json", "test root"); }, "trusted-root", "not valid JSON");
    check_step([&] { ss::parse_trusted_root(std::string(ss::k_max_trusted_root_bytes + 1, ' '), "test root"); },
               "trusted-root", "k_max_trusted_root_bytes");
    try {
        ss::load_trusted_root(dir() / "no-such-root.json");
        FAIL("a missing root loaded");
    } catch (const Error& e) {
        CHECK(e.code() == ErrorCode::not_found);
    }
}

}  // namespace
}  // namespace kernhub::test
