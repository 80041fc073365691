// OneAtATime (src/common/one_at_a_time.hpp) across fork(): a child made
// while one thread of its parent holds the turn and another waits for it
// inherits both marks but neither thread, and must take turns of its own,
// from one thread and from two, without waiting for ever. The turn's
// exclusion between threads is tested under ThreadSanitizer in
// tests/threads/test_turns.cpp.
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/one_at_a_time.hpp"
#include "support/forked.hpp"

using kernhub::OneAtATime;

TEST_CASE("a child forked while a thread holds a OneAtATime and another waits takes turns of its own", "[common]") {
    OneAtATime gate;
    std::mutex mutex;
    std::condition_variable changed;
    bool holding = false;
    bool release = false;
    std::vector<int> order;  // written only inside a turn
    std::thread holder([&] {
        const OneAtATime::Turn turn(gate);
        std::unique_lock<std::mutex> lock(mutex);
        holding = true;
        changed.notify_all();
        changed.wait(lock, [&] { return release; });
        order.push_back(1);
    });
    {
        // The deadline only bounds a failure.
        std::unique_lock<std::mutex> lock(mutex);
        REQUIRE(changed.wait_for(lock, std::chrono::seconds(30), [&] { return holding; }));
    }
    std::thread waiter([&] {
        const OneAtATime::Turn turn(gate);
        order.push_back(2);
    });
    // Until the waiter has counted itself as waiting (a bounded spin on an
    // event, not a timed sleep).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (gate.waiting() == 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    const bool waiter_waits = gate.waiting() == 1;

    const kernhub::test::Forked child = kernhub::test::run_forked([&] {
        ::alarm(20);  // a wait for ever ends the child, and fails the test
        std::atomic<int> turns{0};
        std::atomic<int> inside{0};
        std::atomic<bool> overlapped{false};
        auto take = [&] {
            for (int round = 0; round < 200; ++round) {
                const OneAtATime::Turn turn(gate);
                if (inside.fetch_add(1) != 0) overlapped = true;
                ++turns;
                inside.fetch_sub(1);
            }
        };
        take();
        std::thread first(take);
        std::thread second(take);
        first.join();
        second.join();
        return "turns " + std::to_string(turns.load()) + (overlapped ? " overlapped" : " one at a time");
    });

    {
        std::lock_guard<std::mutex> lock(mutex);
        release = true;
        changed.notify_all();
    }
    holder.join();
    waiter.join();
    REQUIRE(waiter_waits);
    INFO(child.out);
    CHECK(child.ok());
    CHECK(child.out == "turns 600 one at a time");
    // The parent goes on as before: its waiter came in after its holder.
    CHECK(order == std::vector<int>{1, 2});
    CHECK(gate.waiting() == 0);
    {
        const OneAtATime::Turn again(gate);
        CHECK(gate.waiting() == 0);
    }
}

TEST_CASE("a child forked by a thread holding a OneAtATime keeps the turn: its other threads wait for it", "[common]") {
    OneAtATime gate;
    std::optional<OneAtATime::Turn> held;
    held.emplace(gate);
    // fork() from inside the turn, as a sink or message function may.
    const kernhub::test::Forked child = kernhub::test::run_forked([&] {
        ::alarm(20);  // a wait for ever ends the child, and fails the test
        std::atomic<bool> entered{false};
        std::thread other([&] {
            const OneAtATime::Turn turn(gate);
            entered = true;
        });
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        while (gate.waiting() == 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
        const bool waited = gate.waiting() == 1 && !entered;
        held.reset();  // this thread's turn, in the child, ends
        other.join();
        return std::string(waited ? "waited" : "did not wait") + (entered ? " entered" : "");
    });
    held.reset();
    INFO(child.out);
    CHECK(child.ok());
    CHECK(child.out == "waited entered");
}
