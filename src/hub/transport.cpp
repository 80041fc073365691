#include "hub/transport.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>

#include "cache/cache.hpp"
#include "common/hint.hpp"
#include "common/once.hpp"
#include "kernhub/error.hpp"

namespace kernhub::hub {

namespace {

class HttpTransport final : public Transport {
public:
    explicit HttpTransport(TransportConfig config) : m_config(std::move(config)) {}
    using Transport::get;
    http::Response get(const std::string& url, const http::GetLimits& limits) override {
        return session().get(url, limits);
    }
    http::Response download(const std::string& url, http::BodyTarget& target) override {
        return session().download(url, target);
    }
    http::Clock& clock() override { return http::clock_of(m_config.policy); }
    std::uint64_t requests() const override {
        const http::Session* made = m_made.load(std::memory_order_acquire);
        return made != nullptr ? made->requests() : 0;
    }

private:
    // The session (and with it libcurl's handle) is made on the first
    // request, so a client that finds everything in the cache never makes
    // one. Several threads may send their first request at once:
    // Once makes exactly one session, and a constructor that
    // throws leaves the next request to try again. The session gives each
    // concurrent request a libcurl handle of its own.
    http::Session& session() {
        if (!m_config.token_problem.empty()) throw Error(ErrorCode::usage, m_config.token_problem);
        m_session_once.call([this] {
            auto session = std::make_unique<http::Session>(m_config.policy, m_config.token, m_config.endpoint);
            if (m_config.on_retry) session->set_retry_observer(m_config.on_retry);
            m_session = std::move(session);
            m_made.store(m_session.get(), std::memory_order_release);
        });
        return *m_session;
    }

    TransportConfig m_config;
    Once m_session_once;
    std::unique_ptr<http::Session> m_session;
    std::atomic<const http::Session*> m_made{nullptr};  // m_session once made, for requests()
};

// A static hub tree on disk: the URL path names a file under the root.
// A missing file answers 404 without X-Error-Code, as a static web server
// serving the same tree would.
class FileTransport final : public Transport {
public:
    explicit FileTransport(std::string endpoint) : m_endpoint(std::move(endpoint)) {}

    using Transport::get;
    http::Response get(const std::string& url, const http::GetLimits& limits) override {
        http::Response response;
        response.url = url;
        const std::filesystem::path path = to_path(url);
        // As an HTTP answer kept in memory: the caller's cap (a listing's
        // KERNHUB_MAX_LISTING_BYTES), else k_max_file_answer bytes.
        const std::size_t cap = limits.max_body.value_or(k_max_file_answer);
        const cache::ReadStatus read = cache::read_file_into(path, response.body, cap);
        if (read.error == EFBIG && limits.max_body && !limits.over_body_message.empty()) {
            throw Error(ErrorCode::network, limits.over_body_message);
        }
        if (read.error == EFBIG) {
            throw Error(ErrorCode::network,
                        "the hub file " + path.string() + " is larger than " + std::to_string(cap) + " bytes (" +
                            (limits.max_body ? "the caller's cap" : "k_max_file_answer") + "); check the endpoint");
        }
        if (read.not_regular) throw not_regular(path);
        if (read.error != 0 && read.opened) throw Error(ErrorCode::internal, "cannot read " + path.string());
        response.status = read.opened ? 200 : 404;
        return response;
    }

    http::Response download(const std::string& url, http::BodyTarget& target) override {
        http::Response response;
        response.url = url;
        const std::filesystem::path path = to_path(url);
        // O_NONBLOCK: a FIFO in the hub tree must not make the open wait.
        const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        if (fd < 0) {
            response.status = 404;  // as for a file a web server cannot open
            return response;
        }
        struct Closer {
            int fd;
            ~Closer() { ::close(fd); }
        } closer{fd};
        struct stat info {};
        if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) throw not_regular(path);
        response.status = 200;
        char buffer[1 << 16];
        target.restart();
        // A file longer than the hub listed is read one buffer past that
        // size, which the verification then refuses, not to its end.
        const std::optional<std::uint64_t> expected = target.expected_size();
        std::uint64_t total = 0;
        while (!expected || total <= *expected) {
            const ssize_t n = ::read(fd, buffer, sizeof buffer);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) throw Error(ErrorCode::internal, "cannot read " + path.string(), std::strerror(errno));
            if (n == 0) break;
            target.write(buffer, static_cast<std::size_t>(n));
            total += static_cast<std::uint64_t>(n);
        }
        return response;
    }

    std::uint64_t requests() const override { return 0; }

private:
    // An answer kept in memory (listings, revision info): the same bound as
    // over HTTP.
    static constexpr std::size_t k_max_file_answer = 64u << 20;

    static Error not_regular(const std::filesystem::path& path) {
        return Error(ErrorCode::network,
                     "the hub file " + path.string() + " is not a regular file (a FIFO or device); check the endpoint");
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
    // kernhub appends the API's paths to an http(s) endpoint: after a query
    // or a fragment they would land inside it (a file:// endpoint is a
    // folder, whose name may hold either). The query is not shown: it may
    // hold a token.
    const std::size_t scheme = endpoint.find("://");
    const std::size_t extra = endpoint.rfind("file://", 0) == 0 || scheme == std::string::npos
                                  ? std::string::npos
                                  : endpoint.find_first_of("?#", scheme + 3);
    if (extra != std::string::npos) {
        throw Error(ErrorCode::usage,
                    "the endpoint '" + http::redact(endpoint.substr(0, extra)) + "' is followed by a " +
                        (endpoint[extra] == '?' ? "query string ('?...')" : "fragment ('#...')") +
                        ", and kernhub appends the hub's paths to the endpoint; give only "
                        "scheme://host[:port][/path]",
                    hint::setting("endpoint"));
    }
    if (endpoint.rfind("file://", 0) == 0) return std::make_unique<FileTransport>(endpoint);
    if (http::parse_url(endpoint)) return std::make_unique<HttpTransport>(config);
    throw Error(ErrorCode::usage,
                "unsupported endpoint '" + http::redact(endpoint) +
                    "': use http://, https:// or file://; check KERNHUB_ENDPOINT, or the endpoint given",
                hint::setting("endpoint"));
}

}  // namespace kernhub::hub
