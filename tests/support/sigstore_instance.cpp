#include "support/sigstore_instance.hpp"

#include <stdexcept>
#include <utility>

#include "support/build_paths.hpp"
#include "support/process.hpp"
#include "support/requirements.hpp"

namespace kernhub::test {
namespace {

const std::string k_signer = std::string(KERNHUB_SOURCE_DIR) + "/tests/support/sigstore_signer.py";

void run_signer(std::vector<std::string> args) {
    std::vector<std::string> argv{KERNHUB_TEST_PYTHON, k_signer};
    argv.insert(argv.end(), std::make_move_iterator(args.begin()), std::make_move_iterator(args.end()));
    const auto result = run_process(argv);
    if (result.exit_code != 0) {
        std::string command;
        for (const auto& arg : argv) command += (command.empty() ? "" : " ") + arg;
        throw std::runtime_error(command + " exited " + std::to_string(result.exit_code) + ": " + result.err);
    }
}

}  // namespace

KERNHUB_TEST_REQUIREMENT("needs:sigstore-signer", why_no_sigstore_signer);

SigstoreInstance::SigstoreInstance(std::filesystem::path dir, const SigstoreInitOptions& options)
    : m_dir(std::move(dir)) {
    std::vector<std::string> args{"init",
                                  m_dir.string(),
                                  "--shard-offset",
                                  std::to_string(options.shard_offset),
                                  "--backdate-days",
                                  std::to_string(options.backdate_days)};
    if (options.tsa) args.emplace_back("--tsa");
    run_signer(std::move(args));
}

void SigstoreInstance::sign(const std::filesystem::path& artifact, const std::filesystem::path& bundle_out,
                            const SigstoreSignOptions& options) const {
    std::vector<std::string> args{"sign",
                                  m_dir.string(),
                                  artifact.string(),
                                  "--out",
                                  bundle_out.string(),
                                  "--identity",
                                  options.identity,
                                  "--issuer",
                                  options.issuer,
                                  "--bundle-version",
                                  options.bundle_version};
    if (!options.repository.empty()) {
        args.insert(args.end(), {"--repository", options.repository});
    }
    for (const auto& fault : options.faults) args.insert(args.end(), {"--fault", fault});
    if (options.timestamp) args.emplace_back("--timestamp");
    run_signer(std::move(args));
}

void SigstoreInstance::sign(const std::filesystem::path& artifact, const std::filesystem::path& bundle_out,
                            const std::string& identity, const std::string& issuer, const std::string& repository,
                            const std::vector<std::string>& faults, const std::string& bundle_version) const {
    sign(artifact, bundle_out, SigstoreSignOptions{identity, issuer, repository, faults, bundle_version});
}

std::string why_no_sigstore_signer() {
    try {
        const auto result = run_process({KERNHUB_TEST_PYTHON, "-c", "import cryptography.x509"});
        if (result.exit_code == 0) return "";
        return std::string("KERNHUB_TEST_PYTHON (") + KERNHUB_TEST_PYTHON +
               ") cannot import cryptography; install tests/requirements.txt into it";
    } catch (const std::exception& e) {
        return std::string("cannot run KERNHUB_TEST_PYTHON (") + KERNHUB_TEST_PYTHON + "): " + e.what();
    }
}

}  // namespace kernhub::test
