// How a response's bytes reach their BodyTarget: libcurl's body callback,
// the pipe that carries a download's bytes from the session's thread to
// the calling thread, and resuming a download (Range, If-Range, the checks
// on a 206 or 416 that decide whether the kept bytes can be continued).
#include <algorithm>
#include <utility>

#include "http/session_detail.hpp"
#include "kernhub/error.hpp"

namespace kernhub::http {

bool is_complete_416(const Response& response, const BodyTarget& target) {
    auto expected = target.expected_size();
    return response.status == 416 && expected && target.size() == *expected;
}

namespace detail {

// ---- the pipe ------------------------------------------------------------------

BodyPipe::Push BodyPipe::push(const char* data, std::size_t size) {
    std::lock_guard<std::mutex> guard(m_mutex);
    if (m_failed.load()) return Push::failed;
    if (size > k_pipe_bytes) {
        // libcurl hands the body over in pieces of at most
        // CURL_MAX_WRITE_SIZE (16 KiB); a larger one could never fit,
        // and the session's thread never waits for a caller.
        m_error = std::make_exception_ptr(Error(
            ErrorCode::internal, "libcurl handed over " + std::to_string(size) + " body bytes at once, more than the " +
                                     std::to_string(k_pipe_bytes) + "-byte body pipe holds"));
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

void BodyPipe::restart_target() {
    std::lock_guard<std::mutex> guard(m_mutex);
    m_restart = true;
}

void BodyPipe::close() {
    std::lock_guard<std::mutex> guard(m_mutex);
    m_closed = true;
    m_changed.notify_all();  // under the lock: the pipe may end as soon as it is released
}

void BodyPipe::drain(BodyTarget& target) {
    std::unique_lock<std::mutex> lock(m_mutex);
    for (;;) {
        m_changed.wait(lock, [this] { return m_used > 0 || m_closed; });
        if (m_used == 0) return;
        const std::size_t piece = std::min(m_used, k_pipe_bytes - m_head);
        if (!m_failed.load()) write_piece(lock, target, piece);
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

// Writes the oldest `piece` bytes with the lock released: the session's
// thread only fills the free part of the ring meanwhile.
void BodyPipe::write_piece(std::unique_lock<std::mutex>& lock, BodyTarget& target, std::size_t piece) {
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

std::exception_ptr BodyPipe::failure() const {
    std::lock_guard<std::mutex> guard(m_mutex);
    return m_error;
}

// With the lock held and room for `size`.
void BodyPipe::copy_in(const char* data, std::size_t size) {
    const bool was_empty = m_used == 0;
    const std::size_t tail = (m_head + m_used) % k_pipe_bytes;
    const std::size_t first = std::min(size, k_pipe_bytes - tail);
    std::copy(data, data + first, m_ring.get() + tail);
    std::copy(data + first, data + size, m_ring.get());
    m_used += size;
    if (was_empty) m_changed.notify_all();  // the caller waits only on an empty ring
}

// ---- the body callback -------------------------------------------------------------

namespace {

// A download's 2xx body: into the target, through the pipe when there is
// one. 0 aborts the transfer.
std::size_t take_target_bytes(Session::Attempt& attempt, const char* data, std::size_t bytes) {
    const long status = attempt.response.status;
    if (attempt.first_body_byte && status == 206) {
        attempt.range_problem = partial_problem(attempt);
        if (!attempt.range_problem.empty()) return 0;  // aborts before a byte lands in the target
    }
    if (attempt.first_body_byte && status == 200 && attempt.target->size() > 0) {
        // Range was ignored: the body starts at byte 0.
        if (attempt.pipe == nullptr) {
            attempt.target->restart();
        } else {
            attempt.pipe->restart_target();
        }
    }
    attempt.first_body_byte = false;
    if (attempt.pipe == nullptr) {
        attempt.target->write(data, bytes);
        return bytes;
    }
    switch (attempt.pipe->push(data, bytes)) {
        case BodyPipe::Push::taken:
            return bytes;
        case BodyPipe::Push::full:
            return CURL_WRITEFUNC_PAUSE;  // offered again once the caller made room
        case BodyPipe::Push::failed:
            break;
    }
    return 0;  // the target failed: its exception is the pipe's
}

// The body of an in-memory request, whole up to its limit.
std::size_t keep_memory_body(Session::Attempt& attempt, const char* data, std::size_t bytes) {
    const GetLimits* limits = attempt.limits;
    const std::size_t max_body = limits != nullptr && limits->max_body ? *limits->max_body : k_max_memory_body;
    if (attempt.response.body.size() + bytes > max_body) {
        if (limits != nullptr && !limits->over_body_message.empty()) {
            throw Error(ErrorCode::network, limits->over_body_message);
        }
        throw Error(ErrorCode::network,
                    "hub response from " + redact(attempt.url) + " exceeds " + std::to_string(max_body) + " bytes (" +
                        (limits != nullptr && limits->max_body ? "the caller's cap" : "k_max_memory_body") +
                        "); check the endpoint");
    }
    attempt.response.body.append(data, bytes);
    return bytes;
}

}  // namespace

std::size_t on_body(char* data, std::size_t size, std::size_t count, void* user) {
    auto* attempt = static_cast<Session::Attempt*>(user);
    std::size_t bytes = size * count;
    long status = attempt->response.status;
    bool success = status == 200 || status == 206;
    try {
        if (attempt->target != nullptr && success) return take_target_bytes(*attempt, data, bytes);
        if (attempt->target != nullptr) {
            // Error and redirect bodies only feed messages: keep the start.
            std::size_t room = k_max_error_body - std::min(k_max_error_body, attempt->response.body.size());
            attempt->response.body.append(data, std::min(room, bytes));
            return bytes;
        }
        return keep_memory_body(*attempt, data, bytes);
    } catch (...) {
        attempt->target_error = std::current_exception();
        return 0;  // aborts the transfer; rethrown after curl_easy_perform
    }
}

// ---- resuming ------------------------------------------------------------------

std::string partial_problem(const Session::Attempt& attempt) {
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

std::string restart_reason(const Response& response, const Session::Attempt& attempt, const BodyTarget& target) {
    if (!attempt.range_problem.empty()) return attempt.range_problem;
    if (response.status == 416 && !is_complete_416(response, target)) {
        if (attempt.range_start == 0) return "HTTP 416 to a request for the whole file";
        auto expected = target.expected_size();
        return "HTTP 416 for a range from byte " + std::to_string(attempt.range_start) +
               (expected ? " of a " + std::to_string(*expected) + "-byte file" : std::string());
    }
    return {};
}

std::vector<std::string> resume_headers(const Session::Attempt& attempt) {
    if (attempt.range_start == 0) return {};
    std::vector<std::string> lines{"Range: bytes=" + std::to_string(attempt.range_start) + "-"};
    std::string validator = !attempt.validator.empty() ? attempt.validator : attempt.target->validator();
    if (!validator.empty()) lines.push_back("If-Range: " + validator);
    return lines;
}

void keep_validator(const Response& response, Session::Attempt& attempt) {
    if ((response.status == 200 || response.status == 206) && attempt.range_problem.empty() &&
        !response.header("etag").empty()) {
        attempt.validator = response.header("etag");
    }
}

}  // namespace detail

}  // namespace kernhub::http
