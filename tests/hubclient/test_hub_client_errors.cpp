// HubClient against a scripted loopback server: the wire format of its
// requests, and how odd or failing hub answers map onto kernhub errors.
#include <catch2/catch.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "http/scripted_server.hpp"
#include "hub/hub_client.hpp"
#include "hub/transport.hpp"
#include "kernhub/error.hpp"

using kernhub::Error;
using kernhub::ErrorCode;
using kernhub::RepoType;
using kernhub::hub::HubClient;
using kernhub::hub::RepoRef;
using kernhub::hub::TransportConfig;
using kernhub::test::ScriptedReply;
using kernhub::test::ScriptedRequest;
using kernhub::test::ScriptedServer;

namespace {

const RepoRef k_repo{RepoType::kernel, "org/name"};
const std::string k_sha = "0123456789abcdef0123456789abcdef01234567";

std::unique_ptr<HubClient> errors_client(const std::string& endpoint, const std::string& token = "") {
    TransportConfig config;
    config.endpoint = endpoint;
    config.token = token;
    config.policy.retries = 0;
    return std::make_unique<HubClient>(endpoint, kernhub::hub::make_transport(config), !token.empty());
}

ScriptedReply reply(int status, std::string body, std::vector<std::pair<std::string, std::string>> headers = {}) {
    ScriptedReply r;
    r.status = status;
    r.body = std::move(body);
    r.headers = std::move(headers);
    return r;
}

// A server answering every request with the same reply.
std::unique_ptr<ScriptedServer> always(ScriptedReply answer) {
    return std::make_unique<ScriptedServer>([answer](const ScriptedRequest&, std::size_t) { return answer; });
}

Error error_from(const std::function<void()>& call) {
    try {
        call();
    } catch (const Error& e) {
        return e;
    }
    FAIL("no kernhub::Error was thrown");
    return Error(ErrorCode::ok, "");
}

}  // namespace

TEST_CASE("HubClient builds the protocol's URLs and sends the token", "[hub]") {
    ScriptedServer server([](const ScriptedRequest& request, std::size_t) {
        if (request.target.find("/revision/") != std::string::npos) return reply(200, "{\"sha\": \"" + k_sha + "\"}");
        return reply(200, "[]");
    });
    auto client = errors_client(server.url(), "hf_tok");
    CHECK(client->resolve_revision(k_repo, "refs/pr/1") == k_sha);
    CHECK(client->resolve_revision({RepoType::model, "org/model"}, "main") == k_sha);
    CHECK(client->list_tree(k_repo, k_sha, "build/a b").empty());
    auto requests = server.requests();
    REQUIRE(requests.size() == 3);
    CHECK(requests[0].target == "/api/kernels/org/name/revision/refs%2Fpr%2F1");
    CHECK(requests[1].target == "/api/models/org/model/revision/main");
    CHECK(requests[2].target == "/api/kernels/org/name/tree/" + k_sha + "/build/a%20b?recursive=true");
    for (const auto& request : requests) CHECK(request.header("authorization") == "Bearer hf_tok");
}

TEST_CASE("HubClient refuses revision answers without a valid commit id", "[hub]") {
    struct Case {
        std::string body;
        std::string says;
    };
    for (const Case& c : {Case{"not json", "malformed JSON"}, Case{"[]", "lacks a commit"},
                          Case{R"({"id": "org/name"})", "lacks a commit"}, Case{R"({"sha": 42})", "lacks a commit"},
                          Case{R"({"sha": "abc"})", "invalid commit id 'abc'"},
                          Case{"{\"sha\": \"" + std::string(40, 'A') + "\"}", "invalid commit id"}}) {
        INFO(c.body);
        auto server = always(reply(200, c.body));
        auto client = errors_client(server->url());
        Error error = error_from([&] { client->resolve_revision(k_repo, "main"); });
        CHECK(error.code() == ErrorCode::network);
        CHECK(error.message().find(c.says) != std::string::npos);
    }
}

TEST_CASE("HubClient refuses a revision answer's 64-hex commit only when it is not lowercase hex", "[hub]") {
    const std::string sha256 = std::string(32, '0') + std::string(32, 'f');
    auto good = always(reply(200, "{\"sha\": \"" + sha256 + "\"}"));
    CHECK(errors_client(good->url())->resolve_revision(k_repo, "main") == sha256);
    for (const std::string& bad : {std::string(63, 'a'), std::string(65, 'a'), std::string(64, 'F')}) {
        INFO(bad);
        auto server = always(reply(200, "{\"sha\": \"" + bad + "\"}"));
        Error error = error_from([&] { errors_client(server->url())->resolve_revision(k_repo, "main"); });
        CHECK(error.code() == ErrorCode::network);
        CHECK(error.message().find("invalid commit id") != std::string::npos);
    }
}

TEST_CASE("latest_version takes the vN branch of the highest N from one refs answer, with its commit", "[hub]") {
    const std::string a(40, 'a');
    const std::string b(64, 'b');
    const std::string c(40, 'c');
    const auto refs = [](const std::string& branches) {
        return R"({"branches": [)" + branches + R"(], "tags": [{"name": "v99", "targetCommit": "x"}]})";
    };
    const auto branch = [](const std::string& name, const std::string& commit) {
        return R"({"name": ")" + name + R"(", "ref": {"nested": {"name": "v1000"}}, "targetCommit": ")" + commit +
               R"("})";
    };
    struct Case {
        std::string body;
        std::optional<std::string> name;
        std::string commit;
    };
    for (const Case& one : {
             Case{refs(branch("v1", a) + "," + branch("v10", b) + "," + branch("v2", c) + "," + branch("main", c)),
                  "v10", b},
             // A later branch of the same number replaces an earlier one, as kernels' dict of versions does.
             Case{refs(branch("v3", a) + "," + branch("v03", c)), "v03", c},
             // Names that are no version: tags, "V4", "v4.0", "v".
             Case{refs(branch("main", a) + "," + branch("V4", a) + "," + branch("v4.0", a) + "," + branch("v", a)),
                  std::nullopt, ""},
             // N of any length is compared as the number it is, as Python's int() reads it.
             Case{refs(branch("v99999999999999999999", a) + "," + branch("v100000000000000000000", b) + "," +
                       branch("v7", c)),
                  "v100000000000000000000", b},
             Case{refs(""), std::nullopt, ""},
         }) {
        INFO(one.body);
        auto server = always(reply(200, one.body));
        auto client = errors_client(server->url());
        const std::optional<kernhub::hub::VersionBranch> latest = client->latest_version(k_repo);
        CHECK(latest.has_value() == one.name.has_value());
        if (latest && one.name) {
            CHECK(latest->name == *one.name);
            CHECK(latest->commit == one.commit);
        }
        REQUIRE(server->requests().size() == 1);
        CHECK(server->requests()[0].target == "/api/kernels/org/name/refs");
    }
    // The chosen branch's commit must be a commit id; a lower one's is not looked at.
    auto bad = always(reply(200, refs(branch("v1", "zz") + "," + branch("v2", std::string(40, 'A')))));
    Error error = error_from([&] { errors_client(bad->url())->latest_version(k_repo); });
    CHECK(error.code() == ErrorCode::network);
    CHECK(error.message().find("invalid commit id") != std::string::npos);
    CHECK(error.message().find("'v2'") != std::string::npos);
    auto lower_bad = always(reply(200, refs(branch("v1", "zz") + "," + branch("v2", a))));
    CHECK(errors_client(lower_bad->url())->latest_version(k_repo)->name == "v2");
    // Other branches, however many, crowd no version out.
    std::string many;
    for (int i = 0; i < 10001; ++i) many += branch("feature-" + std::to_string(i), a) + ",";
    auto crowded = always(reply(200, refs(many + branch("v7", c))));
    CHECK(errors_client(crowded->url())->latest_version(k_repo)->commit == c);
    // More version branches than are kept: said, with the limit's name.
    std::string versions;
    for (int i = 0; i <= 10000; ++i) versions += (i ? "," : "") + branch("v" + std::to_string(i), a);
    auto flooded = always(reply(200, refs(versions)));
    Error cut = error_from([&] { errors_client(flooded->url())->latest_version(k_repo); });
    CHECK(cut.code() == ErrorCode::network);
    CHECK(cut.message().find("k_max_branch_names") != std::string::npos);
    auto missing = always(reply(404, "{}", {{"X-Error-Code", "RepoNotFound"}}));
    CHECK(error_from([&] { errors_client(missing->url())->latest_version(k_repo); }).code() == ErrorCode::not_found);
}

TEST_CASE("HubClient maps hub error answers onto error codes", "[hub]") {
    SECTION("GatedRepo") {
        auto server = always(reply(403, "{}", {{"X-Error-Code", "GatedRepo"}}));
        Error error = error_from([&] { errors_client(server->url())->resolve_revision(k_repo, "main"); });
        CHECK(error.code() == ErrorCode::not_found);
        CHECK(error.message().find("gated") != std::string::npos);
    }
    SECTION("401 without a code") {
        auto server = always(reply(401, "{}"));
        Error error = error_from([&] { errors_client(server->url(), "hf_tok")->resolve_revision(k_repo, "main"); });
        CHECK(error.code() == ErrorCode::not_found);
        CHECK(error.message().find("check that your token can read it") != std::string::npos);
    }
    SECTION("429 after retries") {
        auto server = always(reply(429, "{}"));
        Error error = error_from([&] { errors_client(server->url())->resolve_revision(k_repo, "main"); });
        CHECK(error.code() == ErrorCode::network);
        CHECK(error.message().find("rate-limited") != std::string::npos);
    }
    SECTION("500 with X-Error-Message") {
        auto server = always(reply(500, "{}", {{"X-Error-Message", "backend exploded"}}));
        Error error = error_from([&] { errors_client(server->url())->resolve_revision(k_repo, "main"); });
        CHECK(error.code() == ErrorCode::network);
        CHECK(error.message().find("HTTP 500") != std::string::npos);
        CHECK(error.context() == "backend exploded");
    }
    SECTION("EntryNotFound on a download") {
        auto server = always(reply(404, "{}", {{"X-Error-Code", "EntryNotFound"}}));
        struct Sink : kernhub::http::BodyTarget {
            std::uint64_t size() const override { return 0; }
            void write(const char*, std::size_t) override { FAIL("an error body reached the target"); }
            void restart() override {}
        } sink;
        Error error = error_from([&] { errors_client(server->url())->download(k_repo, k_sha, "build/x.so", sink); });
        CHECK(error.code() == ErrorCode::not_found);
        CHECK(error.message().find("'build/x.so'") != std::string::npos);
    }
}

TEST_CASE("HubClient follows Link pagination on the same origin only", "[hub]") {
    const std::string page1 = R"([{"type": "file", "path": "build/a", "oid": "o1", "size": 1}])";
    const std::string page2 = R"([{"type": "file", "path": "build/b", "oid": "o2", "size": 2}])";
    SECTION("same origin: pages are joined") {
        ScriptedServer server([&](const ScriptedRequest& request, std::size_t) {
            if (request.target.find("cursor=1") != std::string::npos) return reply(200, page2);
            std::string next = "http://" + request.header("host") + "/api/kernels/org/name/tree/c/build?cursor=1";
            return reply(200, page1, {{"Link", "<" + next + ">; rel=\"next\""}});
        });
        auto entries = errors_client(server.url())->list_tree(k_repo, "c", "build");
        REQUIRE(entries.size() == 2);
        CHECK(entries[0].path == "build/a");
        CHECK(entries[1].path == "build/b");
        CHECK(entries[1].size == 2);
        CHECK(server.requests().size() == 2);
    }
    SECTION("another host: refused before it is fetched") {
        auto server =
            always(reply(200, page1, {{"Link", "<http://127.0.0.2:1/api/next?cursor=1&token=secret>; rel=\"next\""}}));
        Error error = error_from([&] { errors_client(server->url())->list_tree(k_repo, "c", "build"); });
        CHECK(error.code() == ErrorCode::network);
        CHECK(error.message().find("another host: http://127.0.0.2:1/api/next") != std::string::npos);
        CHECK(error.message().find("secret") == std::string::npos);
        CHECK(server->requests().size() == 1);
    }
    SECTION("a malformed page names the listing URL without its query") {
        auto server = always(reply(200, R"([{"type": "file"}])"));
        Error error = error_from([&] { errors_client(server->url())->list_tree(k_repo, "c", "build"); });
        CHECK(error.code() == ErrorCode::network);
        CHECK(error.message().find(server->url() + "/api/kernels/org/name/tree/c/build") != std::string::npos);
        CHECK(error.message().find("recursive") == std::string::npos);
    }
}
