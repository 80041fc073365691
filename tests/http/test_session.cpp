// http::Session against the real loopback test hub (hub on 127.0.0.1, LFS
// CDN on 127.0.0.2): redirects, token scoping, retries, Range resume.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "http/http.hpp"
#include "http/session_support.hpp"
#include "kernhub/error.hpp"
#include "support/kernel_hub.hpp"
#include "support/slurp.hpp"
#include "support/string_target.hpp"

using kernhub::Error;
using kernhub::ErrorCode;
using kernhub::http::BodyTarget;
using kernhub::http::Policy;
using kernhub::http::Response;
using kernhub::http::Session;
using kernhub::test::error_from;
using kernhub::test::fast_policy;
using kernhub::test::KernelHub;
using kernhub::test::StringTarget;
using nlohmann::json;

namespace {

// Accepts `limit` bytes, then refuses with an exception.
class LimitedTarget : public StringTarget {
public:
    explicit LimitedTarget(std::size_t limit) : m_limit(limit) {}
    void write(const char* bytes, std::size_t count) override {
        if (data.size() + count > m_limit) throw std::runtime_error("more bytes than expected");
        StringTarget::write(bytes, count);
    }

private:
    std::size_t m_limit;
};

std::string read_file(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    REQUIRE(in);
    return kernhub::test::read_all(in);
}

std::string lfs_url(KernelHub& hub, const std::string& repo = "kernhub-test/vector-add") {
    return hub.server().endpoint() + "/kernels/" + repo + "/resolve/main/build/" + kernhub::test::host_cpu_variant() +
           "/libvector_add.so";
}

std::string revision_url(KernelHub& hub, const std::string& repo, const std::string& rev) {
    return hub.server().endpoint() + "/api/kernels/" + repo + "/revision/" + rev;
}

// The requests the server logged for one host ("hub" or "cdn").
std::vector<json> requests_on(KernelHub& hub, const std::string& host) {
    std::vector<json> out;
    const json stats = hub.server().stats();  // the loop must not iterate into a temporary
    for (const auto& request : stats["requests"]) {
        if (request["host"] == host) out.push_back(request);
    }
    return out;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

TEST_CASE("Session::get fetches a revision document and a plain file", "[http]") {
    KernelHub hub;
    Session session(fast_policy(), "", "");
    std::string url = revision_url(hub, "kernhub-test/vector-add", "main");
    Response response = session.get(url);
    CHECK(response.status == 200);
    CHECK(response.url == url);
    CHECK(response.header("Content-Type") == "application/json");
    json doc = json::parse(response.body);
    CHECK(doc["id"] == "kernhub-test/vector-add");
    json index = json::parse(read_file(hub.root() / "_hub.json"));
    CHECK(doc["sha"] == index["repos"]["kernhub-test/vector-add"]["branches"]["main"]);
    CHECK(session.requests() == 1);

    Response readme = session.get(hub.server().endpoint() + "/kernels/kernhub-test/vector-add/resolve/main/README.md");
    CHECK(readme.status == 200);
    CHECK(readme.body == "vector-add for tests\n");
    CHECK(readme.header("x-repo-commit") == doc["sha"].get<std::string>());
    CHECK(session.requests() == 2);

    Response missing = session.get(revision_url(hub, "kernhub-test/vector-add", "nope"));
    CHECK(missing.status == 404);  // not retried, returned as is
    CHECK(missing.header("x-error-code") == "RevisionNotFound");
    CHECK(session.requests() == 3);
}

TEST_CASE("Session sends the token to the hub origin only, never to the CDN", "[http]") {
    kernhub::test::HubServerOptions options;
    options.token = kernhub::test::k_test_token;
    KernelHub hub(options);
    const std::string so = read_file(kernhub::test::vector_add_so());

    SECTION("token for the hub: private repo opens, the CDN hop goes without it") {
        Session session(fast_policy(), kernhub::test::k_test_token, hub.server().endpoint());
        CHECK(session.get(revision_url(hub, "kernhub-test/private", "main")).status == 200);
        StringTarget target;
        Response response = session.download(lfs_url(hub, "kernhub-test/private"), target);
        CHECK(response.status == 200);
        CHECK(response.url.rfind(hub.server().cdn() + "/lfs/", 0) == 0);  // the final hop
        CHECK(target.data == so);
        CHECK(target.restarts == 0);
        CHECK(session.requests() == 3);

        auto on_hub = requests_on(hub, "hub");
        auto on_cdn = requests_on(hub, "cdn");
        REQUIRE(on_hub.size() == 2);
        REQUIRE(on_cdn.size() == 1);
        for (const auto& request : on_hub) CHECK(request["auth"] == true);
        CHECK(on_hub[1]["status"] == 302);
        CHECK(on_cdn[0]["auth"] == false);
        CHECK(on_cdn[0]["status"] == 200);
    }
    SECTION("no token: the private repo answers 401 RepoNotFound") {
        Session session(fast_policy(), "", hub.server().endpoint());
        Response response = session.get(revision_url(hub, "kernhub-test/private", "main"));
        CHECK(response.status == 401);
        CHECK(response.header("x-error-code") == "RepoNotFound");
        CHECK(requests_on(hub, "hub").at(0)["auth"] == false);
    }
    SECTION("a token scoped to another origin is not sent to the hub") {
        Session session(fast_policy(), kernhub::test::k_test_token, hub.server().cdn());
        CHECK(session.get(revision_url(hub, "kernhub-test/private", "main")).status == 401);
        CHECK(requests_on(hub, "hub").at(0)["auth"] == false);
    }
}

TEST_CASE("Session::download streams exactly the LFS bytes through the 302", "[http]") {
    KernelHub hub;
    Session session(fast_policy(), "", hub.server().endpoint());
    StringTarget target;
    Response response = session.download(lfs_url(hub), target);
    CHECK(response.status == 200);
    CHECK(response.body.empty());  // the body went to the target
    CHECK(target.data == read_file(kernhub::test::vector_add_so()));
    CHECK(target.restarts == 0);
    CHECK(session.requests() == 2);

    SECTION("a missing file returns 404 and leaves the target empty") {
        StringTarget none;
        Response missing =
            session.download(hub.server().endpoint() + "/kernels/kernhub-test/vector-add/resolve/main/nope.so", none);
        CHECK(missing.status == 404);
        CHECK(missing.header("x-error-code") == "EntryNotFound");
        CHECK(missing.body.find("Entry not found") != std::string::npos);
        CHECK(none.data.empty());
    }
    SECTION("max_redirects = 0 refuses the CDN hop") {
        Policy policy = fast_policy();
        policy.max_redirects = 0;
        Session strict(policy, "", hub.server().endpoint());
        StringTarget unused;
        try {
            strict.download(lfs_url(hub), unused);
            FAIL("a redirect was followed with max_redirects = 0");
        } catch (const Error& e) {
            CHECK(e.code() == ErrorCode::network);
            CHECK(e.message().find("too many redirects") != std::string::npos);
        }
        CHECK(strict.requests() == 1);  // not retried
        CHECK(unused.data.empty());
    }
}

TEST_CASE("Session retries 503 with Retry-After 0 and counts every request", "[http]") {
    KernelHub hub;
    hub.server().add_faults(json::array(
        {{{"match", "/revision/main"}, {"action", "status"}, {"status", 503}, {"retry_after", "0"}, {"count", 2}}}));
    Session session(fast_policy(3), "", "");
    std::vector<std::string> notes;
    session.set_retry_observer([&](const std::string& note) { notes.push_back(note); });
    Response response = session.get(revision_url(hub, "kernhub-test/vector-add", "main"));
    CHECK(response.status == 200);
    CHECK(json::parse(response.body)["id"] == "kernhub-test/vector-add");
    CHECK(session.requests() == 3);
    CHECK(hub.server().count_requests("/revision/main") == 3);
    REQUIRE(notes.size() == 2);
    CHECK(notes[0].find("HTTP 503") != std::string::npos);
    CHECK(notes[0].find("/revision/main") != std::string::npos);
}

TEST_CASE("Session honours Retry-After on 429 and bounds it with max_wait", "[http]") {
    KernelHub hub;
    SECTION("Retry-After: 1 waits about a second, beyond backoff_max") {
        hub.server().add_faults(
            json::array({{{"match", "/refs"}, {"action", "status"}, {"status", 429}, {"retry_after", "1"}}}));
        Session session(fast_policy(2), "", "");  // backoff_max 20 ms
        auto start = std::chrono::steady_clock::now();
        Response response = session.get(hub.server().endpoint() + "/api/kernels/kernhub-test/vector-add/refs");
        CHECK(seconds_since(start) >= 0.9);
        CHECK(response.status == 200);
        CHECK(session.requests() == 2);
    }
    SECTION("Retry-After: 30 over max_wait fails at once") {
        hub.server().add_faults(
            json::array({{{"match", "/refs"}, {"action", "status"}, {"status", 503}, {"retry_after", "30"}}}));
        Policy policy = fast_policy(2);
        policy.max_wait = std::chrono::seconds(10);
        Session session(policy, "", "");
        const Error e = error_from("the session waited for 30 s", [&] {
            session.get(hub.server().endpoint() + "/api/kernels/kernhub-test/vector-add/refs");
        });
        CHECK(e.code() == ErrorCode::network);
        CHECK(e.message().find("asked to wait 30 s") != std::string::npos);
        CHECK(e.message().find("maximum of 10 s") != std::string::npos);
        CHECK(e.message().find("KERNHUB_MAX_WAIT") != std::string::npos);
        CHECK(session.requests() == 1);
        CHECK(hub.server().count_requests("/refs") == 1);
    }
}

TEST_CASE("Session returns the last 503 when retries run out", "[http]") {
    KernelHub hub;
    hub.server().add_faults(json::array(
        {{{"match", "/revision/"}, {"action", "status"}, {"status", 503}, {"retry_after", "0"}, {"count", -1}}}));
    Session session(fast_policy(2), "", "");
    int retries_seen = 0;
    session.set_retry_observer([&](const std::string&) { ++retries_seen; });
    Response response = session.get(revision_url(hub, "kernhub-test/vector-add", "main"));
    CHECK(response.status == 503);
    CHECK(response.body.find("Injected fault") != std::string::npos);
    CHECK(session.requests() == 3);
    CHECK(retries_seen == 2);
    CHECK(hub.server().count_requests("/revision/") == 3);
}

TEST_CASE("Session transport failure throws network with a redacted URL", "[http]") {
    const std::string url = "http://user:secret@127.0.0.1:9/api/kernels/org/name?token=secret";
    for (int retries : {0, 1}) {
        Session session(fast_policy(retries), "hf_secret_token", "http://127.0.0.1:9");
        INFO("retries = " << retries);
        try {
            session.get(url);
            FAIL("a closed port answered");
        } catch (const Error& e) {
            CHECK(e.code() == ErrorCode::network);
            CHECK(e.message().find("http://127.0.0.1:9/api/kernels/org/name") != std::string::npos);
            CHECK(e.message().find(retries == 0 ? "after 1 attempt;" : "after 2 attempts;") != std::string::npos);
            CHECK(std::string(e.what()).find("secret") == std::string::npos);
            CHECK_FALSE(e.context().empty());  // libcurl's reason
        }
        CHECK(session.requests() == static_cast<std::uint64_t>(retries + 1));
    }
}

TEST_CASE("Session resumes a truncated LFS download with Range", "[http]") {
    KernelHub hub;
    const std::string so = read_file(kernhub::test::vector_add_so());
    REQUIRE(so.size() > 3000);
    hub.server().add_faults(
        json::array({{{"match", "/lfs/"}, {"action", "truncate"}, {"after_bytes", 1000}, {"count", 2}}}));
    Session session(fast_policy(3), "", hub.server().endpoint());
    StringTarget target;
    Response response = session.download(lfs_url(hub), target);
    CHECK(response.status == 206);
    CHECK(response.header("content-range") ==
          "bytes 2000-" + std::to_string(so.size() - 1) + "/" + std::to_string(so.size()));
    CHECK(target.data == so);
    CHECK(target.restarts == 0);
    CHECK(session.requests() == 6);  // (302 + CDN) x 3

    auto on_cdn = requests_on(hub, "cdn");
    REQUIRE(on_cdn.size() == 3);
    CHECK(on_cdn[0]["range"].is_null());
    CHECK(on_cdn[1]["range"] == "bytes=1000-");
    CHECK(on_cdn[2]["range"] == "bytes=2000-");
    CHECK(on_cdn[1]["status"] == 206);
    CHECK(on_cdn[2]["status"] == 206);
}

TEST_CASE("Session aborts when the body target throws", "[http]") {
    KernelHub hub;
    Session session(fast_policy(3), "", hub.server().endpoint());
    LimitedTarget target(100);
    CHECK_THROWS_WITH(session.download(lfs_url(hub), target), "more bytes than expected");
    CHECK(target.data.size() <= 100);
    CHECK(hub.server().count_requests("/lfs/") == 1);  // a target error is not retried
    CHECK(session.requests() == 2);

    // The session stays usable.
    StringTarget next;
    CHECK(session.download(lfs_url(hub), next).status == 200);
    CHECK(next.data == read_file(kernhub::test::vector_add_so()));
}
