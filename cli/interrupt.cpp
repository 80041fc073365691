#include "interrupt.hpp"

#include <csignal>

namespace kernhub::cli {

namespace {

std::atomic<bool> g_interrupted{false};
volatile sig_atomic_t g_signal = 0;

static_assert(std::atomic<bool>::is_always_lock_free, "the flag is set from a signal handler");

void on_signal(int signo) {
    g_signal = signo;
    g_interrupted.store(true);
    // The next SIGINT or SIGTERM takes the default action.
    struct sigaction action {};
    action.sa_handler = SIG_DFL;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, nullptr);
    sigaction(SIGTERM, &action, nullptr);
}

}  // namespace

void install_interrupt_handlers() {
    struct sigaction action {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = 0;
    sigaction(SIGINT, &action, nullptr);
    sigaction(SIGTERM, &action, nullptr);
}

const std::atomic<bool>* interrupt_flag() {
    return &g_interrupted;
}

int interrupt_signal() {
    return g_signal;
}

std::string interrupted_line(const char* note) {
    const int signo = interrupt_signal();
    const char* name = signo == SIGTERM ? "SIGTERM" : signo == SIGINT ? "SIGINT" : "a cancel request";
    return std::string("interrupted by ") + name + "; " + note;
}

int interrupted_exit_code() {
    const int signo = interrupt_signal();
    return signo != 0 ? 128 + signo : 130;
}

}  // namespace kernhub::cli
