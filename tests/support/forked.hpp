// Runs a function in a child made by fork(): for what a process does only
// once (a warning given once per process) or keeps for its life (the
// libraries it maps). Header-only, so that a test program that must not
// link the test support library (tests/lazyload) can use it too.
#pragma once

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <functional>
#include <stdexcept>
#include <string>

namespace kernhub::test {

struct Forked {
    std::string out;  // what the function returned
    int status = -1;  // waitpid's status
    // The child's function returned and its text arrived whole.
    bool ok() const { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }
};

// Runs `body` in a child and returns what it returned, through a pipe. The
// child ends with _exit (no atexit handlers, no Catch2 teardown): 0 after
// `body` returned and its text was written, 2 when it threw, 3 when the
// pipe failed. Throws std::runtime_error when no child can be made.
inline Forked run_forked(const std::function<std::string()>& body) {
    int fds[2];
    if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
    const pid_t pid = ::fork();
    if (pid < 0) {
        ::close(fds[0]);
        ::close(fds[1]);
        throw std::runtime_error("fork failed");
    }
    if (pid == 0) {
        ::close(fds[0]);
        std::string out;
        try {
            out = body();
        } catch (...) {
            ::_exit(2);
        }
        for (std::size_t done = 0; done < out.size();) {
            const ssize_t n = ::write(fds[1], out.data() + done, out.size() - done);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) ::_exit(3);
            done += static_cast<std::size_t>(n);
        }
        ::_exit(0);
    }
    ::close(fds[1]);
    Forked forked;
    char buffer[4096];
    for (;;) {
        const ssize_t n = ::read(fds[0], buffer, sizeof buffer);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        forked.out.append(buffer, static_cast<std::size_t>(n));
    }
    ::close(fds[0]);
    pid_t waited = -1;
    do {
        waited = ::waitpid(pid, &forked.status, 0);
    } while (waited < 0 && errno == EINTR);
    if (waited != pid) throw std::runtime_error("waitpid failed");
    return forked;
}

}  // namespace kernhub::test
