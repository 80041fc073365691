// One exchange on a libcurl easy handle: the handle leased from the
// session's idle ones, every option of the request set, the transfer run on
// the session's multi handle and thread (Engine) or, without one, on the
// calling thread, and the response read back.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <utility>

#include "http/curl_api.hpp"
#include "http/session_detail.hpp"
#include "kernhub/error.hpp"

namespace kernhub::http {

namespace {

using std::chrono::milliseconds;

// Connections the multi handle keeps open for reuse, over every origin.
constexpr long k_max_pooled_connections = 64;

constexpr long k_download_buffer = 256L << 10;

// How long the session's thread waits for network activity before it runs
// every transfer's progress callback again (cancel flag, minimum rate):
// libcurl may ask for a shorter wait, never a longer one. Idle, it sleeps
// until a caller wakes it.
constexpr int k_engine_tick_ms = 100;
constexpr int k_engine_idle_ms = 10000;
// A pause after the multi handle reports an error, so that a broken poll
// cannot spin.
constexpr milliseconds k_engine_error_pause{10};

// Frees a request's header list; the handle's option is cleared first.
struct SlistFree {
    void operator()(curl_slist* list) const { curl_api().slist_free_all(list); }
};
using HeaderList = std::unique_ptr<curl_slist, SlistFree>;

// Clears every option of the handle when an exchange ends, however it ends
// (return, target error, interruption), so that no pointer into the call
// (header list, Attempt, error buffer) stays registered on the handle for
// a later transfer or curl_easy_cleanup to find. Connections and caches
// survive curl_easy_reset.
struct ResetOnExit {
    CURL* curl;
    ~ResetOnExit() { curl_api().easy_reset(curl); }
};

}  // namespace

// ---- handles ---------------------------------------------------------------------

Session::Handle::Handle() {
    curl = curl_api().easy_init();
    if (curl == nullptr) throw Error(ErrorCode::internal, "libcurl could not create a transfer handle");
}

Session::Handle::~Handle() {
    curl_api().easy_cleanup(curl);
}

// A handle for one exchange: an idle one of the session's, or a new one.
struct Session::HandleLease {
    Session& session;
    std::unique_ptr<Handle> handle;

    explicit HandleLease(Session& owner) : session(owner) {
        {
            std::lock_guard<std::mutex> guard(session.m_idle_mutex);
            if (session.m_idle_owner.take_over()) abandon(session.m_idle);
            if (!session.m_idle.empty()) {
                handle = std::move(session.m_idle.back());
                session.m_idle.pop_back();
            }
        }
        if (!handle) handle = std::make_unique<Handle>();
    }
    ~HandleLease() {
        {
            std::lock_guard<std::mutex> guard(session.m_idle_mutex);
            if (session.m_idle.size() < detail::k_max_idle_handles && !session.m_idle_owner.in_child()) {
                session.m_idle.push_back(std::move(handle));
            }
        }
        // A surplus handle is closed outside the lock: closing a TLS
        // connection can wait on the network.
        handle.reset();
    }
    HandleLease(const HandleLease&) = delete;
    HandleLease& operator=(const HandleLease&) = delete;
    Handle* operator->() const { return handle.get(); }
};

// ---- the engine ------------------------------------------------------------------

Session::Engine::Engine() {
    const CurlApi& api = curl_api();
    multi = api.multi_init();
    if (multi == nullptr) throw Error(ErrorCode::internal, "libcurl could not create a multi handle");
    api.multi_setopt(multi, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX);
    api.multi_setopt(multi, CURLMOPT_MAXCONNECTS, k_max_pooled_connections);
    // No CURLMOPT_MAX_HOST_CONNECTIONS: a transfer libcurl queues for a
    // connection gets no timeout and no progress callback (no deadline,
    // no cancel). Downloads are bounded before they get here
    // (HostSlot); API requests are few and never wait.
    try {
        thread = std::thread([this] { drive(); });
    } catch (...) {
        api.multi_cleanup(multi);
        throw;
    }
}

Session::Engine::~Engine() {
    {
        std::lock_guard<std::mutex> guard(mutex);
        stopping = true;
    }
    curl_api().multi_wakeup(multi);
    thread.join();
    curl_api().multi_cleanup(multi);  // closes the pooled connections
}

CURLcode Session::Engine::perform(CURL* curl, BodyTarget* target, detail::BodyPipe** pipe_slot,
                                  std::exception_ptr& failure) {
    Transfer transfer;
    transfer.curl = curl;
    std::optional<detail::BodyPipe> pipe;
    if (target != nullptr) {
        pipe.emplace([this, &transfer] { resume(transfer); });
        transfer.pipe = &*pipe;
    }
    *pipe_slot = transfer.pipe;
    {
        std::lock_guard<std::mutex> guard(mutex);
        submitted.push_back(&transfer);
    }
    curl_api().multi_wakeup(multi);
    if (pipe) pipe->drain(*target);
    {
        std::unique_lock<std::mutex> lock(mutex);
        transfer.done_signal.wait(lock, [&transfer] { return transfer.done; });
    }
    *pipe_slot = nullptr;
    if (pipe) failure = pipe->failure();
    return transfer.code;
}

void Session::Engine::resume(Transfer& transfer) noexcept {
    {
        std::lock_guard<std::mutex> guard(mutex);
        if (!transfer.resume_queued) {
            transfer.resume_queued = true;
            transfer.next_resume = resumes;
            resumes = &transfer;
        }
    }
    curl_api().multi_wakeup(multi);
}

void Session::Engine::finish(Transfer* transfer, CURLcode code) {
    if (transfer->pipe != nullptr) transfer->pipe->close();  // no resume is asked for after this
    std::lock_guard<std::mutex> guard(mutex);
    if (transfer->resume_queued) {
        for (Transfer** link = &resumes; *link != nullptr; link = &(*link)->next_resume) {
            if (*link == transfer) {
                *link = transfer->next_resume;
                break;
            }
        }
    }
    transfer->code = code;
    transfer->done = true;
    // Under the lock: the caller may return, and its Transfer end, as
    // soon as it is released.
    transfer->done_signal.notify_one();
}

// The thread: nothing here allocates or throws (the callbacks catch
// their own exceptions), so every caller is always woken.
void Session::Engine::drive() noexcept {
    const CurlApi& api = curl_api();
    std::vector<Transfer*> batch;
    int active = 0;
    for (;;) {
        {
            std::lock_guard<std::mutex> guard(mutex);
            if (stopping && active == 0 && submitted.empty()) return;
            batch.swap(submitted);
        }
        add_submitted(batch, active);
        resume_paused();
        int running = 0;
        const CURLMcode performed = api.multi_perform(multi, &running);
        collect_done(active);
        const CURLMcode polled =
            api.multi_poll(multi, nullptr, 0, active > 0 ? k_engine_tick_ms : k_engine_idle_ms, nullptr);
        if (performed != CURLM_OK || polled != CURLM_OK) std::this_thread::sleep_for(k_engine_error_pause);
    }
}

void Session::Engine::add_submitted(std::vector<Transfer*>& batch, int& active) {
    const CurlApi& api = curl_api();
    for (Transfer* transfer : batch) {
        api.easy_setopt(transfer->curl, CURLOPT_PRIVATE, static_cast<void*>(transfer));
        if (api.multi_add_handle(multi, transfer->curl) == CURLM_OK) {
            ++active;
        } else {
            finish(transfer, CURLE_FAILED_INIT);
        }
    }
    batch.clear();
}

// Only this thread ends transfers, so one taken off the list lives until it
// is resumed.
void Session::Engine::resume_paused() {
    for (;;) {
        Transfer* transfer = nullptr;
        {
            std::lock_guard<std::mutex> guard(mutex);
            transfer = resumes;
            if (transfer == nullptr) break;
            resumes = transfer->next_resume;
            transfer->resume_queued = false;
        }
        curl_api().easy_pause(transfer->curl, CURLPAUSE_CONT);
    }
}

void Session::Engine::collect_done(int& active) {
    const CurlApi& api = curl_api();
    int queued = 0;
    while (CURLMsg* message = api.multi_info_read(multi, &queued)) {
        if (message->msg != CURLMSG_DONE) continue;
        CURL* curl = message->easy_handle;
        const CURLcode code = message->data.result;  // read before the message goes away
        void* owner = nullptr;
        api.easy_getinfo(curl, CURLINFO_PRIVATE, &owner);
        api.multi_remove_handle(multi, curl);
        --active;
        finish(static_cast<Transfer*>(owner), code);
    }
}

Session::Engine* Session::engine() {
    std::lock_guard<std::mutex> guard(m_engine_mutex);
    if (m_engine_owner.take_over()) {
        // A child made by fork(): the thread is not here and the pooled
        // connections are the parent's. Leave them untouched; start anew.
        abandon(m_engine);
        m_engine_tried = false;
    }
    if (!m_engine && !m_engine_tried && m_policy.use_engine && curl_api().multi_usable) {
        m_engine_tried = true;
        try {
            m_engine = std::make_unique<Engine>();
        } catch (const std::system_error&) {
            // No thread to be had (a pids limit): transfers run on their callers.
        } catch (const Error&) {
        }
    }
    return m_engine.get();
}

// ---- one exchange ----------------------------------------------------------------

namespace {

// Aborts the transfer (CURLE_ABORTED_BY_CALLBACK) once the cancel flag is
// set, or when a download received less than min_rate × window in a whole
// window (too_slow), or when a piped download's target failed. libcurl
// calls it often while data flows; while a connection stalls, at every
// engine tick (k_engine_tick_ms), or about once a second on the path
// without the engine. Fixed windows, not a sliding one:
// a trickle is caught at the end of the first window, at no cost per byte.
int on_progress(void* user, curl_off_t, curl_off_t received, curl_off_t, curl_off_t) {
    auto* attempt = static_cast<Session::Attempt*>(user);
    if (detail::cancelled(attempt->cancel)) return 1;
    if (attempt->pipe != nullptr && attempt->pipe->failed()) return 1;
    if (attempt->min_rate == 0) return 0;
    const auto now = std::chrono::steady_clock::now();
    if (attempt->pipe != nullptr && attempt->pipe->paused()) {
        // Waiting for our own disk is not the server being slow: the
        // window starts again when the transfer goes on.
        attempt->window_start = now;
        attempt->window_bytes = received;
        return 0;
    }
    const auto elapsed = std::chrono::duration_cast<milliseconds>(now - attempt->window_start);
    if (elapsed < attempt->rate_window) return 0;
    const auto bytes = static_cast<std::uint64_t>(std::max<curl_off_t>(0, received - attempt->window_bytes));
    // bytes / elapsed_s < min_rate, without division.
    if (bytes * 1000 < attempt->min_rate * static_cast<std::uint64_t>(elapsed.count())) {
        attempt->too_slow = true;
        return 1;
    }
    attempt->window_start = now;
    attempt->window_bytes = received;
    return 0;
}

// The authorities file must be a regular file of sane size: libcurl would
// read a FIFO or /dev/zero for ever, and a typo should be named as such.
void check_ca_file(const std::string& path) {
    constexpr std::uintmax_t k_max_ca_file = 8u << 20;  // system bundles are a few hundred KiB
    std::error_code ec;
    const auto status = std::filesystem::status(path, ec);
    const bool regular = !ec && std::filesystem::is_regular_file(status);
    const std::uintmax_t size = regular ? std::filesystem::file_size(path, ec) : 0;
    const bool readable = regular && ::access(path.c_str(), R_OK) == 0;
    if (!readable || ec || size > k_max_ca_file) {
        throw Error(ErrorCode::usage, "SSL_CERT_FILE names '" + printable(path) +
                                          "', which is not a readable file of at most 8 MiB; name a PEM file of "
                                          "certificate authorities, or unset it to use the system's");
    }
}

// The deadline's remainder, which bounds this exchange (run checks it
// before); 0: no bound.
long exchange_timeout_ms(const Session::Attempt& attempt, Clock& clock) {
    if (!attempt.deadline) return 0;
    const auto left = std::chrono::ceil<milliseconds>(*attempt.deadline - clock.now());
    return static_cast<long>(std::max<milliseconds::rep>(1, left.count()));
}

// The bearer token (when this URL is the token's origin), then Range and
// If-Range for a resumed download.
HeaderList request_headers(const Session::Attempt& attempt, const std::string& token) {
    const CurlApi& api = curl_api();
    HeaderList headers;
    auto add_header = [&api, &headers](const std::string& line) {
        curl_slist* list = api.slist_append(headers.get(), line.c_str());
        if (list == nullptr) throw Error(ErrorCode::internal, "out of memory building HTTP request headers");
        // curl_slist_append returned the same list, now one longer: let go
        // of it without freeing, reset() below owns it again.
        static_cast<void>(headers.release());
        headers.reset(list);
    };
    if (!token.empty()) add_header("Authorization: Bearer " + token);
    for (const std::string& line : detail::resume_headers(attempt)) add_header(line);
    return headers;
}

// The authorities in Policy::ca_file instead of the system's, not beside
// them (no CA folder). Checked where it is used: a plain-HTTP hub does not
// care.
void use_ca_file(CURL* curl, const std::string& url, const std::string& ca_file) {
    if (const auto parsed = parse_url(url); !ca_file.empty() && parsed && parsed->scheme == "https") {
        check_ca_file(ca_file);
        curl_api().easy_setopt(curl, CURLOPT_CAINFO, ca_file.c_str());
        curl_api().easy_setopt(curl, CURLOPT_CAPATH, static_cast<const char*>(nullptr));
    }
}

// Every option of the exchange; the handle came reset from its last one.
void set_options(Session::Attempt& attempt, char* error_buffer, curl_slist* headers, const Policy& policy,
                 long timeout_ms) {
    const CurlApi& api = curl_api();
    CURL* curl = attempt.curl;
    const bool download = attempt.target != nullptr;
    api.easy_setopt(curl, CURLOPT_URL, attempt.url.c_str());
    api.easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    api.easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
    api.easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    api.easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    api.easy_setopt(curl, CURLOPT_USERAGENT, "kernhub/" KERNHUB_VERSION);
    api.easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, policy.connect_timeout_s);
    api.easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 10L);
    api.easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, policy.low_speed_time_s);
    api.easy_setopt(curl, CURLOPT_ERRORBUFFER, error_buffer);
    api.easy_setopt(curl, CURLOPT_HEADERFUNCTION, detail::on_header);
    api.easy_setopt(curl, CURLOPT_HEADERDATA, &attempt);
    api.easy_setopt(curl, CURLOPT_WRITEFUNCTION, detail::on_body);
    api.easy_setopt(curl, CURLOPT_WRITEDATA, &attempt);
    if (timeout_ms > 0) api.easy_setopt(curl, CURLOPT_TIMEOUT_MS, timeout_ms);
    // With the engine, a download also needs it to end soon after its
    // target failed, even when no byte comes.
    if (policy.cancel != nullptr || attempt.min_rate > 0 || download) {
        api.easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
        api.easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
        api.easy_setopt(curl, CURLOPT_XFERINFODATA, &attempt);
    }
    if (!download) api.easy_setopt(curl, CURLOPT_ACCEPT_ENCODING, "");
    // A download reads the socket 256 KiB at a time instead of 16 KiB (the
    // body callback still gets pieces of at most 16 KiB): fewer system calls
    // per byte. A handle keeps its buffer, so this costs 256 KiB per idle
    // handle kept.
    if (download) api.easy_setopt(curl, CURLOPT_BUFFERSIZE, k_download_buffer);
    // A download waits for a connection that may multiplex rather than
    // opening one more to the same origin. So does an API request over
    // HTTPS, where the trusted-publisher overview goes out beside the
    // revision request: the TLS handshake tells whether HTTP/2 multiplexes.
    // Over plain HTTP libcurl would learn it from the first answer only, so
    // the second request would wait for the first one's answer.
    if (download || attempt.url.rfind("https://", 0) == 0) api.easy_setopt(curl, CURLOPT_PIPEWAIT, 1L);
    use_ca_file(curl, attempt.url, policy.ca_file);
}

// The response of a finished transfer, with what the session's policy
// needs from it noted in `attempt`: libcurl's message, a range that cannot
// continue the target, the validator for the next If-Range.
Response read_response(Session::Attempt& attempt, const char* error_buffer, const Policy& policy) {
    const CurlApi& api = curl_api();
    if (attempt.target != nullptr && attempt.response.status == 206 && attempt.first_body_byte &&
        attempt.range_problem.empty()) {
        attempt.range_problem = detail::partial_problem(attempt);  // a 206 without a body byte never reached on_body
    }
    Response response = std::move(attempt.response);
    response.url = attempt.url;
    api.easy_getinfo(attempt.curl, CURLINFO_RESPONSE_CODE, &response.status);
    attempt.curl_message = error_buffer[0] != '\0' ? error_buffer : api.easy_strerror(attempt.code);
    if (attempt.code == CURLE_SSL_CACERT_BADFILE && !policy.ca_file.empty()) {
        throw Error(ErrorCode::usage,
                    "SSL_CERT_FILE names '" + printable(policy.ca_file) +
                        "', which holds no certificate authorities libcurl can use; name a PEM file of them, or unset "
                        "it to use the system's",
                    attempt.curl_message);
    }
    if (attempt.too_slow) {
        attempt.curl_message = "less than " + std::to_string(attempt.min_rate) + " bytes/s over " +
                               detail::whole_seconds(attempt.rate_window) + " (KERNHUB_MIN_RATE)";
    }
    if (detail::is_redirect(response.status)) {
        char* location = nullptr;
        api.easy_getinfo(attempt.curl, CURLINFO_REDIRECT_URL, &location);
        response.headers["location"] = location != nullptr ? location : "";
    }
    detail::keep_validator(response, attempt);
    return response;
}

}  // namespace

void Session::Attempt::start(const std::string& to, BodyTarget* body, const Policy& policy) {
    response = Response{};
    url = to;
    target = body;
    cancel = policy.cancel;
    first_body_byte = true;
    range_start = body != nullptr ? body->size() : 0;
    range_problem.clear();
    target_error = nullptr;
    min_rate = body != nullptr ? policy.min_rate : 0;
    rate_window = std::max(policy.min_rate_window, milliseconds(1));
    window_start = std::chrono::steady_clock::now();
    window_bytes = 0;
    too_slow = false;
}

void Session::transfer(Attempt& attempt) {
    if (Engine* shared = engine(); shared != nullptr) {
        std::exception_ptr failure;
        attempt.code = shared->perform(attempt.curl, attempt.target, &attempt.pipe, failure);
        if (failure) attempt.target_error = failure;
    } else {
        attempt.code = curl_api().easy_perform(attempt.curl);
    }
    m_requests.fetch_add(1, std::memory_order_relaxed);
    credit_requests_to_this_thread(1);
    if (attempt.target_error) std::rethrow_exception(attempt.target_error);
    if (attempt.code == CURLE_ABORTED_BY_CALLBACK && !attempt.too_slow) detail::throw_interrupted(attempt.url);
}

Response Session::perform_once(const std::string& url, BodyTarget* target, Attempt& attempt) {
    if (detail::cancelled(m_policy.cancel)) detail::throw_interrupted(url);
    HostSlot slot(*this, url, target != nullptr);
    const long timeout_ms = exchange_timeout_ms(attempt, clock());
    // The first request binds libcurl (docs/embedding.md, "Start-up cost
    // and the network stack"); a handle is borrowed per request, so threads
    // never share one. Before `headers` and `reset`: the handle is reset
    // before it goes back.
    HandleLease handle(*this);
    attempt.start(url, target, m_policy);
    attempt.curl = handle->curl;
    const bool send_token = !m_token.empty() && same_origin(url, m_token_origin);
    const HeaderList headers = request_headers(attempt, send_token ? m_token : std::string());
    ResetOnExit reset{handle->curl};  // after `headers`, so the option is cleared before the list is freed
    handle->error_buffer[0] = '\0';
    set_options(attempt, handle->error_buffer, headers.get(), m_policy, timeout_ms);
    transfer(attempt);
    return read_response(attempt, handle->error_buffer, m_policy);
}

}  // namespace kernhub::http
