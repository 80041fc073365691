// `kernhub verify-blob FILE --bundle B --certificate-identity ID
// --certificate-oidc-issuer URL`: a Sigstore bundle over any file, verified
// offline (flag names as cosign's).
#include <ctime>
#include <iostream>

#include "commands.hpp"
#include "common.hpp"
#include "kernhub/signature.hpp"

namespace kernhub::cli {

namespace {

std::string utc(std::int64_t unix_seconds) {
    std::time_t t = static_cast<std::time_t>(unix_seconds);
    std::tm tm{};
    char text[32];
    if (gmtime_r(&t, &tm) == nullptr || std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0) {
        return std::to_string(unix_seconds);
    }
    return text;
}

nlohmann::ordered_json report_json(const BlobVerifyOptions& options, const SignatureReport& report) {
    return {{"file", options.file},
            {"bundle", options.bundle},
            {"verified", true},
            {"identity", report.signature.identity},
            {"issuer", report.signature.issuer},
            {"repository", report.signature.repository},
            {"log_time", utc(report.signature.log_time)},
            {"log_time_unix", report.signature.log_time},
            {"log_index", report.signature.log_index},
            {"log_id", report.log_id},
            {"trusted_root", report.trusted_root}};
}

}  // namespace

Command add_verify_blob_command(CLI::App& app) {
    auto options = std::make_shared<BlobVerifyOptions>();
    auto json = std::make_shared<bool>(false);
    CLI::App* command = app.add_subcommand("verify-blob", "Verify a Sigstore bundle over a file, offline");
    command->add_option("file", options->file, "The signed file")->required();
    command->add_option("--bundle", options->bundle, "Its Sigstore bundle (.sigstore, .sigstore.json)")->required();
    command
        ->add_option("--certificate-identity", options->policy.identities,
                     "An accepted signer identity (SAN URI or email); repeat to accept several")
        ->required()
        ->expected(1)  // one per flag, so FILE after it stays the file
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    command->add_option("--certificate-oidc-issuer", options->policy.issuer, "The expected OIDC issuer URL")
        ->required();
    command->add_option("--certificate-github-workflow-repository", options->policy.repository,
                        "The expected source repository, ORG/REPO");
    command->add_option(
        "--trusted-root", options->trusted_root,
        "A Sigstore trusted_root.json (env KERNHUB_SIGSTORE_TRUSTED_ROOT; default: the public-good root built in)");
    command->add_flag("--json", *json, "Print one JSON object on stdout");
    return {command,
            [options, json]() {
                const SignatureReport report = verify_blob(*options);
                if (!report.root_warning.empty())
                    std::cerr << "kernhub: warning: " << printable(report.root_warning) << '\n';
                if (*json) {
                    print_json(report_json(*options, report));
                    return 0;
                }
                std::cout << "verified: " << printable(options->file) << '\n'
                          << "  identity:  " << printable(report.signature.identity) << '\n'
                          << "  issuer:    " << printable(report.signature.issuer) << '\n';
                if (!report.signature.repository.empty()) {
                    std::cout << "  repository: " << printable(report.signature.repository) << '\n';
                }
                std::cout << "  log time:  " << utc(report.signature.log_time) << '\n'
                          << "  log index: " << report.signature.log_index << '\n';
                return 0;
            },
            k_read_only_interrupted};
}

}  // namespace kernhub::cli
