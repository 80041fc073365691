// Range answers that do not continue the bytes a download target holds: a
// 206 at the wrong offset, for another total or without Content-Range, and
// 416. Such an answer must never be appended; the target starts over once.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "http/http.hpp"
#include "http/scripted_server.hpp"
#include "http/session_support.hpp"
#include "kernhub/error.hpp"
#include "support/string_target.hpp"

using namespace kernhub;
using namespace kernhub::http;
using namespace kernhub::test;

namespace {

// A target that knows the size it should end up with and, like a partial
// file adopted from an earlier run, an ETag of its own.
class SizedTarget : public StringTarget {
public:
    std::optional<std::uint64_t> expected;
    std::string etag;
    std::optional<std::uint64_t> expected_size() const override { return expected; }
    std::string validator() const override { return etag; }
};

// Downloads `url` into `target` and checks the final status, that the
// target holds `body`, how often it restarted and how many requests the
// server saw.
void check_download(Session& session, const ScriptedServer& server, StringTarget& target, long status,
                    const std::string& body, int restarts, std::size_t requests) {
    CHECK(session.download(server.url() + "/file.bin", target).status == status);
    CHECK(target.data == body);
    CHECK(target.restarts == restarts);
    CHECK(server.requests().size() == requests);
}

ScriptedReply full(const std::string& body) {
    ScriptedReply reply;
    reply.headers = {{"ETag", "\"v1\""}};
    reply.body = body;
    return reply;
}

ScriptedReply cut(const std::string& body, std::size_t after) {
    ScriptedReply reply = full(body);
    reply.cut_after = after;
    return reply;
}

ScriptedReply partial(const std::string& content_range, std::string body) {
    ScriptedReply reply;
    reply.status = 206;
    reply.headers = {{"ETag", "\"v1\""}};
    if (!content_range.empty()) reply.headers.push_back({"Content-Range", content_range});
    reply.body = std::move(body);
    return reply;
}

}  // namespace

TEST_CASE("Session restarts from byte 0 when a 206 does not continue the target", "[http]") {
    const std::string body = payload(5000);
    std::string content_range;
    std::string resumed;  // the 206's body
    SECTION("Content-Range starts at byte 0 instead of the offset asked for") {
        content_range = "bytes 0-4999/5000";
        resumed = body;
    }
    SECTION("Content-Range total differs from the listed size") {
        content_range = "bytes 1000-5999/6000";
        resumed = payload(6000).substr(1000);
    }
    SECTION("no Content-Range") {
        resumed = body.substr(1000);
    }
    SECTION("a Content-Range that does not parse") {
        content_range = "bytes 1000-/5000";
        resumed = body.substr(1000);
    }
    ScriptedServer server([&](const ScriptedRequest&, std::size_t index) {
        if (index == 0) return cut(body, 1000);
        if (index == 1) return partial(content_range, resumed);
        return full(body);
    });
    Session session(fast_policy(2), "", "");
    std::vector<std::string> notes;
    session.set_retry_observer([&](const std::string& note) { notes.push_back(note); });
    SizedTarget target;
    target.expected = body.size();
    Response response = session.download(server.url() + "/file.bin", target);
    CHECK(response.status == 200);
    CHECK(target.data == body);
    CHECK(target.restarts == 1);

    auto requests = server.requests();
    REQUIRE(requests.size() == 3);
    CHECK(requests[1].header("range") == "bytes=1000-");
    CHECK(requests[2].header("range").empty());  // started over
    CHECK(requests[2].header("if-range").empty());
    REQUIRE(notes.size() == 2);  // the broken transfer, then the restart
    CHECK(notes[1].find("restarting " + server.url() + "/file.bin from byte 0") != std::string::npos);
}

TEST_CASE("Session appends a 206 that matches the offset and the listed size", "[http]") {
    const std::string body = payload(4000);
    ScriptedServer server([&](const ScriptedRequest&, std::size_t index) {
        if (index == 0) return cut(body, 1500);
        return partial("bytes 1500-3999/4000", body.substr(1500));
    });
    Session session(fast_policy(2), "", "");
    SizedTarget target;
    target.expected = body.size();
    check_download(session, server, target, 206, body, 0, 2);
}

TEST_CASE("Session gives up when the range answer is wrong again after starting over", "[http]") {
    const std::string body = payload(3000);
    ScriptedServer server([&](const ScriptedRequest&, std::size_t index) {
        if (index % 2 == 0) return cut(body, 1000);
        return partial("bytes 0-2999/3000", body);
    });
    Session session(fast_policy(5), "", "");
    StringTarget target;
    const Error e = error_from("a 206 at the wrong offset was accepted",
                               [&] { session.download(server.url() + "/file.bin?token=secret", target); });
    CHECK(e.code() == ErrorCode::network);
    CHECK(e.message().find(server.url() + "/file.bin") != std::string::npos);
    CHECK(e.message().find("starting at byte 0 instead of 1000") != std::string::npos);
    CHECK(e.message().find("secret") == std::string::npos);
    CHECK(server.requests().size() == 4);  // cut, bad 206, restart: cut, bad 206
    CHECK(target.restarts == 1);
    CHECK(target.data == body.substr(0, 1000));  // the second bad 206 was not appended either
}

TEST_CASE("Session treats a 416 on a target that holds every byte as complete", "[http]") {
    const std::string body = payload(5000);
    ScriptedServer server([&](const ScriptedRequest& request, std::size_t) {
        ScriptedReply reply;
        reply.status = request.header("range") == "bytes=5000-" ? 416 : 500;
        reply.headers = {{"Content-Range", "bytes */5000"}};
        return reply;
    });
    Session session(fast_policy(2), "", "");
    SizedTarget target;
    target.data = body;
    target.expected = body.size();
    target.etag = "\"v9\"";
    Response response = session.download(server.url() + "/file.bin", target);
    CHECK(response.status == 416);
    CHECK(is_complete_416(response, target));
    CHECK(target.data == body);
    CHECK(target.restarts == 0);
    auto requests = server.requests();
    REQUIRE(requests.size() == 1);
    CHECK(requests[0].header("if-range") == "\"v9\"");  // the target's own validator
}

TEST_CASE("Session restarts once after a 416 on an incomplete target", "[http]") {
    const std::string body = payload(5000);
    SizedTarget target;
    target.data = body.substr(0, 1000);
    target.expected = body.size();
    SECTION("the fresh request succeeds") {
        ScriptedServer server([&](const ScriptedRequest& request, std::size_t) {
            if (!request.header("range").empty()) {
                ScriptedReply reply;
                reply.status = 416;
                return reply;
            }
            return full(body);
        });
        Session session(fast_policy(2), "", "");
        check_download(session, server, target, 200, body, 1, 2);
    }
    SECTION("416 again fails with a network error") {
        ScriptedServer server([&](const ScriptedRequest&, std::size_t) {
            ScriptedReply reply;
            reply.status = 416;
            return reply;
        });
        Session session(fast_policy(2), "", "");
        const Error e =
            error_from("two 416 answers were accepted", [&] { session.download(server.url() + "/file.bin", target); });
        CHECK(e.code() == ErrorCode::network);
        CHECK(e.message().find("HTTP 416") != std::string::npos);
        CHECK(e.message().find(server.url() + "/file.bin") != std::string::npos);
        CHECK(server.requests().size() == 2);
        CHECK(target.restarts == 1);
    }
}

TEST_CASE("Session resumes an adopted partial target with the target's validator", "[http]") {
    const std::string body = payload(5000);
    ScriptedServer server([&](const ScriptedRequest& request, std::size_t) {
        if (request.header("range") == "bytes=1000-" && request.header("if-range") == "\"v7\"") {
            return partial("bytes 1000-4999/5000", body.substr(1000));
        }
        return full(body);
    });
    Session session(fast_policy(2), "", "");
    SizedTarget target;
    target.data = body.substr(0, 1000);
    target.expected = body.size();
    target.etag = "\"v7\"";
    check_download(session, server, target, 206, body, 0, 1);
}

TEST_CASE("HubClient::download accepts a 416 for a file already complete", "[http]") {
    const std::string body = payload(2048);
    const std::string commit(40, 'a');
    ScriptedServer server([&](const ScriptedRequest& request, std::size_t) {
        ScriptedReply reply;
        bool expected_path = request.target == "/kernels/org/name/resolve/" + commit + "/build/v/lib.so";
        reply.status = expected_path && request.header("range") == "bytes=2048-" ? 416 : 404;
        return reply;
    });
    auto client = hub_client_for(server.url(), fast_policy(1));
    SizedTarget target;
    target.data = body;
    target.expected = body.size();
    const hub::RepoRef repo{RepoType::kernel, "org/name"};
    CHECK_NOTHROW(client->download(repo, commit, "build/v/lib.so", target));
    CHECK(target.data == body);
    CHECK(target.restarts == 0);
    CHECK(server.requests().size() == 1);
}
