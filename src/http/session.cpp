// The policy around exchanges (session_detail.hpp has the parts): redirects
// followed by hand, retries of transient failures after the hub's wait or
// our own backoff, the restart of a download whose resumed range does not
// fit, the API deadline, and the per-origin bound on downloads.
#include <algorithm>
#include <random>
#include <string_view>
#include <thread>
#include <utility>

#include "common/hint.hpp"
#include "http/session_detail.hpp"
#include "kernhub/error.hpp"

namespace kernhub::http {

namespace {

using std::chrono::milliseconds;

// Waits look at the cancel flag this often.
constexpr milliseconds k_cancel_slice{50};
// Starting over from byte 0 once recovers from a file that changed or a
// confused cache; a second bad range answer means the server cannot serve
// this file consistently, and looping would never end.
constexpr int k_max_range_restarts = 1;

// Requests this thread sent, for per-call counts (requests_on_this_thread).
thread_local std::uint64_t t_requests = 0;

// Transfer failures worth another attempt; a bad certificate, URL or
// protocol will fail the same way again.
bool is_transient(CURLcode code) {
    switch (code) {
        case CURLE_COULDNT_RESOLVE_HOST:
        case CURLE_COULDNT_RESOLVE_PROXY:
        case CURLE_COULDNT_CONNECT:
        case CURLE_OPERATION_TIMEDOUT:
        case CURLE_PARTIAL_FILE:
        case CURLE_SEND_ERROR:
        case CURLE_RECV_ERROR:
        case CURLE_GOT_NOTHING:
        case CURLE_HTTP2:
        case CURLE_HTTP2_STREAM:
        case CURLE_SSL_CONNECT_ERROR:
            return true;
        default:
            return false;
    }
}

// Sleeps for `delay` on `clock`, in short slices when a flag is set up so
// that setting it ends the wait soon: the cancel flag, or the download's
// stop flag (the fetch it belongs to failed elsewhere, so retrying is
// pointless).
void wait_for(Clock& clock, milliseconds delay, const std::atomic<bool>* cancel, const std::atomic<bool>* stop,
              const std::string& url) {
    if (cancel == nullptr && stop == nullptr) {
        clock.sleep_for(delay);
        return;
    }
    const auto until = clock.now() + delay;
    for (;;) {
        if (detail::cancelled(cancel)) detail::throw_interrupted(url);
        if (detail::cancelled(stop)) {
            throw Error(ErrorCode::interrupted,
                        "stopped retrying " + redact(url) + " because another file of the fetch failed");
        }
        const auto now = clock.now();
        if (now >= until) return;
        clock.sleep_for(std::min(k_cancel_slice, std::chrono::ceil<milliseconds>(until - now)));
    }
}

class RealClock final : public Clock {
public:
    std::chrono::steady_clock::time_point now() override { return std::chrono::steady_clock::now(); }
    std::chrono::system_clock::time_point wall_now() override { return std::chrono::system_clock::now(); }
    void sleep_for(milliseconds delay) override { std::this_thread::sleep_for(delay); }
};

std::string attempts_text(int tries) {
    return std::to_string(tries) + (tries == 1 ? " attempt" : " attempts");
}

// The headers a hub wait came from, for the error's context.
std::string hint_headers(const Response& response) {
    std::string text;
    for (const char* name : {"Retry-After", "RateLimit"}) {
        const std::string value = response.header(name);
        if (!value.empty()) text += (text.empty() ? "" : "; ") + std::string(name) + ": " + value;
    }
    return text;
}

// How to allow a wait that long: the variable (or Options::max_wait_seconds)
// takes whole seconds up to a day; beyond that there is nothing to raise.
std::string raise_hint(milliseconds asked) {
    const long long seconds = (asked.count() + 999) / 1000;
    if (seconds > 86400) return "that is more than the one-day limit, so ";
    return "raise KERNHUB_MAX_WAIT (or Options::max_wait_seconds) to " + std::to_string(seconds) +
           " to wait that long, or ";
}

// The API call's deadline passed (Policy::api_timeout, or the deadline its
// caller shares between requests).
Error deadline_error(const std::string& url, milliseconds timeout, const std::string& context) {
    return Error(ErrorCode::network,
                 "the hub did not answer " + redact(url) + " within the API deadline of " +
                     detail::whole_seconds(timeout) +
                     " (KERNHUB_API_TIMEOUT, retries included); check the endpoint and your network, or raise "
                     "KERNHUB_API_TIMEOUT (Options::api_timeout_seconds)",
                 context);
}

// Starts the target over when this answer cannot continue the bytes it
// holds (and says so to the observer): true then. Throws when the target
// already started over once in this call.
bool restart_target(const std::string& url, const Response& response, const Session::Attempt& attempt,
                    BodyTarget& target, int& range_restarts, const RetryObserver& on_retry) {
    const std::string why = detail::restart_reason(response, attempt, target);
    if (why.empty()) return false;
    if (range_restarts >= k_max_range_restarts) {
        throw Error(ErrorCode::network, "hub answered the resumed download of " + redact(url) + " with " + why +
                                            ", again after starting over; try again later");
    }
    ++range_restarts;
    target.restart();
    if (on_retry) on_retry("restarting " + redact(url) + " from byte 0 (" + why + ")");
    return true;
}

// Whether the outcome of a try is worth another; a transport failure that
// is not (a bad certificate, URL or protocol) throws.
bool worth_retrying(const std::string& url, const Response& response, const Session::Attempt& attempt) {
    const bool transport_failed = attempt.code != CURLE_OK;
    const bool retry =
        transport_failed ? is_transient(attempt.code) || attempt.too_slow : is_retryable_status(response.status);
    if (transport_failed && !retry) {
        throw Error(ErrorCode::network, "cannot fetch " + redact(url) + "; check the endpoint URL and TLS setup",
                    attempt.curl_message);
    }
    return retry;
}

// The last try failed in a way worth retrying, and none is left: a
// transport failure throws; a status stands as the call's response.
void give_up(const std::string& url, const Session::Attempt& attempt, int tries, const Policy& policy) {
    if (attempt.too_slow) {
        throw Error(ErrorCode::network, "downloading " + redact(url) + " stayed below the minimum rate of " +
                                            std::to_string(policy.min_rate) + " bytes/s over " +
                                            detail::whole_seconds(policy.min_rate_window) +
                                            " (KERNHUB_MIN_RATE, KERNHUB_MIN_RATE_WINDOW) in " +
                                            attempts_text(tries + 1) +
                                            "; check your network, or lower KERNHUB_MIN_RATE (Options::min_rate)");
    }
    if (attempt.code != CURLE_OK) {
        throw Error(ErrorCode::network,
                    "cannot fetch " + redact(url) + " after " + attempts_text(tries + 1) +
                        "; check the endpoint and your network, or work offline from the cache",
                    hint::setting("offline"), attempt.curl_message);
    }
}

// Our own wait before another try: exponential backoff with jitter, capped
// at backoff_max.
milliseconds backoff(const Policy& policy, int tries) {
    static thread_local std::minstd_rand jitter(std::random_device{}());
    auto base = policy.backoff_base.count() << std::min(tries, 10);
    std::uniform_int_distribution<long long> spread(base / 2, base + base / 2);
    return std::min(milliseconds(base > 0 ? spread(jitter) : 0), policy.backoff_max);
}

// The wait before another try: the one the hub asks for, when it asks
// (refused at once when longer than max_wait), else backoff.
milliseconds retry_delay(const std::string& url, const Response& response, bool transport_failed, int tries,
                         const Policy& policy) {
    const std::optional<milliseconds> asked =
        transport_failed ? std::nullopt : requested_wait(response, clock_of(policy));
    if (!asked) return backoff(policy, tries);
    if (*asked > policy.max_wait) {
        throw Error(ErrorCode::network,
                    "the hub asked to wait " + detail::whole_seconds(*asked) + " before retrying " + redact(url) +
                        " (HTTP " + std::to_string(response.status) + "), longer than the maximum of " +
                        detail::whole_seconds(policy.max_wait) + "; " + raise_hint(*asked) + "try again later",
                    hint_headers(response));
    }
    return *asked;  // the hub knows when it will answer; backoff_max does not apply
}

}  // namespace

namespace detail {

[[noreturn]] void throw_interrupted(const std::string& url) {
    throw Error(ErrorCode::interrupted, "interrupted while fetching " + redact(url) + "; fetch again to continue");
}

std::string whole_seconds(milliseconds wait) {
    return std::to_string((wait.count() + 999) / 1000) + " s";
}

}  // namespace detail

Clock& real_clock() {
    static RealClock clock;
    return clock;
}

Clock& clock_of(const Policy& policy) noexcept {
    return policy.clock ? *policy.clock : real_clock();
}

bool is_retryable_status(long status) {
    return status == 408 || status == 429 || status == 500 || status == 502 || status == 503 || status == 504;
}

Session::Session(Policy policy, std::string token, std::string token_origin)
    : m_policy(std::move(policy)), m_token(std::move(token)), m_token_origin(std::move(token_origin)) {
    // Room for every idle handle up front: ~HandleLease's push_back then
    // never allocates, so it cannot throw from a destructor.
    m_idle.reserve(detail::k_max_idle_handles);
}

Session::~Session() {
    // In a forked child the engine's thread and connections, and the idle
    // handles' connections, are the parent's: leave them.
    if (m_engine_owner.in_child()) abandon(m_engine);
    m_engine.reset();
    if (m_idle_owner.in_child()) abandon(m_idle);
}

Session::HostSlot::HostSlot(Session& owner, const std::string& url, bool download) : session(owner) {
    const int limit = session.m_policy.max_host_connections;
    const std::optional<Url> parsed = limit > 0 && download ? parse_url(url) : std::nullopt;
    if (!parsed) return;
    const std::string key = parsed->scheme + "://" + parsed->host + ":" + std::to_string(parsed->port);
    std::unique_lock<std::mutex> lock(session.m_slots_mutex);
    // A child made by fork() has none of its parent's transfers: the slots
    // they held are free here.
    if (session.m_slots_owner.take_over()) session.m_busy.clear();
    while (session.m_busy[key] >= limit) {
        if (detail::cancelled(session.m_policy.cancel)) detail::throw_interrupted(url);
        session.m_slot_freed.wait_for(lock, milliseconds(50));
    }
    ++session.m_busy[key];
    origin = key;
}

Session::HostSlot::~HostSlot() {
    if (origin.empty()) return;
    {
        std::lock_guard<std::mutex> guard(session.m_slots_mutex);
        if (--session.m_busy[origin] <= 0) session.m_busy.erase(origin);
    }
    session.m_slot_freed.notify_all();
}

Response Session::follow(const std::string& url, BodyTarget* target, Attempt& attempt) {
    std::string current = url;
    for (int hop = 0;; ++hop) {
        Response response = perform_once(current, target, attempt);
        if (attempt.code != CURLE_OK || !detail::is_redirect(response.status)) return response;
        std::string next = response.header("location");
        if (next.empty() || !parse_url(next)) {
            throw Error(ErrorCode::network,
                        "hub redirected " + redact(current) + " to an unsupported location '" + redact(next) + "'");
        }
        if (hop + 1 > m_policy.max_redirects) {
            throw Error(ErrorCode::network, "too many redirects fetching " + redact(url));
        }
        current = next;
    }
}

Response Session::run(const std::string& url, BodyTarget* target, const GetLimits* limits) {
    Attempt attempt;
    attempt.limits = limits;
    if (limits != nullptr) {
        attempt.deadline = limits->deadline ? *limits->deadline : clock().now() + m_policy.api_timeout;
    }
    auto past_deadline = [&](milliseconds ahead) {
        return attempt.deadline && clock().now() + ahead >= *attempt.deadline;
    };
    int range_restarts = 0;
    for (int tries = 0;;) {
        if (past_deadline(milliseconds(0))) throw deadline_error(url, m_policy.api_timeout, attempt.curl_message);
        Response response = follow(url, target, attempt);
        // A transfer that libcurl cut at the deadline (CURLOPT_TIMEOUT_MS).
        if (attempt.code != CURLE_OK && past_deadline(milliseconds(0))) {
            throw deadline_error(url, m_policy.api_timeout, attempt.curl_message);
        }
        if (target != nullptr && restart_target(url, response, attempt, *target, range_restarts, m_on_retry)) {
            continue;
        }
        if (!worth_retrying(url, response, attempt)) return response;
        if (tries >= m_policy.retries) {
            give_up(url, attempt, tries, m_policy);
            return response;
        }
        const bool transport_failed = attempt.code != CURLE_OK;
        const milliseconds delay = retry_delay(url, response, transport_failed, tries, m_policy);
        const std::string why = transport_failed ? attempt.curl_message : "HTTP " + std::to_string(response.status);
        // A wait that would end past the deadline fails now instead.
        if (past_deadline(delay)) throw deadline_error(url, m_policy.api_timeout, why);
        if (m_on_retry)
            m_on_retry("retrying " + redact(url) + " in " + std::to_string(delay.count()) + " ms (" + why + ")");
        wait_for(clock(), delay, m_policy.cancel, target != nullptr ? target->stop_flag() : nullptr, url);
        ++tries;
    }
}

std::uint64_t requests_on_this_thread() noexcept {
    return t_requests;
}

void credit_requests_to_this_thread(std::uint64_t count) noexcept {
    t_requests += count;
}

Response Session::get(const std::string& url, const GetLimits& limits) {
    return run(url, nullptr, &limits);
}

Response Session::download(const std::string& url, BodyTarget& target) {
    return run(url, &target, nullptr);
}

}  // namespace kernhub::http
