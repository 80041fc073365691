// A real loopback hub for tests: tests/support/hub_server.py serving a tree
// laid out by make_hub(), plus a small HTTP client to talk to it.
#pragma once

#include <cstddef>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <sys/types.h>
#include <nlohmann/json.hpp>

#include "support/process.hpp"
#include "support/temp_dir.hpp"

namespace kernhub::test {

struct HttpReply {
    long status = 0;  // 0 when no response arrived
    // Header names lower-cased; the headers of the final response only.
    std::map<std::string, std::string> headers;
    std::string body;
    // libcurl's message when the transfer failed (refused, truncated); empty on success.
    std::string error;

    // The header's value, or "" when absent. name must be lower-case.
    std::string header(const std::string& name) const;
};

// One request through libcurl, without redirects, proxies or retries, with a
// 30 s timeout. HTTP and transfer errors are reported in the reply, not thrown.
HttpReply http_request(const std::string& method, const std::string& url, const std::vector<std::string>& headers = {},
                       const std::string& body = {});

struct HubServerOptions {
    std::string token;     // opens private repos; empty: nothing opens them
    int page_size = 1000;  // tree entries per page
};

// Runs hub_server.py on 127.0.0.1 (hub) and 127.0.0.2 (CDN for LFS blobs)
// for the lifetime of the object. See hub_server.py for the endpoints,
// the fault rules and the stats format.
class HubServer {
public:
    using Options = HubServerOptions;

    // Throws std::runtime_error, with the server's stderr, when it does not
    // report ready within 20 s.
    explicit HubServer(const std::filesystem::path& root, Options options = {});
    ~HubServer();
    HubServer(const HubServer&) = delete;
    HubServer& operator=(const HubServer&) = delete;

    // "http://127.0.0.1:PORT" and "http://127.0.0.2:PORT", no trailing slash.
    const std::string& endpoint() const { return m_endpoint; }
    const std::string& cdn() const { return m_cdn; }

    // The control endpoints; each throws std::runtime_error unless answered 200.
    nlohmann::json stats() const;
    void reset();
    void add_faults(const nlohmann::json& faults_array);
    // For "hold" fault rules: waits until `count` requests are held at
    // `gate` and says whether they are (false after about 20 s with fewer);
    // release() lets them, and every later request at the gate, go on.
    bool wait_held(const std::string& gate, int count = 1) const;
    void release(const std::string& gate);

    // Requests (both hosts) whose target, as sent, contains path_substring.
    size_t count_requests(const std::string& path_substring) const;

private:
    HttpReply control(const std::string& method, const std::string& path, const std::string& body = {}) const;
    std::string server_stderr() const;
    void stop();

    TempDir m_scratch;  // holds the server's stderr log
    UniqueFd m_stdin;   // closing it tells the server to exit
    pid_t m_pid = -1;
    std::string m_endpoint;
    std::string m_cdn;
};

}  // namespace kernhub::test
