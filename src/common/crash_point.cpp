#include "common/crash_point.hpp"

// Compiled twice (CMakeLists.txt): KERNHUB_TEST_HOOKS=1 for the hooked static
// library of a test build, 0 for everything else.
#if KERNHUB_TEST_HOOKS

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

#include "common/once.hpp"

namespace kernhub {

namespace {

struct CrashPlan {
    std::string name;  // empty: no crash planned
    long hit = 1;
    std::atomic<long> seen{0};
    std::string pause_file;  // for the pause plan: the file it waits on
};

// "NAME[:N]" into the plan's name and hit.
void parse_point(std::string text, CrashPlan& plan) {
    const std::size_t colon = text.rfind(':');
    if (colon != std::string::npos) {
        char* end = nullptr;
        const long n = std::strtol(text.c_str() + colon + 1, &end, 10);
        if (end != nullptr && *end == '\0' && n > 0) {
            plan.hit = n;
            text.resize(colon);
        }
    }
    plan.name = text;
}

// Read once, before any worker thread of a fetch reaches a point.
const char* env_value(const char* name) {
    const char* value = std::getenv(name);  // NOLINT(concurrency-mt-unsafe)
    return value == nullptr || *value == '\0' ? nullptr : value;
}

CrashPlan& plan() {
    static CrashPlan instance;
    static Once once;
    once.call([] {
        if (const char* value = env_value("KERNHUB_TEST_CRASH_AT")) parse_point(value, instance);
    });
    return instance;
}

// KERNHUB_TEST_PAUSE_AT=NAME[:N]=FILE: the Nth time a thread reaches the
// point it creates FILE and waits, polling, until FILE is gone (at most
// 60 s), so that a test can run another command at exactly that step.
CrashPlan& pause_plan() {
    static CrashPlan instance;
    static Once once;
    once.call([] {
        const char* value = env_value("KERNHUB_TEST_PAUSE_AT");
        if (value == nullptr) return;
        const std::string text(value);
        const std::size_t equals = text.find('=');
        if (equals == std::string::npos || equals + 1 == text.size()) return;
        instance.pause_file = text.substr(equals + 1);
        parse_point(text.substr(0, equals), instance);
    });
    return instance;
}

void pause_here(const std::string& file) {
    const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return;
    ::close(fd);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    struct stat st {};
    while (::lstat(file.c_str(), &st) == 0 && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
}

}  // namespace

void crash_point(const char* name) noexcept {
    CrashPlan& pause = pause_plan();
    if (!pause.name.empty() && pause.name == name && pause.seen.fetch_add(1) + 1 == pause.hit) {
        pause_here(pause.pause_file);
    }
    CrashPlan& p = plan();
    if (p.name.empty() || p.name != name) return;
    if (p.seen.fetch_add(1) + 1 == p.hit) {
        ::kill(::getpid(), SIGKILL);
        ::_exit(137);  // not reached
    }
}

}  // namespace kernhub

#else

namespace kernhub {

void crash_point(const char* /*name*/) noexcept {}

}  // namespace kernhub

#endif
