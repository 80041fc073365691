// The hub's JSON answers as HubClient reads them: the revision answer
// ({"sha": ...}), the refs answer behind the "available versions" hint, and
// a tree listing page with its Link header (pagination). The input's first
// line is the Link header, the rest the body every request is answered with.
// The bytes reach HubClient through its Transport interface, because
// libFuzzer needs thousands of runs a second; the HTTP layer under that
// interface is tested only against real servers on loopback.
#include <memory>

#include "fuzz_target.hpp"
#include "hub/hub_client.hpp"
#include "kernhub/error.hpp"

namespace {

namespace hub = kernhub::hub;
namespace http = kernhub::http;

const std::string k_endpoint = "http://hub.invalid";

class ReplayTransport final : public hub::Transport {
public:
    ReplayTransport(std::string link, std::string body) : m_link(std::move(link)), m_body(std::move(body)) {}

    http::Response get(const std::string& url, const http::GetLimits& limits) override {
        http::Response response;
        response.url = url;
        ++m_gets;
        // "vN" revisions are answered 404 so that the client asks for refs.
        if (url.find("/revision/v") != std::string::npos) {
            response.status = 404;
            return response;
        }
        response.status = 200;
        // The byte cap the real transport enforces while receiving.
        const std::size_t max_body = limits.max_body.value_or(std::size_t{64} << 20);
        if (m_body.size() > max_body) throw kernhub::Error(kernhub::ErrorCode::network, limits.over_body_message);
        // Only the first tree page carries the fuzzed Link header; later
        // pages end the listing, so a self-link cannot loop.
        if (url.find("/tree/") != std::string::npos && ++m_tree_pages > 1) {
            response.body = "[]";
            return response;
        }
        if (url.find("/tree/") != std::string::npos) response.headers["link"] = m_link;
        response.body = m_body;
        return response;
    }
    http::Response download(const std::string& url, http::BodyTarget&) override {
        http::Response response;
        response.url = url;
        response.status = 404;
        return response;
    }
    std::uint64_t requests() const override { return m_gets; }

private:
    std::string m_link;
    std::string m_body;
    std::uint64_t m_gets = 0;
    std::uint64_t m_tree_pages = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string input = fuzz::as_text(data, size);
    const std::size_t newline = input.find('\n');
    std::string link = newline == std::string::npos ? std::string() : input.substr(0, newline);
    std::string body = newline == std::string::npos ? input : input.substr(newline + 1);
    hub::HubClient client(k_endpoint, std::make_unique<ReplayTransport>(std::move(link), std::move(body)), false);
    const hub::RepoRef repo{kernhub::RepoType::kernel, "org/kernel"};
    fuzz::expect_error_or_success([&] { (void)client.resolve_revision(repo, "main"); });
    fuzz::expect_error_or_success([&] { (void)client.resolve_revision(repo, "v1"); });
    fuzz::expect_error_or_success(
        [&] { (void)client.list_tree(repo, "0123456789abcdef0123456789abcdef01234567", "build"); });
    return 0;
}
