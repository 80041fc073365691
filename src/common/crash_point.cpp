#include "common/crash_point.hpp"

// Compiled twice (CMakeLists.txt): KERNHUB_TEST_HOOKS=1 for the hooked static
// library of a test build, 0 for everything else.
#if KERNHUB_TEST_HOOKS

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <mutex>
#include <string>

#include "common/once.hpp"

namespace kernhub {

namespace {

struct CrashPlan {
    std::string name;  // empty: no crash planned
    long hit = 1;
    std::atomic<long> seen{0};
};

CrashPlan& plan() {
    static CrashPlan instance;
    static Once once;
    once.call([] {
        // Read once, before any worker thread of a fetch reaches a point.
        const char* value = std::getenv("KERNHUB_TEST_CRASH_AT");  // NOLINT(concurrency-mt-unsafe)
        if (value == nullptr || *value == '\0') return;
        std::string text(value);
        const std::size_t colon = text.rfind(':');
        if (colon != std::string::npos) {
            char* end = nullptr;
            const long n = std::strtol(text.c_str() + colon + 1, &end, 10);
            if (end != nullptr && *end == '\0' && n > 0) {
                instance.hit = n;
                text.resize(colon);
            }
        }
        instance.name = text;
    });
    return instance;
}

}  // namespace

void crash_point(const char* name) noexcept {
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
