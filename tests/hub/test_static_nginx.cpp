// A static hub tree served by a real, unmodified nginx: the bundled demo hub
// must work over plain HTTP from any static web server (README.md, "Hubs"),
// as a fleet's shared mirror or HTTP cache needs.
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <thread>

#include "kernhub/kernhub.hpp"
#include "support/hub_server.hpp"
#include "support/process.hpp"
#include "support/requirements.hpp"
#include "support/temp_dir.hpp"

using namespace kernhub;
using namespace kernhub::test;
namespace fs = std::filesystem;

namespace {

fs::path find_nginx() {
    for (const char* candidate : {"/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/bin/nginx"}) {
        if (fs::exists(candidate)) return candidate;
    }
    return {};
}

KERNHUB_TEST_REQUIREMENT("needs:nginx", []() -> std::string {
    return find_nginx().empty() ? "nginx is not installed (.ci/install-deps installs it)" : "";
});

int free_port() {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    socklen_t len = sizeof addr;
    getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    close(fd);
    return ntohs(addr.sin_port);
}

// nginx in the foreground with a config of our own, stopped on destruction.
class Nginx {
public:
    Nginx(const fs::path& binary, const fs::path& root) : m_port(free_port()) {
        fs::path conf = m_dir.path() / "nginx.conf";
        std::ofstream(conf) << "daemon off;\nworker_processes 1;\n"
                            << (geteuid() == 0 ? "user root;\n" : "") << "pid " << (m_dir.path() / "nginx.pid").string()
                            << ";\nerror_log " << (m_dir.path() / "error.log").string() << ";\n"
                            << "events { worker_connections 64; }\n"
                            << "http {\n  access_log " << access_log().string() << ";\n"
                            << "  client_body_temp_path " << m_dir.path().string() << ";\n"
                            << "  server {\n    listen 127.0.0.1:" << m_port << ";\n    root " << root.string()
                            << ";\n    default_type application/octet-stream;\n  }\n}\n";
        UniqueFd null_fd(open("/dev/null", O_RDWR | O_CLOEXEC));
        m_pid = spawn_process({binary.string(), "-c", conf.string(), "-p", m_dir.path().string()}, {}, "",
                              null_fd.get(), null_fd.get(), null_fd.get());
        for (int i = 0; i < 100; ++i) {
            if (http_request("GET", endpoint() + "/_hub.json").status == 200) return;
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        throw std::runtime_error("nginx did not start on port " + std::to_string(m_port));
    }
    ~Nginx() {
        kill(m_pid, SIGQUIT);
        wait_process(m_pid);
    }
    std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(m_port); }
    fs::path access_log() const { return m_dir.path() / "access.log"; }
    std::size_t lines_in_access_log() const {
        std::ifstream in(access_log());
        return static_cast<std::size_t>(std::count(std::istreambuf_iterator<char>(in), {}, '\n'));
    }

private:
    TempDir m_dir;
    int m_port;
    pid_t m_pid = -1;
};

}  // namespace

TEST_CASE("the demo hub served by stock nginx fetches and loads over HTTP", "[hub][nginx][needs:nginx]") {
    Nginx server(find_nginx(), KERNHUB_DEMO_HUB);
    TempDir dir;
    Options options;
    options.endpoint = server.endpoint();
    options.cache_dir = (dir.path() / "cache").string();
    options.project_dir = dir.path().string();
    options.offline = false;
    options.token = "";

    Client client(options);
    LoadResult cold = client.load("vector-add");
    CHECK(cold.fetch.repo_id == "kernhub-demo/vector-add");
    CHECK(cold.fetch.requests == 4);  // revision, tree, metadata.json, the .so (no redirect on a static server)
    CHECK(cold.fetch.bytes_downloaded > 0);
    auto add = KernelFn<void(const float*, const float*, float*, std::size_t)>(cold.address);
    float a[2] = {1, 2}, b[2] = {3, 4}, out[2] = {};
    add(a, b, out, 2);
    CHECK(out[1] == 6.0f);

    std::size_t before = server.lines_in_access_log();
    FetchResult warm = Client(options).fetch("vector-add");
    CHECK(warm.requests == 1);
    CHECK(warm.bytes_downloaded == 0);
    // nginx logs after the response; give it a moment.
    for (int i = 0; i < 20 && server.lines_in_access_log() == before; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    CHECK(server.lines_in_access_log() == before + 1);
}
