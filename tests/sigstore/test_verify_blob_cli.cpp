// `kernhub verify-blob` on the real vectors: exit 0 with what was verified,
// exit 4 naming the failed step, 2 for flags, 3 for missing files.
#include "cli/cli_support.hpp"
#include "vectors.hpp"

namespace kernhub::test {
namespace {

using namespace sigstore_vectors;
using cli::check_error;
using cli::Sandbox;

std::vector<std::string> github_args(const std::string& file = (dir() / "bundle_v3_github.whl").string()) {
    return {"verify-blob",
            file,
            "--bundle",
            (dir() / "bundle_v3_github.whl.sigstore").string(),
            "--certificate-identity",
            k_github_identity,
            "--certificate-oidc-issuer",
            k_github_issuer,
            "--trusted-root",
            production_root().string()};
}

const EnvChanges k_no_root_env = {{"KERNHUB_SIGSTORE_TRUSTED_ROOT", std::nullopt}};

TEST_CASE("verify-blob: the production bundle verifies, in text and JSON", "[sigstore]") {
    Sandbox sandbox;
    auto args = github_args();
    args.insert(args.end(), {"--certificate-github-workflow-repository", k_github_repository});
    ProcessResult text = sandbox.run(args, k_no_root_env);
    INFO(cli::describe(text));
    CHECK(text.exit_code == 0);
    CHECK(text.out.find(k_github_identity) != std::string::npos);
    CHECK(text.out.find("log time:  2024-03-19T22:41:16Z") != std::string::npos);
    CHECK(text.out.find("log index: 79605083") != std::string::npos);

    args.emplace_back("--json");
    json out = cli::parse_stdout(sandbox.run(args, k_no_root_env));
    CHECK(out["verified"] == true);
    CHECK(out["identity"] == k_github_identity);
    CHECK(out["issuer"] == k_github_issuer);
    CHECK(out["repository"] == "https://github.com/trailofbits/rfc8785.py");
    CHECK(out["log_time"] == "2024-03-19T22:41:16Z");
    CHECK(out["log_index"] == 79605083);
}

TEST_CASE("verify-blob: the staging bundle verifies with the root from the environment", "[sigstore]") {
    Sandbox sandbox;
    ProcessResult r =
        sandbox.run({"verify-blob", (dir() / "bundle_v3.txt").string(), "--bundle",
                     (dir() / "bundle_v3.txt.sigstore").string(), "--certificate-identity", "someone@example.com",
                     "--certificate-identity", k_staging_identity, "--certificate-oidc-issuer", k_staging_issuer},
                    {{"KERNHUB_SIGSTORE_TRUSTED_ROOT", (dir() / "staging_trusted_root.json").string()}});
    INFO(cli::describe(r));
    CHECK(r.exit_code == 0);
    CHECK(r.out.find(k_staging_identity) != std::string::npos);
}

TEST_CASE("verify-blob: each failure is exit 4 naming its step", "[sigstore]") {
    Sandbox sandbox;
    const fs::path tampered = sandbox.dir.path() / "tampered.whl";
    std::string bytes = read(dir() / "bundle_v3_github.whl");
    bytes.back() = static_cast<char>(bytes.back() ^ 1);
    cli::write_text(tampered, bytes);
    check_error(sandbox.run(github_args(tampered.string()), k_no_root_env), 4,
                {"sigstore: artifact-digest:", tampered.string()});

    auto args = github_args();
    args[5] = "https://github.com/someone/else/.github/workflows/release.yml@refs/heads/main";
    check_error(sandbox.run(args, k_no_root_env), 4, {"sigstore: identity:"});

    args = github_args();
    args[7] = "https://accounts.google.com";
    check_error(sandbox.run(args, k_no_root_env), 4, {"sigstore: issuer:"});

    args = github_args();
    args.insert(args.end(), {"--certificate-github-workflow-repository", "trailofbits/other"});
    check_error(sandbox.run(args, k_no_root_env), 4, {"sigstore: repository:"});

    // The staging bundle against the default (production) root.
    check_error(
        sandbox.run({"verify-blob", (dir() / "bundle_v3.txt").string(), "--bundle",
                     (dir() / "bundle_v3.txt.sigstore").string(), "--certificate-identity", k_staging_identity,
                     "--certificate-oidc-issuer", k_staging_issuer, "--trusted-root", production_root().string()},
                    k_no_root_env),
        4, {"sigstore: certificate-chain:"});

    check_error(sandbox.run({"verify-blob", (dir() / "bundle_cve_2022_36056.txt").string(), "--bundle",
                             (dir() / "bundle_cve_2022_36056.txt.sigstore").string(), "--certificate-identity",
                             k_staging_identity, "--certificate-oidc-issuer", k_staging_issuer, "--trusted-root",
                             (dir() / "staging_trusted_root.json").string()},
                            k_no_root_env),
                4, {"sigstore: tlog-body:"});

    const fs::path swapped = sandbox.dir.path() / "swapped.sigstore";
    json b = bundle("bundle_v3_github.whl.sigstore");
    b["verificationMaterial"]["tlogEntries"] = bundle("bundle_v3.txt.sigstore")["verificationMaterial"]["tlogEntries"];
    cli::write_text(swapped, b.dump());
    args = github_args();
    args[3] = swapped.string();
    check_error(sandbox.run(args, k_no_root_env), 4, {"sigstore: certificate-validity:"});

    const fs::path big = sandbox.dir.path() / "big.sigstore";
    cli::write_text(big, std::string((1u << 20) + 1, ' '));
    args[3] = big.string();
    check_error(sandbox.run(args, k_no_root_env), 4, {"sigstore: bundle:", "k_max_bundle_bytes"});

    args.emplace_back("--json");
    args[3] = tampered.string();  // not JSON at all
    ProcessResult r = sandbox.run(args, k_no_root_env);
    CHECK(r.exit_code == 4);
    json out = cli::parse_stdout(r);
    CHECK(out["error"]["code"] == 4);
    CHECK(out["error"]["message"].get<std::string>().rfind("sigstore: bundle:", 0) == 0);
}

TEST_CASE("verify-blob: flags and missing files", "[sigstore]") {
    Sandbox sandbox;
    auto args = github_args();
    args.erase(args.begin() + 4, args.begin() + 6);  // no --certificate-identity
    check_error(sandbox.run(args, k_no_root_env), 2, {"--certificate-identity"});

    args = github_args();
    args.resize(8);  // no --trusted-root, none in the environment: the built-in root
    args.emplace_back("--json");
    ProcessResult shipped = sandbox.run(args, k_no_root_env);
    INFO(cli::describe(shipped));
    REQUIRE(shipped.exit_code == 0);
    json out = cli::parse_stdout(shipped);
    CHECK(out["identity"] == k_github_identity);
    CHECK_THAT(out["trusted_root"].get<std::string>(), Catch::Contains("public-good root"));
    // The staging bundle is not signed by the public-good instance.
    check_error(sandbox.run({"verify-blob", (dir() / "bundle_v3.txt").string(), "--bundle",
                             (dir() / "bundle_v3.txt.sigstore").string(), "--certificate-identity", k_staging_identity,
                             "--certificate-oidc-issuer", k_staging_issuer},
                            k_no_root_env),
                4, {"sigstore: certificate-chain"});

    const std::string missing = (sandbox.dir.path() / "missing").string();
    check_error(sandbox.run(github_args(missing), k_no_root_env), 3, {missing});
    args = github_args();
    args[3] = missing;
    check_error(sandbox.run(args, k_no_root_env), 3, {missing});
    args = github_args();
    args[9] = missing;
    check_error(sandbox.run(args, k_no_root_env), 3, {missing});
}

}  // namespace
}  // namespace kernhub::test
