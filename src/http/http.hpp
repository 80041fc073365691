// HTTP transfers over libcurl. The http module is the only owner of libcurl.
//
// Redirects are followed here, not by libcurl, so that the bearer token is
// attached to a hop only when that hop's scheme, host and port equal the
// token's origin (the hub endpoint). Transient failures (transport errors,
// 408, 429, 5xx) are retried with backoff that honours Retry-After; a broken
// download resumes with Range + If-Range and restarts when the server
// answers 200 instead of 206.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

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
};

struct Policy {
    int retries = 3;
    std::chrono::milliseconds backoff_base{500};
    std::chrono::milliseconds backoff_max{10000};
    long connect_timeout_s = 30;
    long low_speed_time_s = 30;  // abort when under 10 B/s for this long
    int max_redirects = 10;
};

// Called before each retry with a one-line description.
using RetryObserver = std::function<void(const std::string&)>;

class Session {
public:
    Session(Policy policy, std::string token, std::string token_origin);
    ~Session();
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;

    // GET with the body kept in memory (API calls). Returns the final
    // response, whatever its status, after redirects and retries; throws
    // Error(network) when no response could be had.
    Response get(const std::string& url);
    // GET streaming a 2xx body into `target`. Non-2xx final responses are
    // returned with their (bounded) body for the caller to map.
    Response download(const std::string& url, BodyTarget& target);

    // Requests sent so far, each redirect hop and retry counted.
    std::uint64_t requests() const noexcept { return m_requests; }
    void set_retry_observer(RetryObserver observer) { m_on_retry = std::move(observer); }

    struct Attempt;  // per-exchange state shared with libcurl callbacks (session.cpp)

private:
    Response run(const std::string& url, BodyTarget* target);
    Response follow(const std::string& url, BodyTarget* target, Attempt& attempt);
    Response perform_once(const std::string& url, BodyTarget* target, Attempt& attempt);

    Policy m_policy;
    std::string m_token;
    std::string m_token_origin;
    std::uint64_t m_requests = 0;
    RetryObserver m_on_retry;
    struct Handle;
    std::unique_ptr<Handle> m_handle;
};

}  // namespace kernhub::http
