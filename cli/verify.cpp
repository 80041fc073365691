#include <iostream>

#include "commands.hpp"
#include "common.hpp"

namespace kernhub::cli {

// `kernhub verify`: the cached variant checked again, offline, like the
// Python kernels library's `kernels verify-signature`.
Command add_verify_command(CLI::App& app) {
    auto flags = std::make_shared<CommonFlags>();
    auto ref = std::make_shared<std::string>();
    auto policy = std::make_shared<SignaturePolicy>();
    CLI::App* command = app.add_subcommand(
        "verify", "Check a cached variant again, offline: every file against its digest, and its signature");
    command->add_option("kernel", *ref, "Registry name or ORG/REPO[@REVISION]")->required();
    command->add_option("--certificate-identity", policy->identities,
                        "Accept signatures by this identity instead of the registry's policy (repeatable)");
    command->add_option("--certificate-oidc-issuer", policy->issuer, "The OIDC issuer of the signing identity");
    command->add_option("--certificate-github-workflow-repository", policy->repository,
                        "The source repository the certificate must name (ORG/REPO or a URI)");
    add_fetch_flags(*command, *flags);
    return {command,
            [flags, ref, policy]() {
                if (policy->issuer.empty() != policy->identities.empty()) {
                    throw Error(ErrorCode::usage,
                                "--certificate-identity and --certificate-oidc-issuer go together; give both");
                }
                if (!policy->repository.empty() && policy->issuer.empty()) {
                    throw Error(ErrorCode::usage,
                                "--certificate-github-workflow-repository needs --certificate-identity and "
                                "--certificate-oidc-issuer");
                }
                ProgressPrinter progress(flags->quiet);
                Client client(make_options(*flags, &progress));
                VerifyReport report = client.verify(*ref, *policy);
                if (flags->json) {
                    nlohmann::ordered_json out = {{"name", report.name},
                                                  {"repo_id", report.repo_id},
                                                  {"commit", report.commit},
                                                  {"variant", report.variant},
                                                  {"path", report.path},
                                                  {"files_checked", report.files_checked},
                                                  {"digest_checked", report.digest_checked}};
                    out["signature"] =
                        report.signature ? signature_json(*report.signature) : nlohmann::ordered_json(nullptr);
                    print_json(out);
                    return 0;
                }
                std::cout << "verified " << printable(report.name) << " (" << printable(report.repo_id) << "@"
                          << short_commit(report.commit) << ") variant " << printable(report.variant) << ": "
                          << report.files_checked << " files"
                          << (report.digest_checked
                                  ? " match the metadata.json digest and the hub's hashes"
                                  : " match the hub's hashes (the variant has no metadata.json digest)")
                          << '\n';
                if (report.signature) {
                    std::cout << "  " << describe_signature(*report.signature) << '\n';
                } else {
                    std::cout << "  signature: not checked (no policy in the registry entry; give "
                                 "--certificate-identity and --certificate-oidc-issuer)\n";
                }
                return 0;
            },
            k_read_only_interrupted};
}

}  // namespace kernhub::cli
