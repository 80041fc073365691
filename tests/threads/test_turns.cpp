// OneAtATime (src/common/one_at_a_time.hpp), the turn every event sink
// and C message function runs in: threads contending for it never overlap,
// and what one writes inside a turn the next sees (ThreadSanitizer, run by
// `tests/run.sh --tsan`, reports a plain counter written by two threads at
// once). Across fork(): tests/common/test_one_at_a_time.cpp.
#include <atomic>
#include <catch2/catch.hpp>
#include <thread>
#include <vector>

#include "common/one_at_a_time.hpp"
#include "support/barrier.hpp"

using kernhub::OneAtATime;

TEST_CASE("threads contending for a OneAtATime go through one at a time, each seeing the last one's writes",
          "[threads]") {
    constexpr int k_turn_threads = 8;
    constexpr int k_turns_each = 2000;
    OneAtATime gate;
    long plain_count = 0;  // not atomic: the turn is all that orders it
    std::atomic<int> inside{0};
    std::atomic<bool> overlapped{false};
    kernhub::test::Barrier start(k_turn_threads);
    std::vector<std::thread> threads;
    for (int t = 0; t < k_turn_threads; ++t) {
        threads.emplace_back([&] {
            start.arrive_and_wait();
            for (int i = 0; i < k_turns_each; ++i) {
                const OneAtATime::Turn turn(gate);
                if (inside.fetch_add(1) != 0) overlapped = true;
                ++plain_count;
                if (i % 64 == 0) std::this_thread::yield();  // let others come to wait on the word
                inside.fetch_sub(1);
            }
        });
    }
    for (std::thread& thread : threads) thread.join();
    CHECK_FALSE(overlapped.load());
    CHECK(plain_count == static_cast<long>(k_turn_threads) * k_turns_each);
    CHECK(gate.waiting() == 0);
}
