// Internals of the http module shared by its parts; http.hpp is the
// module's interface. The parts, each a concern of one exchange:
//   headers.cpp    what a response's header lines say: the status line,
//                  Retry-After, RateLimit, Content-Range;
//   body_pipe.cpp  how a response's bytes reach their BodyTarget (the pipe
//                  between the engine's thread and the caller's), and
//                  resuming a download with Range and If-Range;
//   engine.cpp     one exchange on a libcurl easy handle, run on the
//                  session's multi handle and thread (Engine) or on its
//                  caller;
//   session.cpp    the policy around exchanges: redirects, retries, waits,
//                  the API deadline and the per-origin download bound.
// See docs/performance.md, "Connections and downloads".
#pragma once

#include <curl/curl.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "http/http.hpp"

namespace kernhub::http {

namespace detail {

constexpr std::size_t k_max_memory_body = 64u << 20;  // API listings stay far below this
constexpr std::size_t k_max_error_body = 64u << 10;

// A download's bytes on their way from the session's thread, which receives
// every transfer's, to the thread that asked for the download, which writes
// and hashes them: a ring of k_pipe_bytes. When the ring has no room for a
// piece, the transfer is paused (CURL_WRITEFUNC_PAUSE: libcurl keeps the
// piece, and over HTTP/2 stops that stream only) until the caller has made
// room, so a slow disk on one file holds up neither the other transfers nor
// API requests. Over HTTP/1.1 a paused download holds the ring and
// libcurl's buffers; over HTTP/2, libcurl before 8.1 goes on buffering a
// paused stream up to its flow-control window (docs/performance.md,
// "Connections and downloads").
constexpr std::size_t k_pipe_bytes = 512u << 10;
// Room the caller makes before it asks for a paused transfer to go on:
// most of the ring, so that a consumer slower than the network pauses and
// resumes a transfer every few hundred KiB rather than every piece (a
// resume costs libcurl a copy of what it held back).
constexpr std::size_t k_resume_room = 384u << 10;

// Idle easy handles kept for reuse (a lease then allocates nothing); a
// handle returned while this many are idle is closed. Only threads that
// overlap in a request make more than one: a fetch's workers (at most
// KERNHUB_MAX_CONNECTIONS, 64) each take one per file.
constexpr std::size_t k_max_idle_handles = 64;

inline bool is_redirect(long status) {
    return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

inline bool cancelled(const std::atomic<bool>* cancel) {
    return cancel != nullptr && cancel->load();
}

// Error(interrupted) for a transfer the cancel flag ended (session.cpp).
[[noreturn]] void throw_interrupted(const std::string& url);
// "31 s": a wait rounded up to whole seconds, for messages (session.cpp).
std::string whole_seconds(std::chrono::milliseconds wait);

// The ring described at k_pipe_bytes (body_pipe.cpp).
class BodyPipe {
public:
    enum class Push { taken, full, failed };

    // Called with the pipe's lock held when the caller has made room in a
    // paused pipe, so that the transfer goes on; it must not block.
    explicit BodyPipe(std::function<void()> resume) : m_resume(std::move(resume)) {}

    // The session's thread: takes the whole piece, or none of it.
    Push push(const char* data, std::size_t size);
    // The session's thread, on a first byte that starts the body over (the
    // server ignored Range): the caller restarts the target before it
    // writes. The ring is empty then: nothing of this answer was pushed.
    void restart_target();
    // The session's thread: the transfer ended, no more bytes come and no
    // resume is asked for from here on.
    void close();
    // The calling thread: writes what arrives into `target` until the pipe
    // is closed. The first exception of the target is kept (failure()); the
    // bytes after it are dropped.
    void drain(BodyTarget& target);
    bool failed() const noexcept { return m_failed.load(); }
    bool paused() const noexcept { return m_paused.load(); }
    std::exception_ptr failure() const;

private:
    void copy_in(const char* data, std::size_t size);
    void write_piece(std::unique_lock<std::mutex>& lock, BodyTarget& target, std::size_t piece);

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

struct ContentRange {
    std::uint64_t first = 0;
    std::uint64_t last = 0;
    std::optional<std::uint64_t> total;  // nullopt for "*"
};

// ---- headers.cpp -------------------------------------------------------------

// "bytes FIRST-LAST/TOTAL" or "bytes FIRST-LAST/*"; nullopt for anything else.
std::optional<ContentRange> parse_content_range(const std::string& value);
// libcurl's header callback: records the status of each response (1xx and
// redirect hops included) and collects its header fields.
std::size_t on_header(char* data, std::size_t size, std::size_t count, void* user);

// ---- body_pipe.cpp -------------------------------------------------------------

// libcurl's body callback: a download's 2xx body goes to its target (through
// the pipe when there is one), any other body is kept, bounded, in the
// Response.
std::size_t on_body(char* data, std::size_t size, std::size_t count, void* user);
// Why a 206 cannot be appended to the target, or "" when it continues the
// bytes kept at the offset that was asked for.
std::string partial_problem(const Session::Attempt& attempt);
// Why the target must start over from byte 0 after this answer, or "".
std::string restart_reason(const Response& response, const Session::Attempt& attempt, const BodyTarget& target);
// The Range and If-Range lines that resume a download from the bytes its
// target holds; none for a request from byte 0.
std::vector<std::string> resume_headers(const Session::Attempt& attempt);
// After a response: the ETag of a 2xx body the target took, for the next
// attempt's If-Range.
void keep_validator(const Response& response, Session::Attempt& attempt);

}  // namespace detail

// State of one request/response exchange, shared with the libcurl callbacks.
struct Session::Attempt {
    Response response;
    BodyTarget* target = nullptr;
    std::string url;
    CURL* curl = nullptr;  // the exchange's easy handle, every option set
    const std::atomic<bool>* cancel = nullptr;
    const GetLimits* limits = nullptr;  // in-memory requests only
    // The minimum rate of a download (0: none), checked per window: the
    // window's start and the bytes received by then.
    std::uint64_t min_rate = 0;
    std::chrono::milliseconds rate_window{0};
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
    detail::BodyPipe* pipe = nullptr;

    // Readies the state for a new exchange with `url`; the validator and
    // the deadline carry over from the previous one (engine.cpp).
    void start(const std::string& to, BodyTarget* body, const Policy& policy);
};

struct Session::Handle {
    CURL* curl = nullptr;
    // Owned by the handle rather than a caller's stack frame: libcurl writes
    // into it for as long as the option is set.
    char error_buffer[CURL_ERROR_SIZE] = {};
    Handle();
    ~Handle();
    Handle(const Handle&) = delete;
    Handle& operator=(const Handle&) = delete;
};

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
// engine thread holds neither while libcurl runs callbacks (engine.cpp).
struct Session::Engine {
    struct Transfer {
        CURL* curl = nullptr;
        detail::BodyPipe* pipe = nullptr;  // closed when the transfer ends
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

    Engine();
    ~Engine();
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    // Runs one transfer to its end, as curl_easy_perform would. For a
    // download (`target` set), `*pipe_slot` points at the body pipe while
    // the transfer runs, and the calling thread drains it into `target`;
    // the target's exception comes back in `failure`.
    CURLcode perform(CURL* curl, BodyTarget* target, detail::BodyPipe** pipe_slot, std::exception_ptr& failure);
    // A caller made room in the paused pipe of `transfer` (its lock held:
    // the transfer has not ended). Allocates nothing.
    void resume(Transfer& transfer) noexcept;

private:
    void finish(Transfer* transfer, CURLcode code);
    // The thread's loop and its steps.
    void drive() noexcept;
    void add_submitted(std::vector<Transfer*>& batch, int& active);
    void resume_paused();
    void collect_done(int& active);
};

// One of the Policy::max_host_connections downloads from an origin, held
// for one exchange. API requests take none: they are small, and must not
// wait behind downloads (they have a deadline). Waiting polls the cancel
// flag (session.cpp).
struct Session::HostSlot {
    Session& session;
    std::string origin;  // empty: no bound, nothing held

    HostSlot(Session& owner, const std::string& url, bool download);
    ~HostSlot();
    HostSlot(const HostSlot&) = delete;
    HostSlot& operator=(const HostSlot&) = delete;
};

}  // namespace kernhub::http
