// Making test threads overlap on purpose: a reusable barrier (std::barrier
// is C++20) and a helper that starts a group of threads at one instant.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>

namespace kernhub::test {

// `parties` threads meet at arrive_and_wait(); once the last arrives all go
// on, and the barrier is ready for the next round.
class Barrier {
public:
    explicit Barrier(int parties) : m_parties(parties) {}
    Barrier(const Barrier&) = delete;
    Barrier& operator=(const Barrier&) = delete;

    void arrive_and_wait();

private:
    std::mutex m_mutex;
    std::condition_variable m_all_here;
    const int m_parties;
    int m_waiting = 0;
    std::uint64_t m_round = 0;
};

// Runs body(0) ... body(threads - 1) on as many threads, released together
// once all have started, and joins them.
void run_together(int threads, const std::function<void(int)>& body);

}  // namespace kernhub::test
