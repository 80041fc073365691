// Helpers shared by the http::Session tests: a policy that retries without
// slow backoff, recognisable bodies, a HubClient over a test endpoint, and
// the error a call throws.
#pragma once

#include <catch2/catch.hpp>
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "http/http.hpp"
#include "hub/hub_client.hpp"
#include "hub/transport.hpp"
#include "kernhub/error.hpp"

namespace kernhub::test {

// Millisecond backoff, so that retry tests run fast; 5 s connect timeout.
inline http::Policy fast_policy(int retries = 3,
                                std::chrono::milliseconds backoff_max = std::chrono::milliseconds(20)) {
    http::Policy policy;
    policy.retries = retries;
    policy.backoff_base = std::chrono::milliseconds(1);
    policy.backoff_max = backoff_max;
    policy.connect_timeout_s = 5;
    return policy;
}

// `size` bytes of "block 0;block 1;...", so that an offset error shows.
inline std::string payload(std::size_t size) {
    std::string text;
    for (std::size_t i = 0; text.size() < size; ++i) text += "block " + std::to_string(i) + ";";
    text.resize(size);
    return text;
}

// A HubClient for `endpoint` over HTTP, without a token.
inline std::unique_ptr<hub::HubClient> hub_client_for(const std::string& endpoint, const http::Policy& policy) {
    hub::TransportConfig config;
    config.endpoint = endpoint;
    config.policy = policy;
    return std::make_unique<hub::HubClient>(endpoint, hub::make_transport(config), false);
}

// The kernhub::Error that `call` throws; the test fails, naming `what`,
// when it returns normally.
template <typename Call>
Error error_from(const char* what, Call&& call) {
    try {
        call();
    } catch (const Error& e) {
        return e;
    }
    FAIL("no kernhub::Error: " << what);
    return Error(ErrorCode::internal, "unreachable");
}

}  // namespace kernhub::test
