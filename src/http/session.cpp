#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <filesystem>
#include <functional>
#include <optional>
#include <random>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "common/text.hpp"
#include "http/curl_api.hpp"
#include "http/http.hpp"

#include "common/hint.hpp"
#include "kernhub/error.hpp"

namespace kernhub::http {

namespace {

using std::chrono::milliseconds;

constexpr std::size_t k_max_memory_body = 64u << 20;  // API listings stay far below this
constexpr std::size_t k_max_error_body = 64u << 10;
// Waits look at the cancel flag this often.
constexpr milliseconds k_cancel_slice{50};
// Starting over from byte 0 once recovers from a file that changed or a
// confused cache; a second bad range answer means the server cannot serve
// this file consistently, and looping would never end.
constexpr int k_max_range_restarts = 1;
// Hub-requested waits above this many seconds all read as "too long"; it
// keeps the conversion to milliseconds from overflowing.
constexpr std::uint64_t k_max_wait_seconds_parsed = 1'000'000'000'000;

// Requests this thread sent, for per-call counts (requests_on_this_thread).
thread_local std::uint64_t t_requests = 0;

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

bool cancelled(const std::atomic<bool>* cancel) {
    return cancel != nullptr && cancel->load();
}

[[noreturn]] void throw_interrupted(const std::string& url) {
    throw Error(ErrorCode::interrupted, "interrupted while fetching " + redact(url) + "; fetch again to continue");
}

// Sleeps for `delay` on `clock`, in short slices when a flag is set up so
// that setting it ends the wait soon: the cancel flag, or the download's
// stop flag (the fetch it belongs to failed elsewhere, so retrying is
// pointless).
void wait_for(Clock& clock, milliseconds delay, const std::atomic<bool>* cancel, const std::atomic<bool>* stop,
              const std::string& url) {
    if (cancel == nullptr && stop == nullptr) {
        clock.sleep_for(delay);
        return;
    }
    const auto until = clock.now() + delay;
    for (;;) {
        if (cancelled(cancel)) throw_interrupted(url);
        if (cancelled(stop)) {
            throw Error(ErrorCode::interrupted,
                        "stopped retrying " + redact(url) + " because another file of the fetch failed");
        }
        const auto now = clock.now();
        if (now >= until) return;
        clock.sleep_for(std::min(k_cancel_slice, std::chrono::ceil<milliseconds>(until - now)));
    }
}

class RealClock final : public Clock {
public:
    std::chrono::steady_clock::time_point now() override { return std::chrono::steady_clock::now(); }
    std::chrono::system_clock::time_point wall_now() override { return std::chrono::system_clock::now(); }
    void sleep_for(milliseconds delay) override { std::this_thread::sleep_for(delay); }
};

// A plain run of decimal digits (no sign, no space); nullopt for anything
// else. Values above `saturate` read as `saturate`.
std::optional<std::uint64_t> parse_digits(std::string_view text, std::uint64_t saturate) {
    if (text.empty()) return std::nullopt;
    std::uint64_t value = 0;
    for (char c : text) {
        if (c < '0' || c > '9') return std::nullopt;
        value = value >= saturate ? saturate : std::min(saturate, value * 10 + static_cast<std::uint64_t>(c - '0'));
    }
    return value;
}

std::string whole_seconds(milliseconds wait) {
    return std::to_string((wait.count() + 999) / 1000) + " s";
}

std::string attempts_text(int tries) {
    return std::to_string(tries) + (tries == 1 ? " attempt" : " attempts");
}

milliseconds seconds_to_ms(std::uint64_t seconds) {
    return milliseconds(static_cast<milliseconds::rep>(std::min(seconds, k_max_wait_seconds_parsed) * 1000));
}

// Retry-After: delta-seconds or an HTTP-date.
std::optional<milliseconds> retry_after(const Response& response, Clock& clock) {
    const std::string value = response.header("retry-after");
    if (value.empty()) return std::nullopt;
    if (auto seconds = parse_digits(value, k_max_wait_seconds_parsed)) return seconds_to_ms(*seconds);
    const std::time_t when = curl_api().getdate(value.c_str(), nullptr);
    if (when == -1) return std::nullopt;
    // In seconds first: a date centuries ahead would overflow the clock's
    // nanoseconds; it saturates as a long delta-seconds does.
    const std::int64_t now_ms = std::chrono::duration_cast<milliseconds>(clock.wall_now().time_since_epoch()).count();
    const std::int64_t now_s = now_ms / 1000;
    const auto when_s = static_cast<std::int64_t>(when);
    if (when_s <= now_s - 1) return milliseconds(0);
    if (static_cast<std::uint64_t>(when_s - now_s) >= k_max_wait_seconds_parsed) {
        return seconds_to_ms(k_max_wait_seconds_parsed);
    }
    return milliseconds(std::max<std::int64_t>(0, when_s * 1000 - now_ms));
}

// The longest reset time `t` among the exhausted quotas (`r=0`) of a
// RateLimit field such as `"api";r=0;t=55, "burst";r=3;t=1`.
std::optional<milliseconds> ratelimit_reset(const Response& response) {
    const std::string value = response.header("ratelimit");
    std::optional<std::uint64_t> longest;
    std::size_t item_start = 0;
    while (item_start < value.size()) {
        std::size_t item_end = std::min(value.find(',', item_start), value.size());
        std::string_view item(value.data() + item_start, item_end - item_start);
        std::optional<std::uint64_t> remaining;
        std::optional<std::uint64_t> reset;
        // The first member is the quota's name; parameters follow after ';'.
        for (std::size_t semi = item.find(';'); semi != std::string_view::npos;) {
            std::size_t next = item.find(';', semi + 1);
            std::string_view param = item.substr(semi + 1, next == std::string_view::npos ? next : next - semi - 1);
            std::size_t eq = param.find('=');
            if (eq != std::string_view::npos) {
                const std::string key = ascii_lowercase(trim(param.substr(0, eq)));
                auto number = parse_digits(trim(param.substr(eq + 1)), k_max_wait_seconds_parsed);
                if (key == "r") remaining = number;
                if (key == "t") reset = number;
            }
            semi = next;
        }
        if (remaining && *remaining == 0 && reset) longest = std::max(longest.value_or(0), *reset);
        item_start = item_end + 1;
    }
    if (!longest) return std::nullopt;
    return seconds_to_ms(*longest);
}

struct ContentRange {
    std::uint64_t first = 0;
    std::uint64_t last = 0;
    std::optional<std::uint64_t> total;  // nullopt for "*"
};

// "bytes FIRST-LAST/TOTAL" or "bytes FIRST-LAST/*".
std::optional<ContentRange> parse_content_range(const std::string& value) {
    constexpr std::string_view k_unit = "bytes ";
    constexpr std::uint64_t k_no_saturation = ~std::uint64_t{0};
    constexpr std::size_t k_max_digits = 19;  // fits in 64 bits
    if (value.size() < k_unit.size() || ascii_lowercase(value.substr(0, k_unit.size())) != k_unit) {
        return std::nullopt;
    }
    std::string_view rest(value);
    rest.remove_prefix(k_unit.size());
    auto number = [&](std::string_view digits) {
        return digits.size() > k_max_digits ? std::nullopt : parse_digits(digits, k_no_saturation);
    };
    std::size_t dash = rest.find('-');
    std::size_t slash = rest.find('/');
    if (dash == std::string_view::npos || slash == std::string_view::npos || dash > slash) return std::nullopt;
    auto first = number(rest.substr(0, dash));
    auto last = number(rest.substr(dash + 1, slash - dash - 1));
    std::string_view total_text = rest.substr(slash + 1);
    auto total = total_text == "*" ? std::optional<std::uint64_t>() : number(total_text);
    if (!first || !last || *last < *first || (total_text != "*" && (!total || *last >= *total))) {
        return std::nullopt;
    }
    return ContentRange{*first, *last, total};
}

// Frees a request's header list; the handle's option is cleared first.
struct SlistFree {
    void operator()(curl_slist* list) const { curl_api().slist_free_all(list); }
};

// Clears every option of the handle when an exchange ends, however it ends
// (return, target error, interruption), so that no pointer into the call
// (header list, Attempt, error buffer) stays registered on the handle for
// a later transfer or curl_easy_cleanup to find. Connections and caches
// survive curl_easy_reset.
struct ResetOnExit {
    CURL* curl;
    ~ResetOnExit() { curl_api().easy_reset(curl); }
};

// A download's bytes on their way from the session's thread, which receives
// every transfer's, to the thread that asked for the download, which writes
// and hashes them: a ring of k_pipe_bytes. When the ring has no room for a
// piece, the transfer is paused (CURL_WRITEFUNC_PAUSE: libcurl keeps the
// piece, and over HTTP/2 stops that stream only) until the caller has made
// room, so a slow disk on one file holds up neither the other transfers nor
// API requests. Over HTTP/1.1 a paused download holds the ring and
// libcurl's buffers; over HTTP/2, libcurl before 8.1 goes on buffering a
// paused stream up to its flow-control window (docs/ARCHITECTURE.md,
// "Threads").
constexpr std::size_t k_pipe_bytes = 512u << 10;
// Room the caller makes before it asks for a paused transfer to go on:
// most of the ring, so that a consumer slower than the network pauses and
// resumes a transfer every few hundred KiB rather than every piece (a
// resume costs libcurl a copy of what it held back).
constexpr std::size_t k_resume_room = 384u << 10;

}  // namespace

// Not in the anonymous namespace: Session::Engine and Session::Attempt, which
// have linkage, hold a pointer to it.
class BodyPipe {
public:
    enum class Push { taken, full, failed };

    // Called with the pipe's lock held when the caller has made room in a
    // paused pipe, so that the transfer goes on; it must not block.
    explicit BodyPipe(std::function<void()> resume) : m_resume(std::move(resume)) {}

    // The session's thread: takes the whole piece, or none of it.
    Push push(const char* data, std::size_t size) {
        std::lock_guard<std::mutex> guard(m_mutex);
        if (m_failed.load()) return Push::failed;
        if (size > k_pipe_bytes) {
            // libcurl hands the body over in pieces of at most
            // CURL_MAX_WRITE_SIZE (16 KiB); a larger one could never fit,
            // and the session's thread never waits for a caller.
            m_error = std::make_exception_ptr(Error(ErrorCode::internal, "libcurl handed over " + std::to_string(size) +
                                                                             " body bytes at once, more than the " +
                                                                             std::to_string(k_pipe_bytes) +
                                                                             "-byte body pipe holds"));
            m_failed.store(true);
            return Push::failed;
        }
        // Not zero-filled: a small file touches only the pages it fills.
        if (!m_ring) m_ring.reset(new char[k_pipe_bytes]);
        if (k_pipe_bytes - m_used < size) {
            m_paused.store(true);
            return Push::full;
        }
        copy_in(data, size);
        return Push::taken;
    }
    // The session's thread, on a first byte that starts the body over (the
    // server ignored Range): the caller restarts the target before it
    // writes. The ring is empty then: nothing of this answer was pushed.
    void restart_target() {
        std::lock_guard<std::mutex> guard(m_mutex);
        m_restart = true;
    }
    // The session's thread: the transfer ended, no more bytes come and no
    // resume is asked for from here on.
    void close() {
        std::lock_guard<std::mutex> guard(m_mutex);
        m_closed = true;
        m_changed.notify_all();  // under the lock: the pipe may end as soon as it is released
    }
    // The calling thread: writes what arrives into `target` until the pipe
    // is closed. The first exception of the target is kept (failure()); the
    // bytes after it are dropped.
    void drain(BodyTarget& target) {
        std::unique_lock<std::mutex> lock(m_mutex);
        for (;;) {
            m_changed.wait(lock, [this] { return m_used > 0 || m_closed; });
            if (m_used == 0) return;
            const std::size_t piece = std::min(m_used, k_pipe_bytes - m_head);
            if (!m_failed.load()) {
                // The session's thread only fills the free part of the ring.
                const char* bytes = m_ring.get() + m_head;
                const bool restart = std::exchange(m_restart, false);
                lock.unlock();
                std::exception_ptr error;
                try {
                    if (restart) target.restart();
                    target.write(bytes, piece);
                } catch (...) {
                    error = std::current_exception();
                }
                lock.lock();
                if (error) {
                    m_error = error;
                    m_failed.store(true);
                }
            }
            m_head = (m_head + piece) % k_pipe_bytes;
            m_used -= piece;
            // A paused transfer goes on once there is room again, or when
            // the target failed (its next callback then aborts it).
            if (m_paused.load() && !m_closed && (m_failed.load() || k_pipe_bytes - m_used >= k_resume_room)) {
                m_paused.store(false);
                m_resume();
            }
        }
    }
    bool failed() const noexcept { return m_failed.load(); }
    bool paused() const noexcept { return m_paused.load(); }
    std::exception_ptr failure() const {
        std::lock_guard<std::mutex> guard(m_mutex);
        return m_error;
    }

private:
    // With the lock held and room for `size`.
    void copy_in(const char* data, std::size_t size) {
        const bool was_empty = m_used == 0;
        const std::size_t tail = (m_head + m_used) % k_pipe_bytes;
        const std::size_t first = std::min(size, k_pipe_bytes - tail);
        std::copy(data, data + first, m_ring.get() + tail);
        std::copy(data + first, data + size, m_ring.get());
        m_used += size;
        if (was_empty) m_changed.notify_all();  // the caller waits only on an empty ring
    }

    std::function<void()> m_resume;
    mutable std::mutex m_mutex;
    std::condition_variable m_changed;  // bytes, room, the end or a failure
    std::unique_ptr<char[]> m_ring;     // made at the first byte
    std::size_t m_head = 0;             // guarded by m_mutex: where the oldest byte is
    std::size_t m_used = 0;             // guarded by m_mutex
    bool m_closed = false;              // guarded by m_mutex
    bool m_restart = false;             // guarded by m_mutex
    std::atomic<bool> m_paused{false};  // set by push, cleared by drain; read by the progress callback
    std::atomic<bool> m_failed{false};  // read without the lock by the progress callback
    std::exception_ptr m_error;         // guarded by m_mutex
};

Clock& real_clock() {
    static RealClock clock;
    return clock;
}

Clock& clock_of(const Policy& policy) noexcept {
    return policy.clock ? *policy.clock : real_clock();
}

std::optional<milliseconds> requested_wait(const Response& response, Clock& clock) {
    auto after = retry_after(response, clock);
    auto reset = ratelimit_reset(response);
    if (after && reset) return std::max(*after, *reset);
    return after ? after : reset;
}

bool is_complete_416(const Response& response, const BodyTarget& target) {
    auto expected = target.expected_size();
    return response.status == 416 && expected && target.size() == *expected;
}

struct Session::Handle {
    CURL* curl = nullptr;
    // Owned by the handle rather than a caller's stack frame: libcurl writes
    // into it for as long as the option is set.
    char error_buffer[CURL_ERROR_SIZE] = {};
    Handle() {
        curl = curl_api().easy_init();
        if (curl == nullptr) throw Error(ErrorCode::internal, "libcurl could not create a transfer handle");
    }
    ~Handle() { curl_api().easy_cleanup(curl); }
    Handle(const Handle&) = delete;
    Handle& operator=(const Handle&) = delete;
};

// Idle easy handles kept for reuse (a lease then allocates nothing); a
// handle returned while this many are idle is closed. Only threads that
// overlap in a request make more than one: a fetch's workers (at most
// KERNHUB_MAX_CONNECTIONS, 64) each take one per file.
constexpr std::size_t k_max_idle_handles = 64;

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

// The session's transfers, on one libcurl multi handle driven by one
// thread. A caller hands over an easy handle with every option set and
// waits (draining a download's body pipe meanwhile); the thread adds it to
// the multi handle, runs its callbacks while it transfers beside the
// others, takes it out when it ends and wakes the caller with the result.
// Connections stay in the multi handle's pool for whichever transfer goes
// to their origin next; HTTP/2 streams to one origin share a connection.
//
// Locks: a pipe's lock may be held while the engine's is taken (a caller
// asking for a paused transfer to go on), never the other way round; the
// engine thread holds neither while libcurl runs callbacks.
struct Session::Engine {
    struct Transfer {
        CURL* curl = nullptr;
        BodyPipe* pipe = nullptr;  // closed when the transfer ends
        CURLcode code = CURLE_OK;
        bool done = false;                    // guarded by Engine::mutex
        bool resume_queued = false;           // guarded by Engine::mutex
        Transfer* next_resume = nullptr;      // guarded by Engine::mutex
        std::condition_variable done_signal;  // waited on with Engine::mutex
    };

    CURLM* multi = nullptr;
    std::mutex mutex;
    std::vector<Transfer*> submitted;  // guarded by mutex
    Transfer* resumes = nullptr;       // guarded by mutex: paused transfers with room again
    bool stopping = false;             // guarded by mutex
    std::thread thread;

    Engine() {
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
    ~Engine() {
        {
            std::lock_guard<std::mutex> guard(mutex);
            stopping = true;
        }
        curl_api().multi_wakeup(multi);
        thread.join();
        curl_api().multi_cleanup(multi);  // closes the pooled connections
    }
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    // Runs one transfer to its end, as curl_easy_perform would. For a
    // download (`target` set), `*pipe_slot` points at the body pipe while
    // the transfer runs, and the calling thread drains it into `target`;
    // the target's exception comes back in `failure`.
    CURLcode perform(CURL* curl, BodyTarget* target, BodyPipe** pipe_slot, std::exception_ptr& failure) {
        Transfer transfer;
        transfer.curl = curl;
        std::optional<BodyPipe> pipe;
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

    // A caller made room in the paused pipe of `transfer` (its lock held:
    // the transfer has not ended). Allocates nothing.
    void resume(Transfer& transfer) noexcept {
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

    void finish(Transfer* transfer, CURLcode code) {
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
    void drive() noexcept {
        const CurlApi& api = curl_api();
        std::vector<Transfer*> batch;
        int active = 0;
        for (;;) {
            {
                std::lock_guard<std::mutex> guard(mutex);
                if (stopping && active == 0 && submitted.empty()) return;
                batch.swap(submitted);
            }
            for (Transfer* transfer : batch) {
                api.easy_setopt(transfer->curl, CURLOPT_PRIVATE, static_cast<void*>(transfer));
                if (api.multi_add_handle(multi, transfer->curl) == CURLM_OK) {
                    ++active;
                } else {
                    finish(transfer, CURLE_FAILED_INIT);
                }
            }
            batch.clear();
            // Only this thread ends transfers, so one taken off the list
            // lives until it is resumed.
            for (;;) {
                Transfer* transfer = nullptr;
                {
                    std::lock_guard<std::mutex> guard(mutex);
                    transfer = resumes;
                    if (transfer == nullptr) break;
                    resumes = transfer->next_resume;
                    transfer->resume_queued = false;
                }
                api.easy_pause(transfer->curl, CURLPAUSE_CONT);
            }
            int running = 0;
            const CURLMcode performed = api.multi_perform(multi, &running);
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
            const CURLMcode polled =
                api.multi_poll(multi, nullptr, 0, active > 0 ? k_engine_tick_ms : k_engine_idle_ms, nullptr);
            if (performed != CURLM_OK || polled != CURLM_OK) std::this_thread::sleep_for(k_engine_error_pause);
        }
    }
};

Session::Engine* Session::engine() {
    std::lock_guard<std::mutex> guard(m_engine_mutex);
    if (const pid_t self = ::getpid(); self != m_engine_pid) {
        // A child made by fork(): the thread is not here and the pooled
        // connections are the parent's. Leave them untouched; start anew.
        static_cast<void>(m_engine.release());
        m_engine_tried = false;
        m_engine_pid = self;
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

// A handle for one exchange: an idle one of the session's, or a new one.
struct Session::HandleLease {
    Session& session;
    std::unique_ptr<Handle> handle;

    explicit HandleLease(Session& owner) : session(owner) {
        {
            std::lock_guard<std::mutex> guard(session.m_idle_mutex);
            if (const pid_t self = ::getpid(); self != session.m_idle_pid) {
                for (auto& inherited : session.m_idle) static_cast<void>(inherited.release());
                session.m_idle.clear();
                session.m_idle_pid = self;
            }
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
            if (session.m_idle.size() < k_max_idle_handles && session.m_idle_pid == ::getpid()) {
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

// State of one request/response exchange, shared with the libcurl callbacks.
struct Session::Attempt {
    Response response;
    BodyTarget* target = nullptr;
    std::string url;
    const std::atomic<bool>* cancel = nullptr;
    const GetLimits* limits = nullptr;  // in-memory requests only
    // The minimum rate of a download (0: none), checked per window: the
    // window's start and the bytes received by then.
    std::uint64_t min_rate = 0;
    milliseconds rate_window{0};
    std::chrono::steady_clock::time_point window_start;
    curl_off_t window_bytes = 0;
    bool too_slow = false;  // the transfer was aborted for staying below min_rate
    // When the whole call must be done (in-memory requests); nullopt: none.
    std::optional<std::chrono::steady_clock::time_point> deadline;
    bool first_body_byte = true;
    std::uint64_t range_start = 0;  // the offset this request asked for (0: no Range)
    std::string range_problem;      // why a 206 or 416 cannot continue the target; nothing was written
    std::exception_ptr target_error;
    CURLcode code = CURLE_OK;
    std::string curl_message;
    std::string validator;  // ETag of the last 2xx body, for If-Range
    // Where a download's body goes when the session's thread receives it:
    // the calling thread drains it into the target. Null: the callbacks
    // write into the target themselves.
    BodyPipe* pipe = nullptr;
};

// Why a 206 cannot be appended to the target, or "" when it continues the
// bytes kept at the offset that was asked for.
static std::string partial_problem(const Session::Attempt& attempt) {
    const std::string header = attempt.response.header("content-range");
    auto range = parse_content_range(header);
    if (!range) return "HTTP 206 without a usable Content-Range ('" + header + "')";
    if (range->first != attempt.range_start) {
        return "HTTP 206 starting at byte " + std::to_string(range->first) + " instead of " +
               std::to_string(attempt.range_start);
    }
    auto expected = attempt.target->expected_size();
    if (expected && range->total && *range->total != *expected) {
        return "HTTP 206 for a " + std::to_string(*range->total) + "-byte file instead of " +
               std::to_string(*expected) + " bytes";
    }
    return {};
}

// Records the status of each response (1xx and redirect hops included) so
// the body callback knows whether bytes belong to the target or to an
// error or redirect body, and collects header fields.
static std::size_t on_header(char* data, std::size_t size, std::size_t count, void* user) {
    auto* attempt = static_cast<Session::Attempt*>(user);
    try {
        std::string line(data, size * count);
        if (line.rfind("HTTP/", 0) == 0) {
            attempt->response.headers.clear();
            // "HTTP/1.1 200 OK": three digits after the first space; anything
            // else is status 0, which no caller takes for success.
            auto space = line.find(' ');
            long status = 0;
            if (space != std::string::npos) {
                const char* first = line.c_str() + space + 1;
                const auto parsed = std::from_chars(first, line.c_str() + line.size(), status);
                if (parsed.ec != std::errc() || status < 100 || status > 999) status = 0;
            }
            attempt->response.status = status;
            return size * count;
        }
        auto colon = line.find(':');
        if (colon != std::string::npos) {
            attempt->response.headers[ascii_lowercase(line.substr(0, colon))] = trim(line.substr(colon + 1));
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
            if (attempt->first_body_byte && status == 206) {
                attempt->range_problem = partial_problem(*attempt);
                if (!attempt->range_problem.empty()) return 0;  // aborts before a byte lands in the target
            }
            if (attempt->first_body_byte && status == 200 && attempt->target->size() > 0) {
                // Range was ignored: the body starts at byte 0.
                if (attempt->pipe == nullptr) {
                    attempt->target->restart();
                } else {
                    attempt->pipe->restart_target();
                }
            }
            attempt->first_body_byte = false;
            if (attempt->pipe == nullptr) {
                attempt->target->write(data, bytes);
                return bytes;
            }
            switch (attempt->pipe->push(data, bytes)) {
                case BodyPipe::Push::taken:
                    return bytes;
                case BodyPipe::Push::full:
                    return CURL_WRITEFUNC_PAUSE;  // offered again once the caller made room
                case BodyPipe::Push::failed:
                    break;
            }
            return 0;  // the target failed: its exception is the pipe's
        }
        if (attempt->target != nullptr) {
            // Error and redirect bodies only feed messages: keep the start.
            std::size_t room = k_max_error_body - std::min(k_max_error_body, attempt->response.body.size());
            attempt->response.body.append(data, std::min(room, bytes));
            return bytes;
        }
        const GetLimits* limits = attempt->limits;
        const std::size_t max_body = limits != nullptr && limits->max_body ? *limits->max_body : k_max_memory_body;
        if (attempt->response.body.size() + bytes > max_body) {
            if (limits != nullptr && !limits->over_body_message.empty()) {
                throw Error(ErrorCode::network, limits->over_body_message);
            }
            throw Error(ErrorCode::network,
                        "hub response from " + redact(attempt->url) + " exceeds " + std::to_string(max_body) +
                            " bytes (" +
                            (limits != nullptr && limits->max_body ? "the caller's cap" : "k_max_memory_body") +
                            "); check the endpoint");
        }
        attempt->response.body.append(data, bytes);
        return bytes;
    } catch (...) {
        attempt->target_error = std::current_exception();
        return 0;  // aborts the transfer; rethrown after curl_easy_perform
    }
}

// Aborts the transfer (CURLE_ABORTED_BY_CALLBACK) once the cancel flag is
// set, or when a download received less than min_rate × window in a whole
// window (too_slow), or when a piped download's target failed. libcurl
// calls it often while data flows; while a connection stalls, at every
// engine tick (k_engine_tick_ms), or about once a second on the path
// without the engine. Fixed windows, not a sliding one:
// a trickle is caught at the end of the first window, at no cost per byte.
static int on_progress(void* user, curl_off_t, curl_off_t received, curl_off_t, curl_off_t) {
    auto* attempt = static_cast<Session::Attempt*>(user);
    if (cancelled(attempt->cancel)) return 1;
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
static void check_ca_file(const std::string& path) {
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

Session::Session(Policy policy, std::string token, std::string token_origin)
    : m_policy(std::move(policy)),
      m_token(std::move(token)),
      m_token_origin(std::move(token_origin)),
      m_idle_pid(::getpid()),
      m_slots_pid(::getpid()),
      m_engine_pid(::getpid()) {
    // Room for every idle handle up front: ~HandleLease's push_back then
    // never allocates, so it cannot throw from a destructor.
    m_idle.reserve(k_max_idle_handles);
}

Session::~Session() {
    // In a forked child the engine's thread and connections are the parent's.
    if (m_engine_pid != ::getpid()) static_cast<void>(m_engine.release());
    m_engine.reset();
    // In a forked child the idle connections are the parent's: leave them.
    if (m_idle_pid != ::getpid()) {
        for (auto& inherited : m_idle) static_cast<void>(inherited.release());
    }
}

// One of the Policy::max_host_connections downloads from an origin, held
// for one exchange. API requests take none: they are small, and must not
// wait behind downloads (they have a deadline). Waiting polls the cancel
// flag.
struct Session::HostSlot {
    Session& session;
    std::string origin;  // empty: no bound, nothing held

    HostSlot(Session& owner, const std::string& url, bool download);
    ~HostSlot() {
        if (origin.empty()) return;
        {
            std::lock_guard<std::mutex> guard(session.m_slots_mutex);
            if (--session.m_busy[origin] <= 0) session.m_busy.erase(origin);
        }
        session.m_slot_freed.notify_all();
    }
    HostSlot(const HostSlot&) = delete;
    HostSlot& operator=(const HostSlot&) = delete;
};

Session::HostSlot::HostSlot(Session& owner, const std::string& url, bool download) : session(owner) {
    const int limit = session.m_policy.max_host_connections;
    const std::optional<Url> parsed = limit > 0 && download ? parse_url(url) : std::nullopt;
    if (!parsed) return;
    const std::string key = parsed->scheme + "://" + parsed->host + ":" + std::to_string(parsed->port);
    std::unique_lock<std::mutex> lock(session.m_slots_mutex);
    // A child made by fork() has none of its parent's transfers: the slots
    // they held are free here.
    if (const pid_t self = ::getpid(); self != session.m_slots_pid) {
        session.m_busy.clear();
        session.m_slots_pid = self;
    }
    while (session.m_busy[key] >= limit) {
        if (cancelled(session.m_policy.cancel)) throw_interrupted(url);
        session.m_slot_freed.wait_for(lock, milliseconds(50));
    }
    ++session.m_busy[key];
    origin = key;
}

Response Session::perform_once(const std::string& url, BodyTarget* target, Attempt& attempt) {
    if (cancelled(m_policy.cancel)) throw_interrupted(url);
    HostSlot slot(*this, url, target != nullptr);
    // The deadline's remainder bounds this exchange (run checks it before).
    long timeout_ms = 0;
    if (attempt.deadline) {
        const auto left = std::chrono::ceil<milliseconds>(*attempt.deadline - clock().now());
        timeout_ms = static_cast<long>(std::max<milliseconds::rep>(1, left.count()));
    }
    // The first request binds libcurl (docs/ARCHITECTURE.md, "Start-up cost
    // and the network stack"); a handle is borrowed per request, so threads
    // never share one. Before `headers` and `reset`: the handle is reset
    // before it goes back.
    const CurlApi& api = curl_api();
    HandleLease handle(*this);
    CURL* curl = handle->curl;
    attempt.response = Response{};
    attempt.url = url;
    attempt.target = target;
    attempt.cancel = m_policy.cancel;
    attempt.first_body_byte = true;
    attempt.range_start = target != nullptr ? target->size() : 0;
    attempt.range_problem.clear();
    attempt.target_error = nullptr;
    attempt.min_rate = target != nullptr ? m_policy.min_rate : 0;
    attempt.rate_window = std::max(m_policy.min_rate_window, milliseconds(1));
    attempt.window_start = std::chrono::steady_clock::now();
    attempt.window_bytes = 0;
    attempt.too_slow = false;

    std::unique_ptr<curl_slist, SlistFree> headers;
    auto add_header = [&api, &headers](const std::string& line) {
        curl_slist* list = api.slist_append(headers.get(), line.c_str());
        if (list == nullptr) throw Error(ErrorCode::internal, "out of memory building HTTP request headers");
        // curl_slist_append returned the same list, now one longer: let go
        // of it without freeing, reset() below owns it again.
        static_cast<void>(headers.release());
        headers.reset(list);
    };
    if (!m_token.empty() && same_origin(url, m_token_origin)) add_header("Authorization: Bearer " + m_token);
    if (attempt.range_start > 0) {
        add_header("Range: bytes=" + std::to_string(attempt.range_start) + "-");
        std::string validator = !attempt.validator.empty() ? attempt.validator : target->validator();
        if (!validator.empty()) add_header("If-Range: " + validator);
    }
    ResetOnExit reset{curl};  // after `headers`, so the option is cleared before the list is freed
    handle->error_buffer[0] = '\0';
    api.easy_setopt(curl, CURLOPT_URL, url.c_str());
    api.easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    api.easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
    api.easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    api.easy_setopt(curl, CURLOPT_HTTPHEADER, headers.get());
    api.easy_setopt(curl, CURLOPT_USERAGENT, "kernhub/" KERNHUB_VERSION);
    api.easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, m_policy.connect_timeout_s);
    api.easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 10L);
    api.easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, m_policy.low_speed_time_s);
    api.easy_setopt(curl, CURLOPT_ERRORBUFFER, handle->error_buffer);
    api.easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
    api.easy_setopt(curl, CURLOPT_HEADERDATA, &attempt);
    api.easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
    api.easy_setopt(curl, CURLOPT_WRITEDATA, &attempt);
    if (timeout_ms > 0) api.easy_setopt(curl, CURLOPT_TIMEOUT_MS, timeout_ms);
    // With the engine, a download also needs it to end soon after its
    // target failed, even when no byte comes.
    if (m_policy.cancel != nullptr || attempt.min_rate > 0 || target != nullptr) {
        api.easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
        api.easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
        api.easy_setopt(curl, CURLOPT_XFERINFODATA, &attempt);
    }
    if (target == nullptr) api.easy_setopt(curl, CURLOPT_ACCEPT_ENCODING, "");
    // A download reads the socket 256 KiB at a time instead of 16 KiB (the
    // body callback still gets pieces of at most 16 KiB): fewer system calls
    // per byte. A handle keeps its buffer, so this costs 256 KiB per idle
    // handle kept.
    if (target != nullptr) api.easy_setopt(curl, CURLOPT_BUFFERSIZE, k_download_buffer);

    // A download waits for a connection that may multiplex rather than
    // opening one more to the same origin.
    if (target != nullptr) api.easy_setopt(curl, CURLOPT_PIPEWAIT, 1L);
    if (const auto parsed = parse_url(url); !m_policy.ca_file.empty() && parsed && parsed->scheme == "https") {
        // Checked where it is used: a plain-HTTP hub does not care.
        check_ca_file(m_policy.ca_file);
        // Instead of the system's authorities, not beside them: no CA folder.
        api.easy_setopt(curl, CURLOPT_CAINFO, m_policy.ca_file.c_str());
        api.easy_setopt(curl, CURLOPT_CAPATH, static_cast<const char*>(nullptr));
    }

    if (Engine* shared = engine(); shared != nullptr) {
        std::exception_ptr failure;
        attempt.code = shared->perform(curl, target, &attempt.pipe, failure);
        if (failure) attempt.target_error = failure;
    } else {
        attempt.code = api.easy_perform(curl);
    }
    m_requests.fetch_add(1, std::memory_order_relaxed);
    ++t_requests;
    if (attempt.target_error) std::rethrow_exception(attempt.target_error);
    if (attempt.code == CURLE_ABORTED_BY_CALLBACK && !attempt.too_slow) throw_interrupted(url);

    if (target != nullptr && attempt.response.status == 206 && attempt.first_body_byte &&
        attempt.range_problem.empty()) {
        attempt.range_problem = partial_problem(attempt);  // a 206 without a body byte never reached on_body
    }
    Response response = std::move(attempt.response);
    response.url = url;
    api.easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.status);
    attempt.curl_message = handle->error_buffer[0] != '\0' ? handle->error_buffer : api.easy_strerror(attempt.code);
    if (attempt.code == CURLE_SSL_CACERT_BADFILE && !m_policy.ca_file.empty()) {
        throw Error(ErrorCode::usage,
                    "SSL_CERT_FILE names '" + printable(m_policy.ca_file) +
                        "', which holds no certificate authorities libcurl can use; name a PEM file of them, or unset "
                        "it to use the system's",
                    attempt.curl_message);
    }
    if (attempt.too_slow) {
        attempt.curl_message = "less than " + std::to_string(attempt.min_rate) + " bytes/s over " +
                               whole_seconds(attempt.rate_window) + " (KERNHUB_MIN_RATE)";
    }
    if (is_redirect(response.status)) {
        char* location = nullptr;
        api.easy_getinfo(curl, CURLINFO_REDIRECT_URL, &location);
        response.headers["location"] = location != nullptr ? location : "";
    }
    if ((response.status == 200 || response.status == 206) && attempt.range_problem.empty() &&
        !response.header("etag").empty()) {
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

// Why the target must start over from byte 0 after this answer, or "".
static std::string restart_reason(const Response& response, const Session::Attempt& attempt, const BodyTarget& target) {
    if (!attempt.range_problem.empty()) return attempt.range_problem;
    if (response.status == 416 && !is_complete_416(response, target)) {
        if (attempt.range_start == 0) return "HTTP 416 to a request for the whole file";
        auto expected = target.expected_size();
        return "HTTP 416 for a range from byte " + std::to_string(attempt.range_start) +
               (expected ? " of a " + std::to_string(*expected) + "-byte file" : std::string());
    }
    return {};
}

// The headers a hub wait came from, for the error's context.
static std::string hint_headers(const Response& response) {
    std::string text;
    for (const char* name : {"Retry-After", "RateLimit"}) {
        const std::string value = response.header(name);
        if (!value.empty()) text += (text.empty() ? "" : "; ") + std::string(name) + ": " + value;
    }
    return text;
}

// How to allow a wait that long: the variable (or Options::max_wait_seconds)
// takes whole seconds up to a day; beyond that there is nothing to raise.
static std::string raise_hint(milliseconds asked) {
    const long long seconds = (asked.count() + 999) / 1000;
    if (seconds > 86400) return "that is more than the one-day limit, so ";
    return "raise KERNHUB_MAX_WAIT (or Options::max_wait_seconds) to " + std::to_string(seconds) +
           " to wait that long, or ";
}

// The API call's deadline passed (Policy::api_timeout, or the deadline its
// caller shares between requests).
static Error deadline_error(const std::string& url, milliseconds timeout, const std::string& context) {
    return Error(ErrorCode::network,
                 "the hub did not answer " + redact(url) + " within the API deadline of " + whole_seconds(timeout) +
                     " (KERNHUB_API_TIMEOUT, retries included); check the endpoint and your network, or raise "
                     "KERNHUB_API_TIMEOUT (Options::api_timeout_seconds)",
                 context);
}

Response Session::run(const std::string& url, BodyTarget* target, const GetLimits* limits) {
    Attempt attempt;
    attempt.limits = limits;
    if (limits != nullptr) {
        attempt.deadline = limits->deadline ? *limits->deadline : clock().now() + m_policy.api_timeout;
    }
    auto past_deadline = [&](milliseconds ahead) {
        return attempt.deadline && clock().now() + ahead >= *attempt.deadline;
    };
    static thread_local std::minstd_rand jitter(std::random_device{}());
    int range_restarts = 0;
    for (int tries = 0;;) {
        if (past_deadline(milliseconds(0))) throw deadline_error(url, m_policy.api_timeout, attempt.curl_message);
        Response response = follow(url, target, attempt);
        // A transfer that libcurl cut at the deadline (CURLOPT_TIMEOUT_MS).
        if (attempt.code != CURLE_OK && past_deadline(milliseconds(0))) {
            throw deadline_error(url, m_policy.api_timeout, attempt.curl_message);
        }
        if (target != nullptr) {
            if (std::string why = restart_reason(response, attempt, *target); !why.empty()) {
                if (range_restarts >= k_max_range_restarts) {
                    throw Error(ErrorCode::network, "hub answered the resumed download of " + redact(url) + " with " +
                                                        why + ", again after starting over; try again later");
                }
                ++range_restarts;
                target->restart();
                if (m_on_retry) m_on_retry("restarting " + redact(url) + " from byte 0 (" + why + ")");
                continue;
            }
        }
        bool transport_failed = attempt.code != CURLE_OK;
        bool retry =
            transport_failed ? is_transient(attempt.code) || attempt.too_slow : is_retryable_status(response.status);
        if (transport_failed && !retry) {
            throw Error(ErrorCode::network, "cannot fetch " + redact(url) + "; check the endpoint URL and TLS setup",
                        attempt.curl_message);
        }
        if (!retry) return response;
        if (tries >= m_policy.retries) {
            if (attempt.too_slow) {
                throw Error(ErrorCode::network,
                            "downloading " + redact(url) + " stayed below the minimum rate of " +
                                std::to_string(m_policy.min_rate) + " bytes/s over " +
                                whole_seconds(m_policy.min_rate_window) +
                                " (KERNHUB_MIN_RATE, KERNHUB_MIN_RATE_WINDOW) in " + attempts_text(tries + 1) +
                                "; check your network, or lower KERNHUB_MIN_RATE (Options::min_rate)");
            }
            if (transport_failed) {
                throw Error(ErrorCode::network,
                            "cannot fetch " + redact(url) + " after " + attempts_text(tries + 1) +
                                "; check the endpoint and your network, or work offline from the cache",
                            hint::setting("offline"), attempt.curl_message);
            }
            return response;
        }
        std::optional<milliseconds> asked = transport_failed ? std::nullopt : requested_wait(response, clock());
        milliseconds delay{0};
        if (asked) {
            if (*asked > m_policy.max_wait) {
                throw Error(ErrorCode::network,
                            "the hub asked to wait " + whole_seconds(*asked) + " before retrying " + redact(url) +
                                " (HTTP " + std::to_string(response.status) + "), longer than the maximum of " +
                                whole_seconds(m_policy.max_wait) + "; " + raise_hint(*asked) + "try again later",
                            hint_headers(response));
            }
            delay = *asked;  // the hub knows when it will answer; backoff_max does not apply
        } else {
            auto base = m_policy.backoff_base.count() << std::min(tries, 10);
            std::uniform_int_distribution<long long> spread(base / 2, base + base / 2);
            delay = std::min(milliseconds(base > 0 ? spread(jitter) : 0), m_policy.backoff_max);
        }
        // A wait that would end past the deadline fails now instead.
        if (past_deadline(delay)) {
            throw deadline_error(url, m_policy.api_timeout,
                                 transport_failed ? attempt.curl_message : "HTTP " + std::to_string(response.status));
        }
        if (m_on_retry) {
            std::string why = transport_failed ? attempt.curl_message : "HTTP " + std::to_string(response.status);
            m_on_retry("retrying " + redact(url) + " in " + std::to_string(delay.count()) + " ms (" + why + ")");
        }
        wait_for(clock(), delay, m_policy.cancel, target != nullptr ? target->stop_flag() : nullptr, url);
        ++tries;
    }
}

std::uint64_t requests_on_this_thread() noexcept {
    return t_requests;
}

void credit_requests_to_this_thread(std::uint64_t count) noexcept {
    t_requests += count;
}

Response Session::get(const std::string& url, const GetLimits& limits) {
    return run(url, nullptr, &limits);
}

Response Session::download(const std::string& url, BodyTarget& target) {
    return run(url, &target, nullptr);
}

bool is_retryable_status(long status) {
    return status == 408 || status == 429 || status == 500 || status == 502 || status == 503 || status == 504;
}

}  // namespace kernhub::http
