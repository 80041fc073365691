// A clock for http::Policy::clock that tests drive: a wait moves it on at
// once instead of sleeping, and every wait is recorded, so a test of a
// 30-second Retry-After takes no wall time and can check the 30 seconds.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <vector>

#include "http/http.hpp"

namespace kernhub::test {

class ManualClock final : public http::Clock {
public:
    ManualClock() : m_steady_start(std::chrono::steady_clock::now()), m_wall_start(std::chrono::system_clock::now()) {}

    std::chrono::steady_clock::time_point now() override { return m_steady_start + offset(); }
    std::chrono::system_clock::time_point wall_now() override {
        return m_wall_start + std::chrono::duration_cast<std::chrono::system_clock::duration>(offset());
    }
    void sleep_for(std::chrono::milliseconds delay) override {
        advance(delay);
        std::lock_guard<std::mutex> lock(m_mutex);
        m_sleeps.push_back(delay);
    }

    // Moves the clock on without a wait (time passing between two calls).
    void advance(std::chrono::milliseconds by) { m_offset_ms += by.count(); }
    // Everything slept so far.
    std::chrono::milliseconds slept() const {
        std::lock_guard<std::mutex> lock(m_mutex);
        std::chrono::milliseconds total{0};
        for (auto sleep : m_sleeps) total += sleep;
        return total;
    }
    std::size_t sleeps() const {
        std::lock_guard<std::mutex> lock(m_mutex);
        return m_sleeps.size();
    }

private:
    std::chrono::milliseconds offset() const { return std::chrono::milliseconds(m_offset_ms.load()); }

    const std::chrono::steady_clock::time_point m_steady_start;
    const std::chrono::system_clock::time_point m_wall_start;
    std::atomic<long long> m_offset_ms{0};
    mutable std::mutex m_mutex;
    std::vector<std::chrono::milliseconds> m_sleeps;  // guarded by m_mutex
};

}  // namespace kernhub::test
