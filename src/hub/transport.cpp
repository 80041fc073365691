#include "hub/transport.hpp"

#include <cctype>
#include <filesystem>
#include <fstream>

#include "kernhub/error.hpp"
#include "store/cache.hpp"

namespace kernhub::hub {

namespace {

class HttpTransport final : public Transport {
public:
    explicit HttpTransport(const TransportConfig& config) : m_session(config.policy, config.token, config.endpoint) {
        if (config.on_retry) m_session.set_retry_observer(config.on_retry);
    }
    http::Response get(const std::string& url) override { return m_session.get(url); }
    http::Response download(const std::string& url, http::BodyTarget& target) override {
        return m_session.download(url, target);
    }
    std::uint64_t requests() const override { return m_session.requests(); }

private:
    http::Session m_session;
};

// A static hub tree on disk: the URL path names a file under the root.
// A missing file answers 404 without X-Error-Code, as a static web server
// serving the same tree would.
class FileTransport final : public Transport {
public:
    explicit FileTransport(std::string endpoint) : m_endpoint(std::move(endpoint)) {}

    http::Response get(const std::string& url) override {
        http::Response response;
        response.url = url;
        const std::filesystem::path path = to_path(url);
        // As open() below: a file that cannot be opened answers 404.
        const store::ReadStatus read = store::read_file_into(path, response.body);
        if (read.error != 0 && read.opened) throw Error(ErrorCode::internal, "cannot read " + path.string());
        response.status = read.opened ? 200 : 404;
        return response;
    }

    http::Response download(const std::string& url, http::BodyTarget& target) override {
        http::Response response;
        std::ifstream in = open(url, response);
        if (response.status != 200) return response;
        char buffer[1 << 16];
        target.restart();
        while (in) {
            in.read(buffer, sizeof buffer);
            if (in.gcount() > 0) target.write(buffer, static_cast<std::size_t>(in.gcount()));
        }
        if (in.bad()) throw Error(ErrorCode::internal, "cannot read " + to_path(url).string());
        return response;
    }

    std::uint64_t requests() const override { return 0; }

private:
    // The file the URL names, with `response` set to 200, or 404 when absent.
    std::ifstream open(const std::string& url, http::Response& response) const {
        response.url = url;
        std::ifstream in(to_path(url), std::ios::binary);
        response.status = in ? 200 : 404;
        return in;
    }

    std::filesystem::path to_path(const std::string& url) const {
        std::string rest = url.substr(std::string("file://").size());
        if (auto query = rest.find('?'); query != std::string::npos) rest.erase(query);
        return std::filesystem::path(percent_decode(rest));
    }

    static std::string percent_decode(const std::string& text) {
        std::string out;
        for (std::size_t i = 0; i < text.size(); ++i) {
            if (text[i] == '%' && i + 2 < text.size() && std::isxdigit(static_cast<unsigned char>(text[i + 1])) &&
                std::isxdigit(static_cast<unsigned char>(text[i + 2]))) {
                out.push_back(static_cast<char>(std::stoi(text.substr(i + 1, 2), nullptr, 16)));
                i += 2;
            } else {
                out.push_back(text[i]);
            }
        }
        return out;
    }

    std::string m_endpoint;
};

}  // namespace

std::unique_ptr<Transport> make_transport(const TransportConfig& config) {
    const std::string& endpoint = config.endpoint;
    if (endpoint.rfind("file://", 0) == 0) return std::make_unique<FileTransport>(endpoint);
    if (http::parse_url(endpoint)) return std::make_unique<HttpTransport>(config);
    throw Error(ErrorCode::usage, "unsupported endpoint '" + http::redact(endpoint) +
                                      "': use http://, https:// or file:// (set --endpoint or KERNHUB_ENDPOINT)");
}

}  // namespace kernhub::hub
