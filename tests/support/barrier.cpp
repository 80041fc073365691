#include "support/barrier.hpp"

#include <thread>
#include <vector>

namespace kernhub::test {

void Barrier::arrive_and_wait() {
    std::unique_lock<std::mutex> lock(m_mutex);
    const std::uint64_t round = m_round;
    if (++m_waiting == m_parties) {
        m_waiting = 0;
        ++m_round;
        m_all_here.notify_all();
        return;
    }
    m_all_here.wait(lock, [&] { return m_round != round; });
}

void run_together(int threads, const std::function<void(int)>& body) {
    Barrier start(threads);
    std::vector<std::thread> pool;
    pool.reserve(static_cast<std::size_t>(threads));
    for (int t = 0; t < threads; ++t) {
        pool.emplace_back([&, t] {
            start.arrive_and_wait();
            body(t);
        });
    }
    for (auto& thread : pool) thread.join();
}

}  // namespace kernhub::test
