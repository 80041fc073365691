// Running child processes from tests: the CLI, make_hub.py, the hub server.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

namespace kernhub::test {

// Variables to set (a value) or unset (nullopt) on top of the current environment.
using EnvChanges = std::map<std::string, std::optional<std::string>>;

struct ProcessResult {
    int exit_code = -1;  // the exit status, or 128 + signal number when killed by a signal
    std::string out;
    std::string err;
};

// Runs argv (argv[0] is looked up in PATH when it has no slash) with stdin
// from /dev/null and waits for it. stdout and stderr are read concurrently,
// so a child writing a lot to both cannot deadlock. An empty cwd keeps ours.
// Throws std::runtime_error when the program cannot be started.
ProcessResult run_process(const std::vector<std::string>& argv, const EnvChanges& env_changes = {},
                          const std::string& cwd = "");

// Owns one file descriptor and closes it on destruction.
class UniqueFd {
public:
    explicit UniqueFd(int fd = -1) : m_fd(fd) {}
    ~UniqueFd() { reset(); }
    UniqueFd(UniqueFd&& other) noexcept : m_fd(other.release()) {}
    UniqueFd& operator=(UniqueFd&& other) noexcept;
    UniqueFd(const UniqueFd&) = delete;
    UniqueFd& operator=(const UniqueFd&) = delete;

    int get() const { return m_fd; }
    int release();
    void reset(int fd = -1);

private:
    int m_fd;
};

struct Pipe {
    UniqueFd read;
    UniqueFd write;
};

// A pipe whose ends are close-on-exec, so that children started concurrently
// by other threads do not inherit them and keep them open.
Pipe make_pipe();

// The building blocks of run_process, for a child that outlives one call.
// Starts argv with the given descriptors as its stdin, stdout and stderr; the
// caller keeps (and closes) its own copies. The descriptors must not be 0, 1 or 2.
pid_t spawn_process(const std::vector<std::string>& argv, const EnvChanges& env_changes, const std::string& cwd,
                    int stdin_fd, int stdout_fd, int stderr_fd);

// Waits for pid to end; returns what ProcessResult::exit_code describes.
int wait_process(pid_t pid);

}  // namespace kernhub::test
