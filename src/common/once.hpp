// Runs a function once per Once object, as std::call_once does: concurrent
// callers wait for the first, and a function that throws leaves the next
// caller to try again.
//
// Made of an atomic flag and a mutex rather than std::call_once, because
// std::call_once is pthread_once underneath, and an exception that leaves
// the function unwinds through glibc's pthread_once frame. glibc unwinds
// that frame with the shared libgcc_s it opens itself; the kernhub program
// links libgcc's unwinder statically (docs/performance.md, "Start-up
// cost"), and two unwinders on one exception end in abort().
#pragma once

#include <atomic>
#include <mutex>
#include <utility>

namespace kernhub {

class Once {
public:
    template <class Function>
    void call(Function&& function) {
        if (m_done.load(std::memory_order_acquire)) return;
        std::lock_guard<std::mutex> guard(m_mutex);
        if (m_done.load(std::memory_order_relaxed)) return;
        std::forward<Function>(function)();
        m_done.store(true, std::memory_order_release);
    }

private:
    std::atomic<bool> m_done{false};
    std::mutex m_mutex;
};

}  // namespace kernhub
