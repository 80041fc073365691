// URL parsing, origin comparison and redaction (src/http/url.cpp).
#include <catch2/catch.hpp>

#include <optional>
#include <string>
#include <vector>

#include "http/http.hpp"

using kernhub::http::parse_url;
using kernhub::http::redact;
using kernhub::http::same_origin;

namespace {

struct UrlCase {
    std::string input;
    std::string scheme;
    std::string host;
    int port;
    std::string target;
};

}  // namespace

TEST_CASE("parse_url splits absolute http(s) URLs", "[http]") {
    const std::vector<UrlCase> cases = {
        {"http://example.com", "http", "example.com", 80, "/"},
        {"https://example.com", "https", "example.com", 443, "/"},
        {"http://example.com/", "http", "example.com", 80, "/"},
        {"http://example.com:8080", "http", "example.com", 8080, "/"},
        {"https://huggingface.co/api/kernels/org/name/revision/main", "https", "huggingface.co", 443,
         "/api/kernels/org/name/revision/main"},
        {"HTTPS://HuggingFace.CO:8443/A/B?x=Y", "https", "huggingface.co", 8443, "/A/B?x=Y"},
        {"http://127.0.0.1:9/x", "http", "127.0.0.1", 9, "/x"},
        {"https://example.com:80/", "https", "example.com", 80, "/"},
        {"http://example.com:443/", "http", "example.com", 443, "/"},
        {"http://user:secret@example.com:81/p?q=1", "http", "example.com", 81, "/p?q=1"},
        {"http://user@example.com/p", "http", "example.com", 80, "/p"},
        {"http://a:b@c@example.com/p", "http", "example.com", 80, "/p"},  // the last '@' ends the userinfo
        {"http://example.com/a@b/c", "http", "example.com", 80, "/a@b/c"},
        {"http://[::1]:8080/x", "http", "[::1]", 8080, "/x"},
        {"http://[::1]/x", "http", "[::1]", 80, "/x"},
        {"https://[2001:db8::1]", "https", "[2001:db8::1]", 443, "/"},
        {"http://example.com:65535/", "http", "example.com", 65535, "/"},
    };
    for (const auto& c : cases) {
        INFO(c.input);
        auto url = parse_url(c.input);
        REQUIRE(url.has_value());
        CHECK(url->scheme == c.scheme);
        CHECK(url->host == c.host);
        CHECK(url->port == c.port);
        CHECK(url->target == c.target);
    }
}

TEST_CASE("parse_url refuses what is not an absolute http(s) URL", "[http]") {
    const std::vector<std::string> bad = {
        "",
        "example.com/path",
        "//example.com/path",
        "http:/example.com",
        "ftp://example.com/file",
        "file:///tmp/hub",
        "ws://example.com/",
        "gopher://example.com:70/",
        "http://",
        "http:///path",
        "https://?x=1",
        "http://:8080/",
        "http://user:pw@/path",
        "http://example.com:abc/",
        "http://example.com:80a/",
        "http://example.com:-1/",
        "http://example.com:/",
        "http://example.com:123456/",
        "http://[::1]:x/",
    };
    for (const auto& input : bad) {
        INFO(input);
        CHECK_FALSE(parse_url(input).has_value());
    }
}

// BUG (src/http/url.cpp:26-33, parse_url, the port branch): any 1-5 digit
// port is accepted, so 0 and 65536..99999 parse. libcurl then fails such a
// URL at transfer time (65536+: CURLE_URL_MALFORMAT, 0: cannot connect),
// which Session treats as a transient transport failure: it retries with
// backoff and ends in "cannot fetch ... check the endpoint and your network"
// instead of make_transport rejecting the endpoint up front as a usage
// error. Fix: after std::stoi, return nullopt unless 1 <= port <= 65535.
TEST_CASE("parse_url refuses ports outside 1..65535", "[http]") {
    for (const std::string input :
         {"http://example.com:0/", "http://example.com:65536/", "http://example.com:99999/"}) {
        INFO(input);
        CHECK_FALSE(parse_url(input).has_value());
    }
}

// BUG (src/http/url.cpp:23, parse_url): Url::target is documented as "path
// and query, starting with '/'", but when the authority is followed directly
// by '?' or '#' the target is the bare query ("?x=1"). Nothing reads target
// yet, so this is latent. Fix: prefix '/' when url[target_start] != '/'.
TEST_CASE("parse_url target always starts with '/'", "[http]") {
    auto query = parse_url("http://example.com?x=1");
    REQUIRE(query.has_value());
    CHECK(query->host == "example.com");
    CHECK(query->target == "/?x=1");
    auto fragment = parse_url("http://example.com:81#top");
    REQUIRE(fragment.has_value());
    CHECK(fragment->port == 81);
    CHECK(fragment->target.rfind('/', 0) == 0);
}

TEST_CASE("same_origin compares scheme, host and port", "[http]") {
    struct Case {
        std::string a, b;
        bool same;
    };
    const std::vector<Case> cases = {
        {"http://hub.test/a", "http://hub.test/b?c=d", true},
        {"http://hub.test", "http://hub.test:80/", true},
        {"https://hub.test/x", "https://hub.test:443/y", true},
        {"HTTP://HUB.Test/x", "http://hub.test/x", true},
        {"http://user:pw@hub.test/", "http://hub.test/", true},
        {"http://127.0.0.1:8000/api", "http://127.0.0.1:8000/resolve", true},
        {"http://[::1]:8000/", "http://[::1]:8000/x", true},
        {"http://hub.test/", "https://hub.test/", false},
        {"http://hub.test:443/", "https://hub.test/", false},
        {"https://hub.test:80/", "http://hub.test/", false},
        {"http://hub.test:8080/", "http://hub.test/", false},
        {"http://hub.test:8080/", "http://hub.test:8081/", false},
        {"http://hub.test/", "http://cdn.hub.test/", false},
        {"http://hub.test/", "http://hub.test.evil.example/", false},
        {"http://hub.test@evil.example/", "http://hub.test/", false},
        {"http://127.0.0.1:8000/", "http://127.0.0.2:8000/", false},
        {"http://[::1]:8000/", "http://[::2]:8000/", false},
        {"file:///hub", "file:///hub", false},
        {"http://hub.test/", "file:///hub", false},
        {"", "", false},
        {"not a url", "not a url", false},
    };
    for (const auto& c : cases) {
        INFO(c.a << " vs " << c.b);
        CHECK(same_origin(c.a, c.b) == c.same);
        CHECK(same_origin(c.b, c.a) == c.same);
    }
}

TEST_CASE("redact drops userinfo, query strings and fragments", "[http]") {
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"http://hub.test/api/x", "http://hub.test/api/x"},
        {"http://user:secret@hub.test/api/x", "http://hub.test/api/x"},
        {"http://user:secret@hub.test", "http://hub.test"},
        {"https://token@hub.test:8443/a", "https://hub.test:8443/a"},
        {"https://hub.test/a?token=hf_secret&x=1", "https://hub.test/a"},
        {"https://hub.test/a#access_token=secret", "https://hub.test/a"},
        {"https://hub.test/a?x=1#frag", "https://hub.test/a"},
        {"https://u:p@hub.test/lfs/abc?X-Amz-Signature=deadbeef#f", "https://hub.test/lfs/abc"},
        {"http://hub.test/path@with-at", "http://hub.test/path@with-at"},
        {"http://hub.test?token=secret", "http://hub.test"},
        {"file:///tmp/hub?token=secret", "file:///tmp/hub"},
        {"not a url?token=secret", "not a url"},
        {"", ""},
    };
    for (const auto& [input, expected] : cases) {
        INFO(input);
        std::string out = redact(input);
        CHECK(out == expected);
        CHECK(out.find("secret") == std::string::npos);
    }
}
