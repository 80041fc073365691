// The trusted-publisher check (docs/ARCHITECTURE.md, "Trusted publishers"):
// the Python kernels library's default. Before anything of a repo that no
// registry names is requested from an http(s) hub, the hub's overview of
// the repo's organisation must mark it a trusted kernel publisher.
#include <algorithm>
#include <chrono>

#include "api/client_impl.hpp"
#include "common/hint.hpp"
#include "common/text.hpp"
#include "hub/hub_client.hpp"
#include "kernhub/error.hpp"

namespace kernhub {

namespace {

std::int64_t unix_now() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

bool is_http(const std::string& endpoint) {
    return endpoint.rfind("http://", 0) == 0 || endpoint.rfind("https://", 0) == 0;
}

Error refusal(const std::string& repo_id, const std::string& org, const std::string& why) {
    return Error(ErrorCode::verification,
                 "kernel repository " + quoted_name(repo_id) + " is not from a trusted kernel publisher: " + why +
                     "; if you trust it, allow the repo with KERNHUB_TRUST_REMOTE_CODE=" + repo_id +
                     " (1 trusts every repo), list its organisation " + quoted_name(org) +
                     " in KERNHUB_ALLOWED_ORGS, or name it in a registry",
                 hint::setting("trust_remote_code"));
}

}  // namespace

bool api::publisher_check_applies(const Settings& settings, const registry::KernelSpec& spec) {
    if (spec.registry_named || !is_http(settings.endpoint)) return false;
    if (settings.trust_all_repos) return false;
    if (std::find(settings.trusted_repos.begin(), settings.trusted_repos.end(), spec.repo_id) !=
        settings.trusted_repos.end()) {
        return false;
    }
    if (settings.allowed_orgs) {
        const std::string org = ascii_lowercase(spec.repo_id.substr(0, spec.repo_id.find('/')));
        const auto& orgs = *settings.allowed_orgs;
        if (std::find(orgs.begin(), orgs.end(), org) != orgs.end()) return false;
    }
    return true;
}

void Client::Impl::check_publisher(const registry::KernelSpec& spec) {
    if (!api::publisher_check_applies(settings, spec)) return;
    const std::string org = spec.repo_id.substr(0, spec.repo_id.find('/'));
    if (settings.offline) {
        // Nothing can be asked; what the cache holds was checked when it
        // was fetched (or came from elsewhere on purpose). Said once.
        if (!publisher_notice_given.exchange(true) && options.events != nullptr) {
            Event event;
            event.kind = Event::Kind::info;
            event.text = "note: the trusted-publisher check is skipped offline (first for " + spec.repo_id + ")";
            options.events->on_event(event);
        }
        return;
    }
    {
        std::lock_guard<std::mutex> lock(publisher_mutex);
        if (trusted_orgs.count(org) != 0) return;
    }
    const cache::RepoCache cache(settings.cache_root, spec.repo_type, spec.repo_id);
    const std::int64_t now = unix_now();
    if (const std::optional<cache::PublisherRecord> record = cache.read_publisher()) {
        const std::int64_t age = now - record->checked_at;
        if (record->endpoint == settings.endpoint && record->organization == org && age >= 0 &&
            age < cache::k_publisher_ttl_seconds) {
            std::lock_guard<std::mutex> lock(publisher_mutex);
            trusted_orgs.insert(org);
            return;
        }
    }
    // A hub that cannot be reached is a network failure (exit 5) as for any
    // request; a hub that answers without saying "trusted" is a refusal.
    const std::optional<std::string> overview = hub_client()->organization_overview(org);
    if (!overview) {
        throw refusal(spec.repo_id, org,
                      "the hub has no overview of the organisation " + quoted_name(org) + ", so it cannot say");
    }
    bool trusted = false;
    try {
        trusted = hub::is_trusted_publisher(*overview, "the hub");
    } catch (const Error& e) {
        throw refusal(spec.repo_id, org, "the hub cannot say (" + e.plain_message() + ")");
    }
    if (!trusted) {
        throw refusal(spec.repo_id, org,
                      "the hub's overview of " + quoted_name(org) + " does not mark it trustedKernelPublisher");
    }
    try {
        cache.write_publisher(cache::PublisherRecord{settings.endpoint, org, now});
    } catch (const Error& e) {
        if (e.code() != ErrorCode::internal) throw;
        if (options.events != nullptr) {
            Event event;
            event.kind = Event::Kind::info;
            event.text = "could not record the hub's trusted-publisher answer for " + quoted_name(org) +
                         " in the cache (" + e.plain_message() + "); the next run asks again";
            options.events->on_event(event);
        }
    }
    std::lock_guard<std::mutex> lock(publisher_mutex);
    trusted_orgs.insert(org);
}

}  // namespace kernhub
