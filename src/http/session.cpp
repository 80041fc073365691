#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <exception>
#include <mutex>
#include <random>
#include <thread>

#include "http/http.hpp"
#include "kernhub/error.hpp"

namespace kernhub::http {

namespace {

constexpr std::size_t k_max_memory_body = 64u << 20;  // API listings stay far below this
constexpr std::size_t k_max_error_body = 64u << 10;

void global_init_once() {
    static std::once_flag once;
    std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

bool is_redirect(long status) {
    return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

// Transfer failures worth another attempt; a bad certificate, URL or
// protocol will fail the same way again.
bool is_transient(CURLcode code) {
    switch (code) {
        case CURLE_COULDNT_RESOLVE_HOST:
        case CURLE_COULDNT_RESOLVE_PROXY:
        case CURLE_COULDNT_CONNECT:
        case CURLE_OPERATION_TIMEDOUT:
        case CURLE_PARTIAL_FILE:
        case CURLE_SEND_ERROR:
        case CURLE_RECV_ERROR:
        case CURLE_GOT_NOTHING:
        case CURLE_HTTP2:
        case CURLE_HTTP2_STREAM:
        case CURLE_SSL_CONNECT_ERROR:
            return true;
        default:
            return false;
    }
}

bool is_retryable_status(long status) {
    return status == 408 || status == 429 || status == 500 || status == 502 || status == 503 || status == 504;
}

std::string trim(const std::string& text) {
    auto begin = text.find_first_not_of(" \t\r\n");
    if (begin == std::string::npos) return {};
    auto end = text.find_last_not_of(" \t\r\n");
    return text.substr(begin, end - begin + 1);
}

}  // namespace

struct Session::Handle {
    CURL* curl = nullptr;
    Handle() {
        global_init_once();
        curl = curl_easy_init();
        if (curl == nullptr) throw Error(ErrorCode::internal, "libcurl could not create a transfer handle");
    }
    ~Handle() { curl_easy_cleanup(curl); }
};

// State of one request/response exchange, shared with the libcurl callbacks.
struct Session::Attempt {
    Response response;
    BodyTarget* target = nullptr;
    std::string url;
    bool first_body_byte = true;
    std::exception_ptr target_error;
    CURLcode code = CURLE_OK;
    std::string curl_message;
    std::string validator;  // ETag of the last 2xx body, for If-Range
};

// Records the status of each response (1xx and redirect hops included) so
// the body callback knows whether bytes belong to the target or to an
// error or redirect body, and collects header fields.
static std::size_t on_header(char* data, std::size_t size, std::size_t count, void* user) {
    auto* attempt = static_cast<Session::Attempt*>(user);
    try {
        std::string line(data, size * count);
        if (line.rfind("HTTP/", 0) == 0) {
            attempt->response.headers.clear();
            auto space = line.find(' ');
            attempt->response.status = space == std::string::npos ? 0 : std::atol(line.c_str() + space + 1);
            return size * count;
        }
        auto colon = line.find(':');
        if (colon != std::string::npos) {
            std::string name = line.substr(0, colon);
            std::transform(name.begin(), name.end(), name.begin(),
                           [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
            attempt->response.headers[name] = trim(line.substr(colon + 1));
        }
        return size * count;
    } catch (...) {
        attempt->target_error = std::current_exception();  // nothing may unwind through libcurl
        return 0;
    }
}

static std::size_t on_body(char* data, std::size_t size, std::size_t count, void* user) {
    auto* attempt = static_cast<Session::Attempt*>(user);
    std::size_t bytes = size * count;
    long status = attempt->response.status;
    bool success = status == 200 || status == 206;
    try {
        if (attempt->target != nullptr && success) {
            if (attempt->first_body_byte && status == 200 && attempt->target->size() > 0) {
                attempt->target->restart();  // Range was ignored: the body starts at byte 0
            }
            attempt->first_body_byte = false;
            attempt->target->write(data, bytes);
            return bytes;
        }
        if (attempt->target != nullptr) {
            // Error and redirect bodies only feed messages: keep the start.
            std::size_t room = k_max_error_body - std::min(k_max_error_body, attempt->response.body.size());
            attempt->response.body.append(data, std::min(room, bytes));
            return bytes;
        }
        if (attempt->response.body.size() + bytes > k_max_memory_body) {
            throw Error(ErrorCode::network, "hub response from " + redact(attempt->url) + " exceeds " +
                                                std::to_string(k_max_memory_body >> 20) + " MiB; check the endpoint");
        }
        attempt->response.body.append(data, bytes);
        return bytes;
    } catch (...) {
        attempt->target_error = std::current_exception();
        return 0;  // aborts the transfer; rethrown after curl_easy_perform
    }
}

Session::Session(Policy policy, std::string token, std::string token_origin)
    : m_policy(policy),
      m_token(std::move(token)),
      m_token_origin(std::move(token_origin)),
      m_handle(std::make_unique<Handle>()) {}

Session::~Session() = default;

Response Session::perform_once(const std::string& url, BodyTarget* target, Attempt& attempt) {
    CURL* curl = m_handle->curl;
    curl_easy_reset(curl);
    attempt.response = Response{};
    attempt.url = url;
    attempt.target = target;
    attempt.first_body_byte = true;
    attempt.target_error = nullptr;

    curl_slist* headers = nullptr;
    std::string auth;
    if (!m_token.empty() && same_origin(url, m_token_origin)) {
        auth = "Authorization: Bearer " + m_token;
        headers = curl_slist_append(headers, auth.c_str());
    }
    std::string range;
    std::string if_range;
    if (target != nullptr && target->size() > 0) {
        range = "Range: bytes=" + std::to_string(target->size()) + "-";
        headers = curl_slist_append(headers, range.c_str());
        if (!attempt.validator.empty()) {
            if_range = "If-Range: " + attempt.validator;
            headers = curl_slist_append(headers, if_range.c_str());
        }
    }
    char error_buffer[CURL_ERROR_SIZE] = {0};
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_USERAGENT, "kernhub/" KERNHUB_VERSION);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, m_policy.connect_timeout_s);
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 10L);
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, m_policy.low_speed_time_s);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error_buffer);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, &attempt);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &attempt);
    if (target == nullptr) curl_easy_setopt(curl, CURLOPT_ACCEPT_ENCODING, "");

    attempt.code = curl_easy_perform(curl);
    ++m_requests;
    curl_slist_free_all(headers);
    if (attempt.target_error) std::rethrow_exception(attempt.target_error);

    Response response = std::move(attempt.response);
    response.url = url;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.status);
    attempt.curl_message = error_buffer[0] != 0 ? error_buffer : curl_easy_strerror(attempt.code);
    if (is_redirect(response.status)) {
        char* location = nullptr;
        curl_easy_getinfo(curl, CURLINFO_REDIRECT_URL, &location);
        response.headers["location"] = location != nullptr ? location : "";
    }
    if ((response.status == 200 || response.status == 206) && !response.header("etag").empty()) {
        attempt.validator = response.header("etag");
    }
    return response;
}

Response Session::follow(const std::string& url, BodyTarget* target, Attempt& attempt) {
    std::string current = url;
    for (int hop = 0;; ++hop) {
        Response response = perform_once(current, target, attempt);
        if (attempt.code != CURLE_OK || !is_redirect(response.status)) return response;
        std::string next = response.header("location");
        if (next.empty() || !parse_url(next)) {
            throw Error(ErrorCode::network,
                        "hub redirected " + redact(current) + " to an unsupported location '" + redact(next) + "'");
        }
        if (hop + 1 > m_policy.max_redirects) {
            throw Error(ErrorCode::network, "too many redirects fetching " + redact(url));
        }
        current = next;
    }
}

static std::chrono::milliseconds parse_retry_after(const Response& response) {
    std::string value = response.header("retry-after");
    if (value.empty() || !std::all_of(value.begin(), value.end(), [](unsigned char c) { return std::isdigit(c); })) {
        return std::chrono::milliseconds(-1);
    }
    return std::chrono::milliseconds(std::stoll(value.substr(0, 9)) * 1000);
}

Response Session::run(const std::string& url, BodyTarget* target) {
    Attempt attempt;
    static thread_local std::minstd_rand jitter(std::random_device{}());
    for (int tries = 0;; ++tries) {
        Response response = follow(url, target, attempt);
        bool transport_failed = attempt.code != CURLE_OK;
        bool retry = transport_failed ? is_transient(attempt.code) : is_retryable_status(response.status);
        if (transport_failed && !retry) {
            throw Error(ErrorCode::network, "cannot fetch " + redact(url) + "; check the endpoint URL and TLS setup",
                        attempt.curl_message);
        }
        if (!retry) return response;
        if (tries >= m_policy.retries) {
            if (transport_failed) {
                throw Error(ErrorCode::network,
                            "cannot fetch " + redact(url) + " after " + std::to_string(tries + 1) +
                                " attempts; check the endpoint and your network, or use --offline",
                            attempt.curl_message);
            }
            return response;
        }
        auto delay = parse_retry_after(response);
        if (delay.count() < 0) {
            auto base = m_policy.backoff_base.count() << std::min(tries, 10);
            std::uniform_int_distribution<long long> spread(base / 2, base + base / 2);
            delay = std::chrono::milliseconds(base > 0 ? spread(jitter) : 0);
        }
        delay = std::min(delay, m_policy.backoff_max);
        if (m_on_retry) {
            std::string why = transport_failed ? attempt.curl_message : "HTTP " + std::to_string(response.status);
            m_on_retry("retrying " + redact(url) + " in " + std::to_string(delay.count()) + " ms (" + why + ")");
        }
        std::this_thread::sleep_for(delay);
    }
}

Response Session::get(const std::string& url) {
    return run(url, nullptr);
}

Response Session::download(const std::string& url, BodyTarget& target) {
    return run(url, &target);
}

}  // namespace kernhub::http
