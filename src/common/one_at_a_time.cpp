// The process mark (process_mark.hpp): changed in every child made by
// fork(), before fork() returns there, by a pthread_atfork handler
// registered when the library is loaded; and the turns of OneAtATime
// (one_at_a_time.hpp) each thread holds, innermost first, which the
// handler marks anew for the forking thread.
#include "common/one_at_a_time.hpp"

#include <pthread.h>

namespace kernhub {

namespace {

// Only the child's handler writes it, while the child has one thread.
std::atomic<int> g_process_mark{1};

// The innermost turn this thread holds; each links to the one outside it.
thread_local OneAtATime::Turn* t_innermost = nullptr;

void mark_child_process() noexcept {
    const int mark = g_process_mark.load(std::memory_order_relaxed) + 1;
    g_process_mark.store(mark, std::memory_order_relaxed);
    OneAtATime::mark_held_turns(t_innermost, mark);
}

// Fails only for want of memory, and then a child keeps its parent's mark:
// a turn its parent's thread held at fork() would never come free there.
const int g_mark_registered = ::pthread_atfork(nullptr, nullptr, &mark_child_process);

}  // namespace

int process_mark() noexcept {
    (void)g_mark_registered;
    return g_process_mark.load(std::memory_order_relaxed);
}

OneAtATime::Turn::Turn(OneAtATime& gate) noexcept : m_gate(gate), m_outer(t_innermost) {
    m_gate.take();
    t_innermost = this;
}

OneAtATime::Turn::~Turn() {
    t_innermost = m_outer;
    m_gate.give();
}

}  // namespace kernhub
