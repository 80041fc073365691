// One caller at a time through a stretch of code that runs someone else's
// function (an EventSink, a C program's message function), without holding
// a lock while it runs. A mutex held across the function would be inherited
// locked by a child that fork() makes while another thread is inside, and
// the child's first event would wait for ever. Instead the stretch is
// marked as taken by this process (its pid), under a mutex held only for
// moments, and callers wait on a condition variable; a child sees its
// parent's mark, not its own, and goes through.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <condition_variable>
#include <mutex>

namespace kernhub {

class OneAtATime {
public:
    // Takes the stretch once no other caller of this process holds it, and
    // holds it until destroyed. Throws std::system_error as std::mutex does.
    class Turn {
    public:
        explicit Turn(OneAtATime& gate) : m_gate(gate) {
            std::unique_lock<std::mutex> lock(m_gate.m_mutex);
            m_gate.m_free.wait(lock, [this] { return m_gate.m_taken_in != ::getpid(); });
            m_gate.m_taken_in = ::getpid();
        }
        ~Turn() {
            try {
                std::lock_guard<std::mutex> lock(m_gate.m_mutex);
                m_gate.m_taken_in = 0;
            } catch (...) {
                m_gate.m_taken_in = 0;  // a mutex that failed: the mark goes all the same
            }
            m_gate.m_free.notify_all();
        }
        Turn(const Turn&) = delete;
        Turn& operator=(const Turn&) = delete;

    private:
        OneAtATime& m_gate;
    };

private:
    std::mutex m_mutex;
    std::condition_variable m_free;
    pid_t m_taken_in = 0;  // the process whose thread holds the stretch, 0 for none
};

}  // namespace kernhub
