// The process mark of OneAtATime (one_at_a_time.hpp): changed in every
// child made by fork(), before fork() returns there, by a pthread_atfork
// handler registered when the library is loaded.
#include "common/one_at_a_time.hpp"

#include <pthread.h>

namespace kernhub {

namespace {

// Only the child's handler writes it, while the child has one thread.
std::atomic<int> g_process_mark{1};

void mark_child_process() noexcept {
    g_process_mark.store(g_process_mark.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

// Fails only for want of memory, and then a child keeps its parent's mark:
// a turn its parent's thread held at fork() would never come free there.
const int g_mark_registered = ::pthread_atfork(nullptr, nullptr, &mark_child_process);

}  // namespace

int OneAtATime::this_process() noexcept {
    (void)g_mark_registered;
    return g_process_mark.load(std::memory_order_relaxed);
}

}  // namespace kernhub
