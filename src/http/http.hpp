// HTTP transfers over libcurl. The http module is the only owner of libcurl,
// which it binds at run time on the first request (curl_api.hpp): creating
// a Session costs no library load.
//
// Redirects are followed here, not by libcurl, so that the bearer token is
// attached to a hop only when that hop's scheme, host and port equal the
// token's origin (the hub endpoint). Transient failures (transport errors,
// 408, 429, 5xx) are retried: after the wait the hub asks for (Retry-After,
// RateLimit) when it asks for one no longer than Policy::max_wait, else
// after exponential backoff with jitter. A broken download resumes with
// Range + If-Range and restarts when the server answers 200 instead of 206
// or a 206 that does not continue the bytes already kept.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "http/fork_check.hpp"

namespace kernhub::http {

struct Url {
    std::string scheme;  // lowercase
    std::string host;    // lowercase
    int port = 0;        // explicit or the scheme default
    std::string target;  // path and query, starting with '/'
};

// Parses an absolute http(s) URL; nullopt for anything else.
std::optional<Url> parse_url(const std::string& url);
bool same_origin(const std::string& a, const std::string& b);
// The URL with userinfo and query string removed: safe for messages.
std::string redact(const std::string& url);

struct Response {
    long status = 0;
    std::map<std::string, std::string> headers;  // lowercase names
    std::string body;                            // the body for in-memory requests, or an error body
    std::string url;                             // the URL of the final hop
    std::string header(const std::string& name) const;
};

// The time a Session waits and measures by: its retry waits (backoff,
// Retry-After, a RateLimit reset), the API deadline, and the wall-clock
// time an HTTP-date in Retry-After and a ref's TTL are compared with. The
// real clock (real_clock()) sleeps; tests give a Policy one that moves on
// when waited on, so a retry after "Retry-After: 30" takes no wall time.
// A transfer's own timing (the stall guard, min_rate) is libcurl's and the
// session's engine's and stays on real time: bytes arrive in real time.
class Clock {
public:
    virtual ~Clock() = default;
    virtual std::chrono::steady_clock::time_point now() = 0;
    virtual std::chrono::system_clock::time_point wall_now() = 0;
    // Waits for `delay`. A wait that a flag can end is made of short calls.
    virtual void sleep_for(std::chrono::milliseconds delay) = 0;
};
// The process's clocks and std::this_thread::sleep_for.
Clock& real_clock();
struct Policy;
// The Policy's clock, or real_clock() when it names none.
Clock& clock_of(const Policy& policy) noexcept;

// How long the hub asked the client to wait before the next request:
// Retry-After (delta-seconds or an HTTP-date), or the reset time `t` of an
// exhausted quota (`r=0`) in a RateLimit field (`"api";r=0;t=55`); the
// longer of the two when both are present. A quota with requests left
// (r > 0) asks for nothing: its reset time is not why the request failed.
// nullopt when the response asks for no wait.
// An HTTP-date is read against `clock`'s wall time.
std::optional<std::chrono::milliseconds> requested_wait(const Response& response, Clock& clock = real_clock());

// The statuses a request is tried again for (408, 429, 500, 502, 503, 504).
bool is_retryable_status(long status);

// Where a download's body goes. size() is what has been kept so far; the
// next attempt asks for the bytes from there on.
class BodyTarget {
public:
    virtual ~BodyTarget() = default;
    virtual std::uint64_t size() const = 0;
    // May throw (for example when more bytes arrive than expected); the
    // transfer is then aborted and the exception rethrown to the caller.
    virtual void write(const char* data, std::size_t size) = 0;
    // The server ignored Range: drop everything kept so far.
    virtual void restart() = 0;
    // The full size of the body when known in advance (the hub listed it):
    // lets the session check Content-Range totals and treat a 416 on a
    // target that already holds every byte as complete.
    virtual std::optional<std::uint64_t> expected_size() const { return std::nullopt; }
    // An ETag to send as If-Range when the target already holds bytes before
    // any response of this session supplied one (a partial file adopted from
    // an earlier run). Empty: none.
    virtual std::string validator() const { return {}; }
    // Set once the body is no longer wanted (another file of the same fetch
    // failed): a wait before a retry ends at once, with Error(interrupted).
    // Null: never.
    virtual const std::atomic<bool>* stop_flag() const { return nullptr; }
};

// True for a 416 to a target that already holds every byte it expects: the
// resumed download had nothing left to fetch.
bool is_complete_416(const Response& response, const BodyTarget& target);

struct Policy {
    int retries = 3;
    std::chrono::milliseconds backoff_base{500};
    std::chrono::milliseconds backoff_max{10000};
    long connect_timeout_s = 30;
    long low_speed_time_s = 30;  // abort when under 10 B/s for this long
    // An API call (get) ends with Error(network) naming KERNHUB_API_TIMEOUT
    // when it has not succeeded this long after it started: every attempt,
    // redirect hop and retry wait counts (docs/ci-images.md, "Hub
    // protocol"). A hub that trickles its answer cannot hold a call longer.
    std::chrono::milliseconds api_timeout{60000};
    // A download (download) whose average rate over any min_rate_window is
    // below min_rate bytes per second is aborted; the attempt counts as a
    // transient failure (retried, resuming the bytes kept), and the last one
    // ends in Error(network) naming KERNHUB_MIN_RATE. 0: only the stall guard
    // above (10 B/s).
    std::uint64_t min_rate = 1024;
    std::chrono::milliseconds min_rate_window{30000};
    int max_redirects = 10;
    // The longest wait the hub may ask for; when it asks for more, the
    // request fails at once instead of sleeping. Hub-requested waits are not
    // capped by backoff_max, which bounds only our own backoff.
    std::chrono::seconds max_wait{60};
    // When non-null and set, transfers abort, waits end and the call throws
    // Error(interrupted); a download target keeps the bytes it holds.
    const std::atomic<bool>* cancel = nullptr;
    // The most downloads the session runs at once from one origin (scheme,
    // host and port); one beyond waits for one to end. API requests (get)
    // are not bounded. 0: no bound. The hub and the CDN it redirects to are
    // separate origins.
    int max_host_connections = 0;
    // A PEM file of certificate authorities to trust instead of the
    // system's (SSL_CERT_FILE); empty: libcurl's default.
    std::string ca_file;
    // False: every transfer runs on its calling thread with
    // curl_easy_perform, as when the session cannot start its thread (tests
    // use it to cover that path).
    bool use_engine = true;
    // The clock retry waits, the API deadline and wall-clock reads go
    // through; null: real_clock().
    std::shared_ptr<Clock> clock;
};

// Bounds of one in-memory GET beyond the Policy's (see Session::get).
struct GetLimits {
    // When the call must have succeeded, retries and waits included;
    // nullopt: Policy::api_timeout from the start of the call. Several
    // requests that are one operation (the pages of a listing) share one.
    std::optional<std::chrono::steady_clock::time_point> deadline;
    // The most body bytes kept; nullopt: 64 MiB.
    std::optional<std::size_t> max_body;
    // The Error(network) message when the body is larger than max_body,
    // naming the limit; empty: a generic one.
    std::string over_body_message;
};

// Called before each retry with a one-line description.
using RetryObserver = std::function<void(const std::string&)>;

// A Session may be shared between threads. Every transfer runs on one
// libcurl multi handle, driven by a thread of the session's (started on the
// first request): concurrent requests share its pool of connections, and
// transfers to an HTTP/2 origin are multiplexed on one connection. The
// calling thread waits for its transfer; header and progress callbacks run
// on the session's thread, while a download's body is handed through a
// bounded pipe to the calling thread, which runs BodyTarget::write. Where
// that thread cannot be had (or libcurl lacks the multi interface), each
// transfer runs on its caller with a handle of its own.
class Session {
public:
    Session(Policy policy, std::string token, std::string token_origin);
    ~Session();
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;

    // GET with the body kept in memory (API calls). Returns the final
    // response, whatever its status, after redirects and retries; throws
    // Error(network) when no response could be had, when the deadline
    // passes first, or when the body exceeds limits.max_body.
    Response get(const std::string& url, const GetLimits& limits = {});
    // GET streaming a 2xx body into `target`. Non-2xx final responses are
    // returned with their (bounded) body for the caller to map. A 206 must
    // continue at target.size() (and match expected_size() when known), or
    // the target restarts from zero, once per download; a 416 on a target
    // that already holds expected_size() bytes is returned as is, meaning
    // the body is complete (see is_complete_416). Throws Error(network)
    // when the server keeps answering ranges that do not fit, or sends
    // slower than Policy::min_rate in every attempt.
    Response download(const std::string& url, BodyTarget& target);

    // Requests sent so far by every thread, each redirect hop and retry
    // counted.
    std::uint64_t requests() const noexcept { return m_requests.load(std::memory_order_relaxed); }
    // Set before the session is shared between threads.
    void set_retry_observer(RetryObserver observer) { m_on_retry = std::move(observer); }
    // The Policy's clock, or real_clock().
    Clock& clock() const noexcept { return clock_of(m_policy); }

    struct Attempt;  // per-exchange state shared with libcurl callbacks (session_detail.hpp)

private:
    // The retries, waits and deadline of one call (session.cpp).
    Response run(const std::string& url, BodyTarget* target, const GetLimits* limits);
    // The redirect hops of one try (session.cpp).
    Response follow(const std::string& url, BodyTarget* target, Attempt& attempt);
    // One request and its response (engine.cpp).
    Response perform_once(const std::string& url, BodyTarget* target, Attempt& attempt);
    // Runs the prepared transfer on the engine, or on this thread without it.
    void transfer(Attempt& attempt);

    Policy m_policy;
    std::string m_token;
    std::string m_token_origin;
    std::atomic<std::uint64_t> m_requests{0};
    RetryObserver m_on_retry;
    // A libcurl easy handle serves one transfer at a time. Each exchange
    // (perform_once) leases an idle handle, or makes one, and returns it
    // when done, so threads sharing a session never share a handle. Handles
    // are made on first need, not by the constructor. See
    // docs/performance.md, "Connections and downloads".
    struct Handle;
    struct HandleLease;
    std::mutex m_idle_mutex;
    std::vector<std::unique_ptr<Handle>> m_idle;  // guarded by m_idle_mutex
    // The process the idle handles' connections belong to: a forked
    // child's first lease drops the inherited ones unclosed (fork_check.hpp).
    // Guarded by m_idle_mutex.
    ForkCheck m_idle_owner;
    // Downloads in flight per origin, for Policy::max_host_connections, and
    // the process they belong to (a forked child starts with none). Guarded
    // by m_slots_mutex.
    struct HostSlot;
    std::mutex m_slots_mutex;
    std::condition_variable m_slot_freed;
    std::map<std::string, int> m_busy;
    ForkCheck m_slots_owner;
    // The multi handle and its thread, made on the first transfer. Null
    // when no thread could be started (transfers then run on their
    // callers). A forked child leaves its parent's untouched and makes its
    // own. Guarded by m_engine_mutex.
    struct Engine;
    Engine* engine();
    std::mutex m_engine_mutex;
    std::unique_ptr<Engine> m_engine;
    ForkCheck m_engine_owner;
    bool m_engine_tried = false;
};

// Requests sent by the calling thread through any Session so far. A Client
// call runs on its caller's thread, so the difference before and after the
// call is that call's requests, whatever other threads send meanwhile.
std::uint64_t requests_on_this_thread() noexcept;
// Adds `count` to the calling thread's tally: a call that sends requests
// from worker threads of its own credits them to its caller's thread when
// they are done, so the count around the call stays whole.
void credit_requests_to_this_thread(std::uint64_t count) noexcept;

}  // namespace kernhub::http
