// One caller at a time through a stretch of code that runs someone else's
// function (an EventSink, a C program's message function), with nothing a
// child made by fork() could inherit in a state it cannot leave.
//
// A mutex held across the function would be inherited locked by a child
// forked while another thread is inside, and so would a condition
// variable's record of the threads waiting on it: the child's first event
// would wait for ever, or its first wake-up would. Here the whole state is
// one word: the mark of the process whose thread holds the stretch
// (process_mark.hpp), or 0. A caller takes the word from 0 or from another
// process's mark (a child sees its parent's, made by a thread it does not
// have, and takes it over), and waits with a Linux futex on the word while
// a thread of its own process holds it. The turns the forking thread
// itself holds (fork() called from inside a sink) go on in the child,
// which has that thread: the fork handler marks them with the child's
// mark, so the child's other threads still wait for them. A child made
// without the handlers (_Fork(), a raw clone) keeps its parent's mark, and
// a turn a parent's thread held then is never free there. Releasing stores
// 0 and wakes the waiters; the count of waiters only spares the wake-up
// call when there are none, and one inherited from a parent costs a child
// a needless call, never a wait.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <climits>

#include "common/process_mark.hpp"

namespace kernhub {

class OneAtATime {
public:
    // Holds the stretch from construction, once no other thread of this
    // process holds it, until destruction. Never throws.
    class Turn {
    public:
        explicit Turn(OneAtATime& gate) noexcept;
        ~Turn();
        Turn(const Turn&) = delete;
        Turn& operator=(const Turn&) = delete;

    private:
        friend class OneAtATime;
        OneAtATime& m_gate;
        Turn* m_outer;  // the turn this thread held before this one, or null
    };

    // How many threads are waiting for a turn (one inherited from a parent
    // process counts too): for tests that must know a thread has come to
    // wait.
    int waiting() const noexcept { return m_waiters.load(std::memory_order_seq_cst); }

    // In a child made by fork(), run by the handler: the turns the forking
    // thread holds (`innermost` and the ones outside it) take `mark`.
    static void mark_held_turns(Turn* innermost, int mark) noexcept {
        for (Turn* turn = innermost; turn != nullptr; turn = turn->m_outer) {
            turn->m_gate.m_taken_in.store(mark, std::memory_order_relaxed);
        }
    }

private:
    void take() noexcept {
        const int self = process_mark();
        int seen = m_taken_in.load(std::memory_order_acquire);
        for (;;) {
            if (seen != self) {
                // Free, or marked by a parent process: take it.
                if (m_taken_in.compare_exchange_weak(seen, self, std::memory_order_acquire)) return;
                continue;
            }
            m_waiters.fetch_add(1, std::memory_order_seq_cst);
            // Returns at once unless the word still holds this process's
            // mark; a wake-up, a signal or a spurious return all look again.
            (void)::syscall(SYS_futex, word(), FUTEX_WAIT_PRIVATE, self, nullptr, nullptr, 0);
            m_waiters.fetch_sub(1, std::memory_order_seq_cst);
            seen = m_taken_in.load(std::memory_order_acquire);
        }
    }
    void give() noexcept {
        m_taken_in.store(0, std::memory_order_seq_cst);
        // A waiter counted before this load sleeps only while the word
        // holds its mark, which the store above has cleared.
        if (m_waiters.load(std::memory_order_seq_cst) > 0) {
            (void)::syscall(SYS_futex, word(), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
        }
    }
    // The futex is the atomic's own int: lock-free, so nothing but the int.
    int* word() noexcept { return reinterpret_cast<int*>(&m_taken_in); }

    static_assert(std::atomic<int>::is_always_lock_free && sizeof(std::atomic<int>) == sizeof(int),
                  "a futex word is a plain int in memory");
    std::atomic<int> m_taken_in{0};
    std::atomic<int> m_waiters{0};
};

}  // namespace kernhub
