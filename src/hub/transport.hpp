// How the hub client reaches a hub: over HTTP(S) through the http module,
// or a static hub tree on disk (file:// endpoints, see examples/hub/make_hub.py).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "http/http.hpp"

namespace kernhub::hub {

// Safe to share between threads (an HTTP transport runs concurrent
// requests side by side on its session's multi handle, see http::Session).
// Per-call request counts come from http::requests_on_this_thread.
class Transport {
public:
    virtual ~Transport() = default;
    // GET with the body in memory. `url` is absolute (endpoint + path).
    // `limits` bound it (see http::Session::get); a file:// hub honours
    // only the body size.
    virtual http::Response get(const std::string& url, const http::GetLimits& limits) = 0;
    http::Response get(const std::string& url) { return get(url, http::GetLimits{}); }
    // GET streaming a 2xx body into `target`.
    virtual http::Response download(const std::string& url, http::BodyTarget& target) = 0;
    // HTTP requests made so far by every thread (0 for a file:// hub).
    virtual std::uint64_t requests() const = 0;
    // The clock waits and wall-clock reads go through (http::Policy::clock).
    virtual http::Clock& clock() { return http::real_clock(); }
};

struct TransportConfig {
    std::string endpoint;  // without a trailing '/'
    std::string token;     // may be empty
    // When set, the first HTTP request fails with Error(usage, this text)
    // instead of going out without the token the user meant to send.
    std::string token_problem;
    http::Policy policy;
    http::RetryObserver on_retry;
};

// Throws Error(usage) for an endpoint that is neither http(s):// nor file://.
std::unique_ptr<Transport> make_transport(const TransportConfig& config);

}  // namespace kernhub::hub
