#include "support/hub_server.hpp"
#include "support/build_paths.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <curl/curl.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

namespace kernhub::test {
namespace {

constexpr auto k_ready_timeout = std::chrono::seconds(20);
constexpr auto k_stop_timeout = std::chrono::seconds(5);

struct CurlEasyDeleter {
    void operator()(CURL* curl) const { curl_easy_cleanup(curl); }
};
struct CurlListDeleter {
    void operator()(curl_slist* list) const { curl_slist_free_all(list); }
};

size_t append_body(char* data, size_t size, size_t count, void* reply) {
    static_cast<HttpReply*>(reply)->body.append(data, size * count);
    return size * count;
}

size_t collect_header(char* data, size_t size, size_t count, void* reply) {
    auto& headers = static_cast<HttpReply*>(reply)->headers;
    const std::string line(data, size * count);
    if (line.rfind("HTTP/", 0) == 0) {
        headers.clear();  // a new status line: keep only the final response's headers
    } else if (const auto colon = line.find(':'); colon != std::string::npos) {
        std::string name = line.substr(0, colon);
        std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
        const auto first = line.find_first_not_of(" \t", colon + 1);
        const auto last = line.find_last_not_of(" \t\r\n");
        headers[name] = first == std::string::npos || last < first ? "" : line.substr(first, last - first + 1);
    }
    return size * count;
}

// Reads one line from fd within the deadline; "" on timeout or EOF.
std::string read_line(int fd, std::chrono::steady_clock::time_point deadline) {
    std::string text;
    while (text.find('\n') == std::string::npos) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        pollfd pfd{fd, POLLIN, 0};
        const int ready = poll(&pfd, 1, static_cast<int>(std::max<long long>(0, left.count())));
        if (ready < 0 && errno == EINTR) {
            continue;
        }
        char buffer[4096];
        const ssize_t n = ready > 0 ? read(fd, buffer, sizeof buffer) : 0;
        if (n <= 0) {
            return "";
        }
        text.append(buffer, static_cast<size_t>(n));
    }
    return text.substr(0, text.find('\n'));
}

}  // namespace

std::string HttpReply::header(const std::string& name) const {
    const auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
}

HttpReply http_request(const std::string& method, const std::string& url, const std::vector<std::string>& headers,
                       const std::string& body) {
    static std::once_flag curl_initialised;
    std::call_once(curl_initialised, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });

    std::unique_ptr<CURL, CurlEasyDeleter> curl(curl_easy_init());
    curl_slist* list = nullptr;
    for (const auto& header : headers) {
        list = curl_slist_append(list, header.c_str());
    }
    std::unique_ptr<curl_slist, CurlListDeleter> header_list(list);
    HttpReply reply;
    char error[CURL_ERROR_SIZE] = "";
    CURL* handle = curl.get();
    curl_easy_setopt(handle, CURLOPT_URL, url.c_str());
    curl_easy_setopt(handle, CURLOPT_NOPROXY, "*");  // a proxy from the environment must not see loopback tests
    curl_easy_setopt(handle, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(handle, CURLOPT_TIMEOUT, 30L);
    curl_easy_setopt(handle, CURLOPT_ERRORBUFFER, error);
    curl_easy_setopt(handle, CURLOPT_HTTPHEADER, header_list.get());
    curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, append_body);
    curl_easy_setopt(handle, CURLOPT_WRITEDATA, &reply);
    curl_easy_setopt(handle, CURLOPT_HEADERFUNCTION, collect_header);
    curl_easy_setopt(handle, CURLOPT_HEADERDATA, &reply);
    if (method == "HEAD") {
        curl_easy_setopt(handle, CURLOPT_NOBODY, 1L);
    } else if (method == "POST") {
        curl_easy_setopt(handle, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
        curl_easy_setopt(handle, CURLOPT_POSTFIELDS, body.c_str());
    } else if (method != "GET") {
        curl_easy_setopt(handle, CURLOPT_CUSTOMREQUEST, method.c_str());
    }
    const CURLcode code = curl_easy_perform(handle);
    curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &reply.status);
    if (code != CURLE_OK) {
        reply.error = *error != '\0' ? error : curl_easy_strerror(code);
    }
    // The handle outlives `error`, `reply` and the header list (it is
    // cleaned up last): leave nothing of them registered on it.
    curl_easy_reset(handle);
    return reply;
}

HubServer::HubServer(const std::filesystem::path& root, Options options) {
    Pipe input = make_pipe();
    Pipe output = make_pipe();
    const auto log_path = m_scratch.path() / "stderr.log";
    UniqueFd log(open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    if (log.get() < 0) {
        throw std::runtime_error("cannot create " + log_path.string() + ": " + std::strerror(errno));
    }
    // -S: the server is standard library only, and the site packages'
    // start-up (.pth files) cost a tenth of a second per test.
    std::vector<std::string> argv{KERNHUB_PYTHON,
                                  "-S",
                                  std::string(KERNHUB_SOURCE_DIR) + "/tests/support/hub_server.py",
                                  "--root",
                                  root.string(),
                                  "--page-size",
                                  std::to_string(options.page_size)};
    if (!options.token.empty()) {
        argv.insert(argv.end(), {"--token", options.token});
    }
    m_pid = spawn_process(argv, {}, "", input.read.get(), output.write.get(), log.get());
    m_stdin = std::move(input.write);
    output.write.reset();

    const std::string line = read_line(output.read.get(), std::chrono::steady_clock::now() + k_ready_timeout);
    const auto ready = nlohmann::json::parse(line, nullptr, false);
    if (ready.is_object() && ready.value("endpoint", "") != "" && ready.value("cdn", "") != "") {
        m_endpoint = ready["endpoint"];
        m_cdn = ready["cdn"];
        return;
    }
    stop();
    throw std::runtime_error("hub_server.py did not report ready for " + root.string() + " (got \"" + line +
                             "\"); its stderr:\n" + server_stderr());
}

HubServer::~HubServer() {
    stop();
}

void HubServer::stop() {
    m_stdin.reset();
    kill(m_pid, SIGTERM);
    // Bounded wait, so a wedged server costs seconds rather than the whole test run.
    const auto deadline = std::chrono::steady_clock::now() + k_stop_timeout;
    while (waitpid(m_pid, nullptr, WNOHANG) == 0) {
        if (std::chrono::steady_clock::now() > deadline) {
            kill(m_pid, SIGKILL);
            wait_process(m_pid);
            return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
}

std::string HubServer::server_stderr() const {
    std::ifstream log(m_scratch.path() / "stderr.log");
    std::ostringstream text;
    text << log.rdbuf();
    return text.str();
}

HttpReply HubServer::control(const std::string& method, const std::string& path, const std::string& body) const {
    HttpReply reply = http_request(method, m_endpoint + path, {"Content-Type: application/json"}, body);
    if (reply.status != 200) {
        throw std::runtime_error(method + " " + m_endpoint + path + " failed (status " + std::to_string(reply.status) +
                                 " " + reply.error + "): " + reply.body + "\nserver stderr:\n" + server_stderr());
    }
    return reply;
}

nlohmann::json HubServer::stats() const {
    return nlohmann::json::parse(control("GET", "/_stats").body);
}

void HubServer::reset() {
    control("POST", "/_reset");
}

void HubServer::add_faults(const nlohmann::json& faults_array) {
    control("POST", "/_faults", nlohmann::json{{"faults", faults_array}}.dump());
}

bool HubServer::wait_held(const std::string& gate, int count) const {
    const auto answer =
        nlohmann::json::parse(control("POST", "/_held", nlohmann::json{{"gate", gate}, {"count", count}}.dump()).body);
    return answer["held"].get<int>() >= count;
}

void HubServer::release(const std::string& gate) {
    control("POST", "/_release", nlohmann::json{{"gate", gate}}.dump());
}

size_t HubServer::count_requests(const std::string& path_substring) const {
    const auto requests = stats()["requests"];
    return static_cast<size_t>(std::count_if(requests.begin(), requests.end(), [&](const nlohmann::json& request) {
        return request["path"].get<std::string>().find(path_substring) != std::string::npos;
    }));
}

}  // namespace kernhub::test
