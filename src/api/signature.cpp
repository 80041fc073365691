// Signatures in the API (docs/trust.md, "Signatures"): the trusted root a Client
// uses, the check a kernel's policy makes, and `kernhub verify`.
#include <chrono>

#include "api/client_impl.hpp"
#include "api/settings.hpp"
#include "cache/cache.hpp"
#include "digest/digest.hpp"
#include "fetch/fetcher.hpp"
#include "kernhub/kernhub.hpp"
#include "sigstore/sigstore.hpp"

namespace kernhub {

namespace {

sigstore::Policy to_policy(const SignaturePolicy& policy) {
    return sigstore::Policy{policy.issuer, policy.identities, policy.repository};
}

void check_policy(const SignaturePolicy& policy, const std::string& what) {
    if (policy.issuer.empty() || policy.identities.empty()) {
        throw Error(ErrorCode::usage, what + " needs an OIDC issuer and at least one certificate identity");
    }
}

std::int64_t now_seconds() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

}  // namespace

namespace api {

SignatureInfo signature_info(const cache::RecordedSignature& recorded) {
    return SignatureInfo{recorded.identity, recorded.issuer, recorded.repository, recorded.log_time,
                         recorded.log_index};
}

}  // namespace api

const sigstore::RootDocument& ClientImpl::trusted_root() {
    std::string warning;
    const sigstore::RootDocument* document = nullptr;
    {
        std::lock_guard<std::mutex> guard(root_mutex);
        if (!root) {
            root = settings.sigstore_trusted_root.empty() ? sigstore::built_in_root()
                                                          : sigstore::read_root(settings.sigstore_trusted_root);
            warning = sigstore::staleness_warning(*root, now_seconds());
        }
        document = &*root;
    }
    // Outside the lock: a sink may call back into this Client.
    if (!warning.empty()) say("warning: " + warning);
    return *document;
}

std::optional<fetch::SignatureCheck> ClientImpl::signature_check(const registry::KernelSpec& spec) {
    if (!spec.signature) {
        if (!settings.require_signatures) return std::nullopt;
        throw Error(ErrorCode::verification,
                    "kernel " + quoted_name(spec.name) + " (" + spec.repo_id +
                        ") has no \"signature\" policy in its registry entry (" + spec.source +
                        "), and signatures are required (KERNHUB_REQUIRE_SIGNATURES or "
                        "Options::require_signatures); add \"signature\": {\"issuer\": ..., \"identities\": [...]} "
                        "to the entry");
    }
    check_policy(*spec.signature, "the \"signature\" policy of " + quoted_name(spec.name));
    const sigstore::RootDocument& document = trusted_root();
    return fetch::SignatureCheck{to_policy(*spec.signature), document.root, document.sha256};
}

VerifyReport Client::verify(const std::string& ref, const SignaturePolicy& policy) {
    registry::KernelSpec spec = registry::resolve_ref(m_impl->registry, ref);
    if (!policy.issuer.empty() || !policy.identities.empty()) {
        check_policy(policy, "the signature policy given for " + quoted_name(ref));
        spec.signature = policy;
    }
    fetch::FetchRequest request = m_impl->request_for(spec);
    request.offline = true;
    request.reverify = true;
    fetch::Fetcher fetcher(m_impl->settings.cache_root, nullptr, m_impl->options.events);
    fetch::FetchOutcome outcome = fetcher.fetch(request);

    VerifyReport report;
    report.name = spec.name;
    report.repo_id = spec.repo_id;
    report.commit = outcome.commit;
    report.variant = outcome.variant;
    report.path = outcome.variant_dir.string();
    report.files_checked = outcome.files.size();
    report.digest_checked = outcome.metadata_digest_checked;
    if (outcome.signature) report.signature = api::signature_info(*outcome.signature);
    return report;
}

}  // namespace kernhub
