// A download target whose first write waits until the test opens its gate,
// for tests of a transfer whose consumer stalls. The wait ends after 20 s
// (timed_out), so that a regression fails instead of hanging.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>

#include "support/string_target.hpp"

namespace kernhub::test {

class GatedTarget : public StringTarget {
public:
    void write(const char* bytes, std::size_t count) override {
        std::unique_lock<std::mutex> lock(m_mutex);
        m_writing = true;
        m_changed.notify_all();
        if (!m_changed.wait_for(lock, std::chrono::seconds(20), [this] { return m_open; })) timed_out = true;
        lock.unlock();
        StringTarget::write(bytes, count);
    }
    // Returns once the first write has begun (or after 20 s).
    void wait_for_first_write() {
        std::unique_lock<std::mutex> lock(m_mutex);
        m_changed.wait_for(lock, std::chrono::seconds(20), [this] { return m_writing; });
    }
    void open() {
        std::lock_guard<std::mutex> guard(m_mutex);
        m_open = true;
        m_changed.notify_all();
    }
    bool timed_out = false;

private:
    std::mutex m_mutex;
    std::condition_variable m_changed;
    bool m_writing = false;
    bool m_open = false;
};

}  // namespace kernhub::test
