// A scripted HTTP/1.1 server on 127.0.0.1 for the replies the test hub never
// gives: a 200 to a ranged request, redirect loops, relative or odd Location
// headers, pagination links to other hosts, range answers that do not fit,
// rate-limit hints and stalled bodies. Each request is answered by a
// test-supplied handler; every reply closes its connection. Header-only so
// that test folders can share it without touching the support library.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace kernhub::test {

struct ScriptedRequest {
    std::string method;
    std::string target;                          // as sent: path and query
    std::map<std::string, std::string> headers;  // lower-case names

    std::string header(const std::string& name) const {
        auto it = headers.find(name);
        return it == headers.end() ? std::string() : it->second;
    }
};

struct ScriptedReply {
    int status = 200;
    std::vector<std::pair<std::string, std::string>> headers;
    std::string body;
    // Send only this many body bytes (Content-Length stays the full size),
    // then close: a transfer broken mid-body.
    std::optional<std::size_t> cut_after;
    // After sending, keep the connection open this long (or until the peer
    // closes it or the server stops) before closing: a transfer that stalls.
    std::chrono::milliseconds stall{0};
};

class ScriptedServer {
public:
    // index counts the requests this server has received, from 0.
    using Handler = std::function<ScriptedReply(const ScriptedRequest& request, std::size_t index)>;

    explicit ScriptedServer(Handler handler) : m_handler(std::move(handler)) {
        m_listen = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (m_listen < 0) throw std::runtime_error("scripted server: socket() failed");
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        address.sin_port = 0;
        socklen_t length = sizeof address;
        if (::bind(m_listen, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
            ::listen(m_listen, 16) != 0 ||
            ::getsockname(m_listen, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
            ::close(m_listen);
            throw std::runtime_error("scripted server: cannot listen on 127.0.0.1");
        }
        m_url = "http://127.0.0.1:" + std::to_string(ntohs(address.sin_port));
        m_thread = std::thread([this] { serve(); });
    }

    ~ScriptedServer() {
        m_stop = true;
        m_thread.join();
        ::close(m_listen);
    }

    ScriptedServer(const ScriptedServer&) = delete;
    ScriptedServer& operator=(const ScriptedServer&) = delete;

    // "http://127.0.0.1:PORT", no trailing slash.
    const std::string& url() const { return m_url; }

    std::vector<ScriptedRequest> requests() const {
        std::lock_guard<std::mutex> lock(m_mutex);
        return m_requests;
    }

private:
    void serve() {
        while (!m_stop) {
            pollfd pfd{m_listen, POLLIN, 0};
            if (::poll(&pfd, 1, 20) <= 0) continue;
            int client = ::accept4(m_listen, nullptr, nullptr, SOCK_CLOEXEC);
            if (client < 0) continue;
            handle(client);
            ::close(client);
        }
    }

    // Reads up to the end of the request head; "" when the peer went away.
    static std::string read_head(int fd) {
        std::string data;
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (data.find("\r\n\r\n") == std::string::npos && std::chrono::steady_clock::now() < deadline) {
            pollfd pfd{fd, POLLIN, 0};
            if (::poll(&pfd, 1, 100) <= 0) continue;
            char buffer[4096];
            ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
            if (n <= 0) return {};
            data.append(buffer, static_cast<std::size_t>(n));
        }
        return data;
    }

    static ScriptedRequest parse_head(const std::string& head) {
        ScriptedRequest request;
        std::size_t line_end = head.find("\r\n");
        std::string request_line = head.substr(0, line_end);
        std::size_t first = request_line.find(' ');
        std::size_t second = request_line.find(' ', first + 1);
        request.method = request_line.substr(0, first);
        request.target = request_line.substr(first + 1, second - first - 1);
        std::size_t pos = line_end + 2;
        while (pos < head.size()) {
            std::size_t end = head.find("\r\n", pos);
            if (end == std::string::npos || end == pos) break;
            std::string line = head.substr(pos, end - pos);
            std::size_t colon = line.find(':');
            if (colon != std::string::npos) {
                std::string name = line.substr(0, colon);
                std::transform(name.begin(), name.end(), name.begin(),
                               [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
                std::size_t value = line.find_first_not_of(' ', colon + 1);
                request.headers[name] = value == std::string::npos ? "" : line.substr(value);
            }
            pos = end + 2;
        }
        return request;
    }

    static void send_all(int fd, const std::string& data) {
        std::size_t sent = 0;
        while (sent < data.size()) {
            ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
            if (n <= 0) return;
            sent += static_cast<std::size_t>(n);
        }
    }

    void handle(int fd) {
        std::string head = read_head(fd);
        if (head.empty()) return;
        ScriptedRequest request = parse_head(head);
        ScriptedReply reply;
        {
            std::lock_guard<std::mutex> lock(m_mutex);
            m_requests.push_back(request);
            reply = m_handler(request, m_requests.size() - 1);
        }
        std::string out = "HTTP/1.1 " + std::to_string(reply.status) + " Scripted\r\n";
        for (const auto& [name, value] : reply.headers) out += name + ": " + value + "\r\n";
        out += "Content-Length: " + std::to_string(reply.body.size()) + "\r\nConnection: close\r\n\r\n";
        out += reply.cut_after ? reply.body.substr(0, *reply.cut_after) : reply.body;
        send_all(fd, out);
        stall(fd, reply.stall);
        ::shutdown(fd, SHUT_RDWR);
    }

    void stall(int fd, std::chrono::milliseconds how_long) const {
        auto deadline = std::chrono::steady_clock::now() + how_long;
        while (!m_stop && std::chrono::steady_clock::now() < deadline) {
            pollfd pfd{fd, POLLIN, 0};
            if (::poll(&pfd, 1, 20) <= 0) continue;
            char buffer[256];
            if (::recv(fd, buffer, sizeof buffer, 0) <= 0) return;  // the client went away
        }
    }

    Handler m_handler;
    int m_listen = -1;
    std::string m_url;
    std::atomic<bool> m_stop{false};
    mutable std::mutex m_mutex;
    std::vector<ScriptedRequest> m_requests;
    std::thread m_thread;
};

}  // namespace kernhub::test
