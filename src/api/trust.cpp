// The trusted-publisher check (docs/trust.md, "Trusted publishers"):
// the Python kernels library's default. Before anything of a repo that no
// registry names is requested from an http(s) hub, the hub's overview of
// the repo's organisation must mark it a trusted kernel publisher.
#include <algorithm>
#include <chrono>
#include <functional>
#include <future>
#include <system_error>

#include "api/client_impl.hpp"
#include "common/hint.hpp"
#include "common/text.hpp"
#include "http/http.hpp"
#include "hub/hub_client.hpp"
#include "kernhub/error.hpp"

namespace kernhub {

namespace {

std::int64_t unix_now() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

// Whether a trusted answer given at `checked_at` still stands at `now`.
bool answer_fresh(std::int64_t checked_at, std::int64_t now) {
    return checked_at <= now && now - checked_at < cache::k_publisher_ttl_seconds;
}

// Whether requests to `endpoint` go over the network: everything but a
// file:// tree does (hub::make_transport decides the same way).
bool over_network(const std::string& endpoint) {
    return endpoint.rfind("file://", 0) != 0;
}

Error refusal(const std::string& repo_id, const std::string& org, const std::string& why) {
    return Error(ErrorCode::verification,
                 "kernel repository " + quoted_name(repo_id) + " is not from a trusted kernel publisher: " + why +
                     "; if you trust it, name the repo in a registry, list its organisation " + quoted_name(org) +
                     " in KERNHUB_ALLOWED_ORGS, or allow it with KERNHUB_TRUST_REMOTE_CODE=" + repo_id +
                     " (1 trusts every repo)",
                 hint::setting("trust_remote_code"));
}

}  // namespace

bool api::publisher_check_applies(const Settings& settings, const registry::KernelSpec& spec) {
    if (spec.registry_named || !over_network(settings.endpoint)) return false;
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

// Asks the hub's overview of `org`; returns when it marks `org` a trusted
// kernel publisher. A hub that cannot be reached is a network failure
// (exit 5) as for any request; a hub that answers without saying
// "trusted" is a refusal.
void ClientImpl::ask_publisher(const std::string& repo_id, const std::string& org) {
    const std::optional<std::string> overview = hub_client()->organization_overview(org);
    if (!overview) {
        throw refusal(repo_id, org,
                      "the hub has no overview of the organisation " + quoted_name(org) + ", so it cannot say");
    }
    bool trusted = false;
    try {
        trusted = hub::is_trusted_publisher(*overview, "the hub");
    } catch (const Error& e) {
        throw refusal(repo_id, org, "the hub cannot say (" + e.plain_message() + ")");
    }
    if (!trusted) {
        throw refusal(repo_id, org,
                      "the hub's overview of " + quoted_name(org) + " does not mark it trustedKernelPublisher");
    }
}

namespace {

// The overview asked on a thread of its own (ClientImpl::start_publisher_check).
// The requests it sends are credited to the thread that passes the gate
// first, so the caller's count of its requests holds them.
class PublisherGate final : public fetch::Gate {
public:
    explicit PublisherGate(std::function<void()> check) {
        auto task = [this, check = std::move(check)] {
            const std::uint64_t before = http::requests_on_this_thread();
            try {
                check();
            } catch (...) {
                m_requests = http::requests_on_this_thread() - before;
                throw;
            }
            m_requests = http::requests_on_this_thread() - before;
        };
        try {
            m_result = std::async(std::launch::async, task).share();
        } catch (const std::system_error&) {
            // No thread to be had: the check runs now, as it did before.
            std::promise<void> done;
            try {
                task();
                done.set_value();
            } catch (...) {
                done.set_exception(std::current_exception());
            }
            m_result = done.get_future().share();
        }
    }
    // The check's thread ends before the gate goes (a fetch that failed
    // before passing it must not leave it running into a freed Client).
    ~PublisherGate() override {
        if (m_result.valid()) m_result.wait();
    }
    PublisherGate(const PublisherGate&) = delete;
    PublisherGate& operator=(const PublisherGate&) = delete;

    void pass() override {
        m_result.wait();
        if (!m_credited.exchange(true)) http::credit_requests_to_this_thread(m_requests);
        m_result.get();
    }

private:
    std::shared_future<void> m_result;
    std::uint64_t m_requests = 0;  // written by the task before m_result is ready
    std::atomic<bool> m_credited{false};
};

}  // namespace

std::shared_ptr<fetch::Gate> ClientImpl::start_publisher_check(const registry::KernelSpec& spec) {
    // What needs no request (not applicable, offline, an answer kept) is
    // settled here; only a question to the hub goes on beside the fetch.
    if (!publisher_question_needed(spec)) return nullptr;
    return std::make_shared<PublisherGate>([this, spec] { check_publisher(spec); });
}

bool ClientImpl::publisher_question_needed(const registry::KernelSpec& spec) {
    if (!api::publisher_check_applies(settings, spec)) return false;
    if (settings.offline) {
        check_publisher(spec);  // the notice
        return false;
    }
    const std::string org = spec.repo_id.substr(0, spec.repo_id.find('/'));
    const std::int64_t now = unix_now();
    std::lock_guard<std::mutex> lock(publisher_mutex);
    const auto it = trusted_orgs.find(org);
    return it == trusted_orgs.end() || !answer_fresh(it->second, now);
}

void ClientImpl::check_publisher(const registry::KernelSpec& spec) {
    if (!api::publisher_check_applies(settings, spec)) return;
    const std::string org = spec.repo_id.substr(0, spec.repo_id.find('/'));
    if (settings.offline) {
        // Nothing can be asked; what the cache holds was checked when it
        // was fetched (or came from elsewhere on purpose). Said once.
        if (!publisher_notice_given.exchange(true)) {
            say("note: the trusted-publisher check is skipped offline (first for " + spec.repo_id + ")");
        }
        return;
    }
    const std::int64_t now = unix_now();
    const auto fresh = [now](std::int64_t checked_at) { return answer_fresh(checked_at, now); };
    {
        std::lock_guard<std::mutex> lock(publisher_mutex);
        if (auto it = trusted_orgs.find(org); it != trusted_orgs.end() && fresh(it->second)) return;
    }
    // Kept without the endpoint's user name or password, if it has them.
    const std::string endpoint = http::redact(settings.endpoint);
    const cache::RepoCache cache(settings.cache_root, spec.repo_type, spec.repo_id);
    // A .kernhub that is a link (another user's planted folder) goes first,
    // as a fetch removes it, so no answer is read or written through it.
    cache.unlink_linked_folders();
    if (const std::optional<cache::PublisherRecord> record = cache.read_publisher()) {
        if (record->endpoint == endpoint && record->organization == org && fresh(record->checked_at)) {
            std::lock_guard<std::mutex> lock(publisher_mutex);
            trusted_orgs[org] = record->checked_at;
            return;
        }
    }
    ask_publisher(spec.repo_id, org);
    try {
        cache.write_publisher(cache::PublisherRecord{endpoint, org, now});
    } catch (const Error& e) {
        if (e.code() != ErrorCode::internal) throw;
        say("could not record the hub's trusted-publisher answer for " + quoted_name(org) + " in the cache (" +
            e.plain_message() + "); the next run asks again");
    }
    std::lock_guard<std::mutex> lock(publisher_mutex);
    trusted_orgs[org] = now;
}

}  // namespace kernhub
