// Real web servers on loopback for the mirror tests: a stock nginx started
// in the foreground with a configuration of the test's own, and Python's
// `http.server` serving a folder. Each is stopped when the object goes.
#pragma once

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>

#include "support/build_paths.hpp"
#include "support/hub_server.hpp"
#include "support/process.hpp"
#include "support/requirements.hpp"
#include "support/temp_dir.hpp"

namespace kernhub::test::serve {

namespace fs = std::filesystem;

inline fs::path find_nginx() {
    for (const char* candidate : {"/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/bin/nginx"}) {
        if (fs::exists(candidate)) return candidate;
    }
    return {};
}

// A port nothing listens on right now (the kernel's pick for an ephemeral bind).
inline int free_port() {
    UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) throw std::runtime_error("bind failed");
    socklen_t len = sizeof addr;
    getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len);
    return ntohs(addr.sin_port);
}

// Polls `url` until any HTTP answer arrives; throws after about 10 s.
inline void wait_until_serving(const std::string& url, const std::string& what) {
    for (int i = 0; i < 200; ++i) {
        if (http_request("GET", url).status != 0) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    throw std::runtime_error(what + " did not answer " + url);
}

// nginx in the foreground; `http_body` goes inside http { } after the
// temp paths, which point into the server's own temp dir (written @DIR@ in
// http_body, e.g. for a proxy_cache_path).
class Nginx {
public:
    Nginx(std::string http_body, int port) : m_port(port) {
        const fs::path dir = m_dir.path();
        for (auto at = http_body.find("@DIR@"); at != std::string::npos; at = http_body.find("@DIR@")) {
            http_body.replace(at, 5, dir.string());
        }
        const fs::path conf = dir / "nginx.conf";
        std::ofstream out(conf);
        out << "daemon off;\nworker_processes 1;\n"
            << (geteuid() == 0 ? "user root;\n" : "") << "pid " << (dir / "nginx.pid").string() << ";\nerror_log "
            << (dir / "error.log").string() << ";\nevents { worker_connections 64; }\nhttp {\n"
            << "  access_log " << access_log().string() << ";\n";
        for (const char* temp : {"client_body", "proxy", "fastcgi", "uwsgi", "scgi"}) {
            out << "  " << temp << "_temp_path " << (dir / temp).string() << ";\n";
        }
        out << http_body << "\n}\n";
        out.close();
        const ProcessResult check =
            run_process({find_nginx().string(), "-t", "-q", "-c", conf.string(), "-p", dir.string()});
        if (check.exit_code != 0) throw std::runtime_error("nginx -t refused the configuration:\n" + check.err);
        UniqueFd null_fd(open("/dev/null", O_RDWR | O_CLOEXEC));
        m_pid = spawn_process({find_nginx().string(), "-c", conf.string(), "-p", dir.string()}, {}, "", null_fd.get(),
                              null_fd.get(), null_fd.get());
        wait_until_serving(endpoint() + "/", "nginx");
    }
    ~Nginx() {
        kill(m_pid, SIGQUIT);
        wait_process(m_pid);
    }
    Nginx(const Nginx&) = delete;
    Nginx& operator=(const Nginx&) = delete;

    std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(m_port); }
    fs::path access_log() const { return m_dir.path() / "access.log"; }

private:
    TempDir m_dir;
    int m_port;
    pid_t m_pid = -1;
};

// python3 -m http.server over `root`, a stock static file server.
class PythonHttpServer {
public:
    explicit PythonHttpServer(const fs::path& root) : m_port(free_port()) {
        UniqueFd null_fd(open("/dev/null", O_RDWR | O_CLOEXEC));
        m_pid = spawn_process({KERNHUB_PYTHON, "-m", "http.server", "--bind", "127.0.0.1", "--directory", root.string(),
                               std::to_string(m_port)},
                              {}, "", null_fd.get(), null_fd.get(), null_fd.get());
        wait_until_serving(endpoint() + "/", "python3 -m http.server");
    }
    ~PythonHttpServer() {
        kill(m_pid, SIGTERM);
        wait_process(m_pid);
    }
    PythonHttpServer(const PythonHttpServer&) = delete;
    PythonHttpServer& operator=(const PythonHttpServer&) = delete;

    std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(m_port); }

private:
    int m_port;
    pid_t m_pid = -1;
};

}  // namespace kernhub::test::serve
