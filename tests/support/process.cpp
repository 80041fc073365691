#include "support/process.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <stdexcept>

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace kernhub::test {
namespace {

std::vector<std::string> merged_environment(const EnvChanges& changes) {
    std::map<std::string, std::string> variables;
    for (char** entry = environ; *entry != nullptr; ++entry) {
        std::string item(*entry);
        const auto eq = item.find('=');
        if (eq != std::string::npos) {
            variables.emplace(item.substr(0, eq), item.substr(eq + 1));
        }
    }
    for (const auto& [name, value] : changes) {
        if (value) {
            variables[name] = *value;
        } else {
            variables.erase(name);
        }
    }
    std::vector<std::string> result;
    for (const auto& [name, value] : variables) {
        result.push_back(name + "=" + value);
    }
    return result;
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
    std::vector<char*> pointers;
    for (auto& s : strings) {
        pointers.push_back(s.data());
    }
    pointers.push_back(nullptr);
    return pointers;
}

// Only async-signal-safe calls between fork and exec: the parent may have threads.
[[noreturn]] void exec_child(char* const* argv, char* const* envp, const char* cwd, const int fds[3], int status_fd) {
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);  // a blocked SIGTERM would make the child unstoppable
    bool ready = true;
    for (int target = 0; ready && target < 3; ++target) {
        ready = dup2(fds[target], target) == target;
    }
    if (ready && (*cwd == '\0' || chdir(cwd) == 0)) {
        execvpe(argv[0], argv, envp);
    }
    const int error = errno;
    [[maybe_unused]] const ssize_t written = write(status_fd, &error, sizeof error);
    _exit(127);
}

// Appends everything readable from each descriptor to its string until all reach EOF.
void read_all(std::vector<std::pair<int, std::string*>> sources) {
    std::vector<pollfd> fds;
    for (const auto& source : sources) {
        fds.push_back({source.first, POLLIN, 0});
    }
    size_t open = fds.size();
    char buffer[65536];
    while (open > 0) {
        if (poll(fds.data(), fds.size(), -1) < 0) {
            if (errno == EINTR) {
                continue;
            }
            throw std::runtime_error(std::string("poll: ") + std::strerror(errno));
        }
        for (size_t i = 0; i < fds.size(); ++i) {
            if (fds[i].fd < 0 || fds[i].revents == 0) {
                continue;
            }
            const ssize_t n = read(fds[i].fd, buffer, sizeof buffer);
            if (n > 0) {
                sources[i].second->append(buffer, static_cast<size_t>(n));
            } else if (n == 0 || errno != EINTR) {
                fds[i].fd = -1;  // poll ignores negative descriptors
                --open;
            }
        }
    }
}

}  // namespace

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
    if (this != &other) {
        reset(other.release());
    }
    return *this;
}

int UniqueFd::release() {
    const int fd = m_fd;
    m_fd = -1;
    return fd;
}

void UniqueFd::reset(int fd) {
    if (m_fd >= 0) {
        close(m_fd);
    }
    m_fd = fd;
}

Pipe make_pipe() {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
        throw std::runtime_error(std::string("pipe2: ") + std::strerror(errno));
    }
    return {UniqueFd(fds[0]), UniqueFd(fds[1])};
}

pid_t spawn_process(const std::vector<std::string>& argv, const EnvChanges& env_changes, const std::string& cwd,
                    int stdin_fd, int stdout_fd, int stderr_fd) {
    if (argv.empty()) {
        throw std::invalid_argument("spawn_process: empty argv");
    }
    std::vector<std::string> args = argv;
    std::vector<std::string> env = merged_environment(env_changes);
    const auto arg_pointers = c_strings(args);
    const auto env_pointers = c_strings(env);
    const int fds[3] = {stdin_fd, stdout_fd, stderr_fd};
    // The child reports a failed chdir or exec through this pipe; a
    // successful exec closes it (close-on-exec), so EOF means "started".
    Pipe status = make_pipe();

    const pid_t pid = fork();
    if (pid < 0) {
        throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
    }
    if (pid == 0) {
        exec_child(arg_pointers.data(), env_pointers.data(), cwd.c_str(), fds, status.write.get());
    }
    status.write.reset();
    int child_errno = 0;
    ssize_t n;
    while ((n = read(status.read.get(), &child_errno, sizeof child_errno)) < 0 && errno == EINTR) {
    }
    if (n > 0) {
        wait_process(pid);
        throw std::runtime_error("cannot start " + argv[0] + (cwd.empty() ? "" : " in " + cwd) + ": " +
                                 std::strerror(child_errno));
    }
    return pid;
}

int wait_process(pid_t pid) {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            throw std::runtime_error(std::string("waitpid: ") + std::strerror(errno));
        }
    }
    return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

ProcessResult run_process(const std::vector<std::string>& argv, const EnvChanges& env_changes, const std::string& cwd) {
    UniqueFd null_input(open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (null_input.get() < 0) {
        throw std::runtime_error(std::string("open /dev/null: ") + std::strerror(errno));
    }
    Pipe out = make_pipe();
    Pipe err = make_pipe();
    const pid_t pid = spawn_process(argv, env_changes, cwd, null_input.get(), out.write.get(), err.write.get());
    // Our copies of the write ends must go, or the reads below never see EOF.
    out.write.reset();
    err.write.reset();

    ProcessResult result;
    read_all({{out.read.get(), &result.out}, {err.read.get(), &result.err}});
    result.exit_code = wait_process(pid);
    return result;
}

}  // namespace kernhub::test
