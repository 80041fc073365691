// Waiting for the hub (Retry-After, RateLimit, Policy::max_wait),
// cancellation, and what a finished call leaves on the libcurl handle.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "http/http.hpp"
#include "http/scripted_server.hpp"
#include "http/session_support.hpp"
#include "kernhub/error.hpp"
#include "support/manual_clock.hpp"
#include "support/string_target.hpp"

using namespace kernhub;
using namespace kernhub::http;
using namespace kernhub::test;
using std::chrono::milliseconds;

namespace {

Response with_headers(std::map<std::string, std::string> headers) {
    Response response;
    response.status = 429;
    response.headers = std::move(headers);
    return response;
}

std::string http_date(std::time_t when) {
    std::tm parts{};
    gmtime_r(&when, &parts);
    char text[64];
    std::strftime(text, sizeof text, "%a, %d %b %Y %H:%M:%S GMT", &parts);
    return text;
}

// The first `status` reply carries `headers`; every later request gets a 200.
ScriptedServer::Handler first_then_ok(int status, std::vector<std::pair<std::string, std::string>> headers) {
    return [status, headers](const ScriptedRequest&, std::size_t index) {
        ScriptedReply reply;
        if (index == 0) {
            reply.status = status;
            reply.headers = headers;
        } else {
            reply.body = "ok";
        }
        return reply;
    };
}

// "retrying URL in N ms (...)" -> N.
long long delay_of(const std::string& note) {
    auto in = note.find(" in ");
    REQUIRE(in != std::string::npos);
    return std::stoll(note.substr(in + 4));
}

double wait_seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Counts body bytes where another thread can watch them arrive.
class WatchedTarget : public StringTarget {
public:
    void write(const char* bytes, std::size_t count) override {
        StringTarget::write(bytes, count);
        received += count;
    }
    std::atomic<std::size_t> received{0};
};

// Sets `flag` once `ready` holds, from another thread; joins on destruction.
class Canceller {
public:
    template <typename Ready>
    Canceller(std::atomic<bool>& flag, Ready ready)
        : m_thread([&flag, ready] {
              auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
              while (!ready() && std::chrono::steady_clock::now() < give_up) {
                  std::this_thread::sleep_for(std::chrono::milliseconds(10));
              }
              flag = true;
          }) {}
    ~Canceller() { m_thread.join(); }
    Canceller(const Canceller&) = delete;
    Canceller& operator=(const Canceller&) = delete;

private:
    std::thread m_thread;
};

// Overwrites the stack below the caller, where the frames of a finished
// call lay, so that a pointer into them that libcurl kept would find junk
// (and ASan's use-after-return detection a poisoned fake frame).
[[gnu::noinline]] void scrub_stack() {
    volatile char junk[64 << 10];
    for (std::size_t i = 0; i < sizeof junk; ++i) junk[i] = static_cast<char>(0xA5);
}

}  // namespace

TEST_CASE("requested_wait reads Retry-After and exhausted RateLimit quotas", "[http]") {
    CHECK_FALSE(requested_wait(with_headers({})));
    CHECK(requested_wait(with_headers({{"retry-after", "7"}})) == milliseconds(7000));
    CHECK(requested_wait(with_headers({{"retry-after", "0"}})) == milliseconds(0));
    CHECK_FALSE(requested_wait(with_headers({{"retry-after", "soon"}})));
    CHECK_FALSE(requested_wait(with_headers({{"retry-after", "-5"}})));
    // Far too long, not an overflow into a short or negative wait.
    CHECK(requested_wait(with_headers({{"retry-after", "99999999999999999999999"}})) > milliseconds(86400000));

    CHECK(requested_wait(with_headers({{"retry-after", "Wed, 21 Oct 2015 07:28:00 GMT"}})) == milliseconds(0));
    // Far enough ahead to overflow a clock's nanoseconds: saturated, never 0.
    for (const char* far : {"Sat, 01 Jan 2500 00:00:00 GMT", "Fri, 31 Dec 9999 23:59:59 GMT"}) {
        INFO(far);
        CHECK(requested_wait(with_headers({{"retry-after", far}})) > milliseconds(86400000));
    }
    auto dated = requested_wait(with_headers({{"retry-after", http_date(std::time(nullptr) + 100)}}));
    REQUIRE(dated);
    CHECK(*dated > milliseconds(95000));
    CHECK(*dated <= milliseconds(101000));

    CHECK(requested_wait(with_headers({{"ratelimit", "\"api\";r=0;t=55"}})) == milliseconds(55000));
    CHECK(requested_wait(with_headers({{"ratelimit", "\"api\"; r=0; t=55"}})) == milliseconds(55000));
    CHECK_FALSE(requested_wait(with_headers({{"ratelimit", "\"api\";r=3;t=55"}})));  // requests left
    CHECK_FALSE(requested_wait(with_headers({{"ratelimit", "\"api\";t=55"}})));
    CHECK_FALSE(requested_wait(with_headers({{"ratelimit", "\"api\";r=0"}})));
    CHECK_FALSE(requested_wait(with_headers({{"ratelimit", "\"api\";r=0;t=soon"}})));
    CHECK(requested_wait(with_headers({{"ratelimit", "\"api\";r=0;t=55, \"burst\";r=0;t=70, \"x\";r=1;t=900"}})) ==
          milliseconds(70000));
    // Both: the hub will not answer before the later of the two.
    CHECK(requested_wait(with_headers({{"retry-after", "10"}, {"ratelimit", "\"api\";r=0;t=30"}})) ==
          milliseconds(30000));
    CHECK(requested_wait(with_headers({{"retry-after", "40"}, {"ratelimit", "\"api\";r=0;t=30"}})) ==
          milliseconds(40000));
}

TEST_CASE("Session waits as long as the hub asks, beyond backoff_max", "[http]") {
    std::vector<std::pair<std::string, std::string>> headers;
    int status = 503;
    long long expected_ms = 30000;
    // The waits go through the Policy's clock, which a wait moves on at
    // once: the test checks the time asked for without spending it.
    auto clock = std::make_shared<ManualClock>();
    SECTION("Retry-After: 30") {
        headers = {{"Retry-After", "30"}};
    }
    SECTION("RateLimit with an exhausted quota on a 429 without Retry-After") {
        status = 429;
        headers = {{"RateLimit", "\"api\";r=0;t=30"}};
    }
    SECTION("Retry-After as an HTTP-date, read against the clock's wall time") {
        clock->advance(std::chrono::hours(24));  // the date is in the clock's future, not the machine's
        headers = {{"Retry-After", http_date(std::chrono::system_clock::to_time_t(clock->wall_now()) + 40)}};
        expected_ms = -1;  // 39 to 40 s: whole seconds, the clock's fraction
    }
    ScriptedServer server(first_then_ok(status, headers));
    Policy policy = fast_policy(2);  // backoff_max 20 ms
    policy.clock = clock;
    Session session(policy, "", "");
    std::vector<std::string> notes;
    session.set_retry_observer([&](const std::string& note) { notes.push_back(note); });
    Response response = session.get(server.url() + "/api/thing");
    CHECK(response.status == 200);
    REQUIRE(notes.size() == 1);
    if (expected_ms >= 0) {
        CHECK(delay_of(notes[0]) == expected_ms);
        CHECK(clock->slept() == milliseconds(expected_ms));
    } else {
        CHECK(delay_of(notes[0]) >= 39000);
        CHECK(delay_of(notes[0]) <= 40000);
        CHECK(clock->slept() == milliseconds(delay_of(notes[0])));
    }
    CHECK(server.requests().size() == 2);
}

TEST_CASE("Session waits on the real clock when the Policy gives none", "[http]") {
    ScriptedServer server(first_then_ok(503, {{"Retry-After", "1"}}));
    Session session(fast_policy(2), "", "");
    auto start = std::chrono::steady_clock::now();
    CHECK(session.get(server.url() + "/api/thing").status == 200);
    CHECK(wait_seconds_since(start) >= 0.95);
    CHECK(server.requests().size() == 2);
}

TEST_CASE("a wait that would end past the API deadline fails at once, on the Policy's clock", "[http]") {
    auto clock = std::make_shared<ManualClock>();
    ScriptedServer server([](const ScriptedRequest&, std::size_t) {
        ScriptedReply reply;
        reply.status = 503;
        reply.headers = {{"Retry-After", "20"}};
        return reply;
    });
    Policy policy = fast_policy(5);
    policy.clock = clock;
    policy.api_timeout = std::chrono::seconds(50);
    Session session(policy, "", "");
    const Error e = error_from("the session waited past its deadline", [&] { session.get(server.url() + "/api/x"); });
    CHECK(e.code() == ErrorCode::network);
    CHECK_THAT(e.message(), Catch::Contains("KERNHUB_API_TIMEOUT"));
    // Two waits of 20 s fit in 50 s; the third would end at 60 s.
    CHECK(clock->slept() == milliseconds(40000));
    CHECK(server.requests().size() == 3);
}

TEST_CASE("Session fails at once when the hub asks to wait longer than max_wait", "[http]") {
    std::vector<std::pair<std::string, std::string>> headers;
    int status = 429;
    std::string asked;
    Policy policy = fast_policy(3);
    SECTION("Retry-After over the default 60 s") {
        headers = {{"Retry-After", "120"}};
        asked = "120 s";
    }
    SECTION("RateLimit reset over the default 60 s on a 503") {
        status = 503;
        headers = {{"RateLimit", "\"api\";r=0;t=3600"}};
        asked = "3600 s";
    }
    SECTION("an HTTP-date centuries ahead saturates instead of wrapping to no wait") {
        // About 2.5e11 s ahead: more than the one-day limit, so the message
        // does not offer KERNHUB_MAX_WAIT.
        headers = {{"Retry-After", "Fri, 31 Dec 9999 23:59:59 GMT"}};
        asked = "2";
    }
    SECTION("max_wait 0 refuses any wait") {
        headers = {{"Retry-After", "1"}};
        policy.max_wait = std::chrono::seconds(0);
        asked = "1 s";
    }
    ScriptedServer server(first_then_ok(status, headers));
    Session session(policy, "", "");
    std::vector<std::string> notes;
    session.set_retry_observer([&](const std::string& note) { notes.push_back(note); });
    const Error e = error_from("the session waited instead of failing",
                               [&] { session.get(server.url() + "/api/thing?token=secret"); });
    CHECK(e.code() == ErrorCode::network);
    CHECK(e.message().find("asked to wait " + asked) != std::string::npos);
    CHECK(e.message().find("maximum of " + std::to_string(policy.max_wait.count()) + " s") != std::string::npos);
    if (asked == "2") {
        CHECK(e.message().find("one-day limit") != std::string::npos);
    } else {
        CHECK(e.message().find("KERNHUB_MAX_WAIT") != std::string::npos);
    }
    CHECK(e.message().find(server.url() + "/api/thing") != std::string::npos);
    CHECK(e.message().find("secret") == std::string::npos);
    CHECK(server.requests().size() == 1);
    CHECK(notes.empty());
}

TEST_CASE("Session keeps its own backoff under backoff_max when the hub gives no usable hint", "[http]") {
    std::vector<std::pair<std::string, std::string>> headers;
    SECTION("no hint at all") {}
    SECTION("a RateLimit quota with requests left") {
        headers = {{"RateLimit", "\"api\";r=40;t=3600"}};
    }
    ScriptedServer server([&](const ScriptedRequest&, std::size_t index) {
        ScriptedReply reply;
        if (index < 2) {
            reply.status = 503;
            reply.headers = headers;
        }
        return reply;
    });
    Policy policy = fast_policy(3);
    policy.backoff_base = std::chrono::milliseconds(60000);
    policy.backoff_max = std::chrono::milliseconds(30);
    policy.max_wait = std::chrono::seconds(1);
    Session session(policy, "", "");
    std::vector<std::string> notes;
    session.set_retry_observer([&](const std::string& note) { notes.push_back(note); });
    CHECK(session.get(server.url() + "/api/thing").status == 200);
    REQUIRE(notes.size() == 2);
    for (const auto& note : notes) CHECK(delay_of(note) <= 30);
}

TEST_CASE("HubClient says how long the hub asked to wait when it rate-limits", "[http]") {
    ScriptedServer server([](const ScriptedRequest&, std::size_t) {
        ScriptedReply reply;
        reply.status = 429;
        reply.headers = {{"Retry-After", "30"}};
        return reply;
    });
    auto client = hub_client_for(server.url(), fast_policy(0));
    const Error e = error_from("a 429 resolved a revision", [&] {
        client->resolve_revision({RepoType::kernel, "org/name"}, "main");
    });
    CHECK(e.code() == ErrorCode::network);
    CHECK(e.message().find("rate-limited") != std::string::npos);
    CHECK(e.message().find("asked to wait 30 s") != std::string::npos);
}

TEST_CASE("Session sends nothing when the cancel flag is already set", "[http]") {
    ScriptedServer server([](const ScriptedRequest&, std::size_t) { return ScriptedReply{}; });
    std::atomic<bool> cancel{true};
    Policy policy = fast_policy();
    policy.cancel = &cancel;
    Session session(policy, "", "");
    const Error e =
        error_from("a cancelled session fetched", [&] { session.get(server.url() + "/api/thing?token=secret"); });
    CHECK(e.code() == ErrorCode::interrupted);
    CHECK(e.message().find("interrupted while fetching " + server.url() + "/api/thing") != std::string::npos);
    CHECK(e.message().find("secret") == std::string::npos);
    CHECK(server.requests().empty());
    CHECK(session.requests() == 0);
}

TEST_CASE("Session ends a long Retry-After wait when the cancel flag is set", "[http]") {
    // A wait that ignored the flag would sleep 10 minutes, past ctest's
    // timeout for this test.
    ScriptedServer server(first_then_ok(503, {{"Retry-After", "600"}}));
    std::atomic<bool> cancel{false};
    Policy policy = fast_policy(2);
    policy.max_wait = std::chrono::seconds(3600);
    policy.api_timeout = std::chrono::seconds(3600);  // else the API deadline refuses the wait at once
    policy.cancel = &cancel;
    Session session(policy, "", "");
    std::atomic<bool> waiting{false};
    session.set_retry_observer([&](const std::string&) { waiting = true; });
    {
        Canceller canceller(cancel, [&] { return waiting.load(); });
        const Error e = error_from("the wait ran to its end", [&] { session.get(server.url() + "/api/thing"); });
        CHECK(e.code() == ErrorCode::interrupted);
    }
    CHECK(server.requests().size() == 1);
}

TEST_CASE("Session aborts a stalled download when cancelled and keeps the bytes", "[http]") {
    std::string body(5000, 'k');
    for (std::size_t i = 0; i < body.size(); i += 7) body[i] = static_cast<char>('a' + i % 26);
    ScriptedServer server([&](const ScriptedRequest&, std::size_t) {
        ScriptedReply reply;
        reply.body = body;
        reply.cut_after = 1000;
        reply.stall = std::chrono::seconds(60);  // sends 1000 bytes, then nothing
        return reply;
    });
    std::atomic<bool> cancel{false};
    Policy policy = fast_policy(0);
    policy.low_speed_time_s = 30;  // longer than any test: only the flag can end the transfer
    policy.cancel = &cancel;
    Session session(policy, "", "");
    WatchedTarget target;
    {
        Canceller canceller(cancel, [&] { return target.received.load() >= 1000; });
        const Error e =
            error_from("a stalled transfer completed", [&] { session.download(server.url() + "/file.bin", target); });
        CHECK(e.code() == ErrorCode::interrupted);
        CHECK(e.message().find(server.url() + "/file.bin") != std::string::npos);
    }
    CHECK(target.data == body.substr(0, 1000));
    CHECK(target.restarts == 0);
    CHECK(server.requests().size() == 1);
}

// Every way out of a transfer (a libcurl error that fills the error buffer,
// an exception from the body target, a cancel, a plain success) must leave
// no pointer into the finished call (error buffer, header list, per-call
// state) on the reused handle; ASan's detect_stack_use_after_return turns
// any later libcurl access to one into a failure. libcurl 7.88 happens not
// to read them after the call, so the old stack error buffer did not make
// this fail: it guards the fix against a libcurl that does.
TEST_CASE("Session leaves nothing of a finished call registered on its handle", "[http]") {
    ScriptedServer server([](const ScriptedRequest& request, std::size_t) {
        ScriptedReply reply;
        reply.body = request.target == "/big" ? std::string(4096, 'b') : "ok:" + request.header("range");
        return reply;
    });
    std::atomic<bool> cancel{false};
    Policy policy = fast_policy(0);
    policy.cancel = &cancel;
    auto session = std::make_unique<Session>(policy, "hf_hygiene_token", server.url());

    // A refused connection: libcurl writes its reason into the error buffer.
    const Error refused = error_from("port 9 answered", [&] { session->get("http://127.0.0.1:9/refused"); });
    CHECK(refused.code() == ErrorCode::network);
    CHECK_FALSE(refused.context().empty());
    scrub_stack();

    // A target that throws unwinds out of the transfer.
    struct Refusing : StringTarget {
        void write(const char*, std::size_t) override { throw std::runtime_error("refused by the target"); }
    } refusing;
    CHECK_THROWS_WITH(session->download(server.url() + "/big", refusing), "refused by the target");
    scrub_stack();

    // A resumed download sends Range and the token; the next request must
    // carry neither from the freed header list.
    StringTarget resumed;
    resumed.data = "abc";
    CHECK(session->download(server.url() + "/small", resumed).status == 200);
    scrub_stack();
    Response plain = session->get("http://localhost:" + server.url().substr(server.url().rfind(':') + 1) + "/plain");
    CHECK(plain.body == "ok:");
    scrub_stack();

    cancel = true;
    CHECK_THROWS_AS(session->get(server.url() + "/plain"), Error);
    cancel = false;
    scrub_stack();

    // A second refused connection reports its own reason, and the session is
    // torn down after all of the above.
    const Error again = error_from("port 9 answered", [&] { session->get("http://127.0.0.1:9/refused-again"); });
    CHECK(again.message().find("/refused-again") != std::string::npos);
    CHECK_FALSE(again.context().empty());
    scrub_stack();
    session.reset();

    auto requests = server.requests();
    REQUIRE(requests.size() == 3);
    CHECK(requests[1].header("range") == "bytes=3-");
    CHECK(requests[1].header("authorization") == "Bearer hf_hygiene_token");
    CHECK(requests[2].header("range").empty());
    CHECK(requests[2].header("authorization").empty());  // localhost is another origin than 127.0.0.1
}
