// The one check for use after fork() (src/http/fork_check.hpp), with a real
// fork: a child sees that it is one, takes the state over once, and the
// parent's view never changes; abandon lets go without destroying.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <memory>
#include <vector>

#include "http/fork_check.hpp"

using kernhub::http::abandon;
using kernhub::http::ForkCheck;

TEST_CASE("a ForkCheck tells a forked child once that it has taken over, and its parent never", "[http]") {
    ForkCheck check;
    CHECK_FALSE(check.in_child());
    CHECK_FALSE(check.take_over());
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        ::alarm(30);  // a child that hangs dies rather than hold up the test
        int failures = 0;
        if (!check.in_child()) failures |= 1;
        if (!check.take_over()) failures |= 2;  // the child's first use takes the state over
        if (check.take_over()) failures |= 4;   // and only the first
        if (check.in_child()) failures |= 8;    // the child owns it now
        // A grandchild is a child of the new owner.
        const pid_t grandchild = ::fork();
        if (grandchild == 0) ::_exit(check.in_child() && check.take_over() && !check.take_over() ? 0 : 1);
        int status = 0;
        if (grandchild < 0 || ::waitpid(grandchild, &status, 0) != grandchild || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0) {
            failures |= 16;
        }
        ::_exit(failures);
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    CHECK_FALSE(check.in_child());
    CHECK_FALSE(check.take_over());
}

namespace {

struct Counted {
    int* destroyed;
    explicit Counted(int* counter) : destroyed(counter) {}
    ~Counted() { ++*destroyed; }
    Counted(const Counted&) = delete;
    Counted& operator=(const Counted&) = delete;
};

}  // namespace

TEST_CASE("abandon lets go of inherited objects without destroying them", "[http]") {
    int destroyed = 0;
    std::vector<Counted*> raw;
    {
        std::unique_ptr<Counted> one = std::make_unique<Counted>(&destroyed);
        std::vector<std::unique_ptr<Counted>> many;
        many.push_back(std::make_unique<Counted>(&destroyed));
        many.push_back(std::make_unique<Counted>(&destroyed));
        raw = {one.get(), many[0].get(), many[1].get()};
        abandon(one);
        abandon(many);
        CHECK(one == nullptr);
        CHECK(many.empty());
    }
    CHECK(destroyed == 0);
    for (Counted* object : raw) delete object;  // the test's own, so that a leak checker stays quiet
    CHECK(destroyed == 3);
}
