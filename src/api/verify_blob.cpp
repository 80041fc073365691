// kernhub::verify_blob (kernhub/signature.hpp): the artifact is hashed while
// streaming, so its size does not matter; the bundle and root are capped
// documents (sigstore.hpp).
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include "api/setting_table.hpp"
#include "digest/digest.hpp"
#include "kernhub/error.hpp"
#include "kernhub/signature.hpp"
#include "sigstore/sigstore.hpp"

namespace kernhub {

namespace {

// --trusted-root, else KERNHUB_SIGSTORE_TRUSTED_ROOT; empty: the built-in root.
std::string trusted_root_path(const BlobVerifyOptions& options) {
    if (!options.trusted_root.empty()) return options.trusted_root;
    const char* env = std::getenv(std::string(api::setting_for_field("sigstore_trusted_root").env).c_str());
    return env != nullptr ? env : "";
}

digest::Bytes sha256_of(const std::string& file) {
    std::error_code ec;
    if (!std::filesystem::exists(file, ec)) {
        throw Error(ErrorCode::not_found, "artifact " + file + " does not exist; check the path");
    }
    if (!std::filesystem::is_regular_file(file, ec)) {
        throw Error(ErrorCode::not_found, "artifact " + file + " is not a regular file; name the signed file");
    }
    digest::Hasher hasher(digest::Algorithm::sha256);
    digest::read_chunks(
        file, [](std::uint64_t) {}, [&](const void* data, std::size_t size) { hasher.update(data, size); });
    return hasher.finish();
}

}  // namespace

SignatureReport verify_blob(const BlobVerifyOptions& options) {
    if (options.policy.issuer.empty() || options.policy.identities.empty()) {
        throw Error(ErrorCode::usage, "verify_blob needs an OIDC issuer and at least one certificate identity");
    }
    const std::string root_path = trusted_root_path(options);
    const std::string bundle = sigstore::read_bundle(options.bundle);
    std::optional<sigstore::RootDocument> read;
    if (!root_path.empty()) read = sigstore::read_root(root_path);
    const sigstore::RootDocument& root = read ? *read : sigstore::built_in_root();
    const sigstore::ArtifactDigest artifact{sha256_of(options.file)};
    const sigstore::Policy policy{options.policy.issuer, options.policy.identities, options.policy.repository};
    sigstore::Verified verified;
    try {
        verified = sigstore::verify_bundle(bundle, artifact, *root.root, policy);
    } catch (const Error& e) {
        // The module knows digests only; name the files the user gave.
        throw Error(e.code(), e.plain_message() + " (artifact " + options.file + ", bundle " + options.bundle + ")",
                    e.hint(), e.context());
    }
    SignatureReport report;
    report.signature =
        SignatureInfo{verified.identity, verified.issuer, verified.repository, verified.log_time, verified.log_index};
    report.log_id = verified.log_id;
    report.trusted_root = root.origin;
    report.root_warning = sigstore::staleness_warning(
        root,
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count());
    return report;
}

}  // namespace kernhub
