// http::Session against a scripted loopback server, for the server behaviours
// the test hub never shows: Range ignored (200 to a ranged request), redirect
// loops, relative and non-http redirects, and a token origin on another port.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "http/http.hpp"
#include "http/scripted_server.hpp"
#include "http/session_support.hpp"
#include "kernhub/error.hpp"
#include "support/kernel_hub.hpp"
#include "support/string_target.hpp"

using kernhub::Error;
using kernhub::ErrorCode;
using kernhub::http::BodyTarget;
using kernhub::http::Policy;
using kernhub::http::Response;
using kernhub::http::Session;
using kernhub::test::fast_policy;
using kernhub::test::payload;
using kernhub::test::ScriptedReply;
using kernhub::test::ScriptedRequest;
using kernhub::test::ScriptedServer;
using kernhub::test::StringTarget;

namespace {

ScriptedReply redirect(const std::string& location) {
    ScriptedReply reply;
    reply.status = 302;
    reply.headers = {{"Location", location}};
    return reply;
}

}  // namespace

TEST_CASE("Session restarts the target when a ranged request gets 200", "[http]") {
    const std::string body = payload(5000);
    ScriptedServer server([&](const ScriptedRequest&, std::size_t index) {
        ScriptedReply reply;
        reply.headers = {{"ETag", "\"v1\""}};
        reply.body = body;
        if (index == 0) reply.cut_after = 1234;  // broken mid-body; the retry ignores Range
        return reply;
    });
    Session session(fast_policy(2), "", "");
    StringTarget target;
    Response response = session.download(server.url() + "/file.bin", target);
    CHECK(response.status == 200);
    CHECK(target.restarts == 1);
    CHECK(target.data == body);
    CHECK(session.requests() == 2);

    auto requests = server.requests();
    REQUIRE(requests.size() == 2);
    CHECK(requests[0].header("range").empty());
    CHECK(requests[1].header("range") == "bytes=1234-");
    CHECK(requests[1].header("if-range") == "\"v1\"");  // the validator of the broken reply
}

TEST_CASE("Session appends a 206 continuation without restarting", "[http]") {
    const std::string body = payload(4000);
    ScriptedServer server([&](const ScriptedRequest& request, std::size_t index) {
        ScriptedReply reply;
        reply.headers = {{"ETag", "\"v1\""}};
        if (index == 0) {
            reply.body = body;
            reply.cut_after = 1500;
        } else {
            reply.status = request.header("range") == "bytes=1500-" ? 206 : 500;
            reply.headers.push_back({"Content-Range", "bytes 1500-3999/4000"});
            reply.body = body.substr(1500);
        }
        return reply;
    });
    Session session(fast_policy(2), "", "");
    StringTarget target;
    Response response = session.download(server.url() + "/file.bin", target);
    CHECK(response.status == 206);
    CHECK(target.restarts == 0);
    CHECK(target.data == body);
}

TEST_CASE("Session stops a redirect loop after max_redirects hops", "[http]") {
    ScriptedServer server([](const ScriptedRequest& request, std::size_t) {
        return redirect("http://" + request.header("host") + "/loop");
    });
    Policy policy = fast_policy(3);
    policy.max_redirects = 3;
    Session session(policy, "", "");
    try {
        session.get(server.url() + "/start?token=secret");
        FAIL("the redirect loop ended");
    } catch (const Error& e) {
        CHECK(e.code() == ErrorCode::network);
        CHECK(e.message().find("too many redirects") != std::string::npos);
        CHECK(e.message().find(server.url() + "/start") != std::string::npos);
        CHECK(e.message().find("secret") == std::string::npos);
    }
    // The first request and max_redirects hops, and a loop is not retried.
    CHECK(server.requests().size() == 4);
    CHECK(session.requests() == 4);
}

TEST_CASE("Session follows a relative redirect", "[http]") {
    ScriptedServer server([](const ScriptedRequest& request, std::size_t) {
        if (request.target == "/final") {
            ScriptedReply reply;
            reply.body = "arrived";
            return reply;
        }
        return redirect("/final");
    });
    Session session(fast_policy(), "", "");
    Response response = session.get(server.url() + "/start");
    CHECK(response.status == 200);
    CHECK(response.body == "arrived");
    CHECK(response.url == server.url() + "/final");
    CHECK(session.requests() == 2);
}

TEST_CASE("Session refuses a redirect to a non-http scheme", "[http]") {
    ScriptedServer server([](const ScriptedRequest&, std::size_t) { return redirect("file:///etc/passwd"); });
    Session session(fast_policy(), "", "");
    try {
        session.get(server.url() + "/start");
        FAIL("a file:// redirect was accepted");
    } catch (const Error& e) {
        CHECK(e.code() == ErrorCode::network);
        CHECK(e.message().find("unsupported location") != std::string::npos);
    }
    CHECK(server.requests().size() == 1);
}

TEST_CASE("Session drops the token on a redirect to another port of the same host", "[http]") {
    kernhub::test::KernelHub hub;
    const std::string target_url = hub.server().endpoint() + "/api/kernels/kernhub-test/vector-add/refs";
    ScriptedServer server([&](const ScriptedRequest&, std::size_t) { return redirect(target_url); });
    Session session(fast_policy(), "hf_scripted_token", server.url());
    Response response = session.get(server.url() + "/start");
    CHECK(response.status == 200);
    CHECK(response.url == target_url);
    REQUIRE(server.requests().size() == 1);
    CHECK(server.requests()[0].header("authorization") == "Bearer hf_scripted_token");
    auto requests = hub.server().stats()["requests"];
    REQUIRE(requests.size() == 1);
    CHECK(requests[0]["auth"] == false);
}
