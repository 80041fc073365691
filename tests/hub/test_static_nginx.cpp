// A static hub tree served by a real, unmodified nginx: the bundled demo hub
// must work over plain HTTP from any static web server (docs/ci-images.md, "Hubs"),
// as a fleet's shared mirror or HTTP cache needs.
#include <curl/curl.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "http/http.hpp"
#include "kernhub/error.hpp"
#include "kernhub/kernhub.hpp"
#include "support/build_paths.hpp"
#include "support/gated_target.hpp"
#include "support/hub_builder.hpp"
#include "support/hub_server.hpp"
#include "support/kernel_hub.hpp"
#include "support/process.hpp"
#include "support/requirements.hpp"
#include "support/slurp.hpp"
#include "support/string_target.hpp"
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

// HTTPS with HTTP/2 needs nginx's ssl and http_v2 modules, the openssl
// command (for the certificate) and a libcurl built with HTTP/2.
KERNHUB_TEST_REQUIREMENT("needs:https-h2", []() -> std::string {
    const fs::path nginx = find_nginx();
    if (nginx.empty()) return "nginx is not installed (.ci/install-deps installs it)";
    const ProcessResult modules = run_process({nginx.string(), "-V"});
    if (modules.err.find("http_v2_module") == std::string::npos ||
        modules.err.find("http_ssl_module") == std::string::npos) {
        return "this nginx lacks the http_ssl or http_v2 module";
    }
    try {
        if (run_process({"openssl", "version"}).exit_code != 0) return "the openssl command does not run";
    } catch (const std::exception&) {
        return "the openssl command is not installed (.ci/install-deps installs it)";
    }
    void* curl = ::dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    auto* version = curl != nullptr
                        ? reinterpret_cast<decltype(&::curl_version_info)>(::dlsym(curl, "curl_version_info"))
                        : nullptr;
    if (version == nullptr || (version(CURLVERSION_NOW)->features & CURL_VERSION_HTTP2) == 0) {
        return "libcurl.so.4 has no HTTP/2 support";
    }
    return "";
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

// A certificate for 127.0.0.1 made with the openssl command line, and its key.
struct TlsFiles {
    fs::path cert;
    fs::path key;
};

TlsFiles make_certificate(const fs::path& dir) {
    TlsFiles files{dir / "cert.pem", dir / "key.pem"};
    ProcessResult r = run_process({"openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
                                   "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout",
                                   files.key.string(), "-out", files.cert.string()});
    if (r.exit_code != 0) throw std::runtime_error("openssl req failed: " + r.err);
    return files;
}

// nginx in the foreground with a config of our own, stopped on destruction.
// With TLS files it serves HTTPS with HTTP/2 offered through ALPN, and logs
// each request's connection number and protocol.
class Nginx {
public:
    Nginx(const fs::path& binary, const fs::path& root, std::optional<TlsFiles> tls = std::nullopt)
        : m_port(free_port()), m_tls(tls.has_value()) {
        fs::path conf = m_dir.path() / "nginx.conf";
        std::ofstream out(conf);
        out << "daemon off;\nworker_processes 1;\n"
            << (geteuid() == 0 ? "user root;\n" : "") << "pid " << (m_dir.path() / "nginx.pid").string()
            << ";\nerror_log " << (m_dir.path() / "error.log").string() << ";\n"
            << "events { worker_connections 64; }\n"
            << "http {\n  log_format wire '$connection $server_protocol $status $request_uri $msec $request_time';\n"
            << "  access_log " << access_log().string() << (m_tls ? " wire" : "") << ";\n"
            << "  client_body_temp_path " << m_dir.path().string() << ";\n"
            << "  server {\n    listen 127.0.0.1:" << m_port << (m_tls ? " ssl http2" : "") << ";\n";
        if (tls) {
            // Each response at 8 MiB/s: transfers that overlap show in the log.
            out << "    ssl_certificate " << tls->cert.string() << ";\n    ssl_certificate_key " << tls->key.string()
                << ";\n    limit_rate 8m;\n";
        }
        out << "    root " << root.string() << ";\n    default_type application/octet-stream;\n  }\n}\n";
        out.close();
        UniqueFd null_fd(open("/dev/null", O_RDWR | O_CLOEXEC));
        m_pid = spawn_process({binary.string(), "-c", conf.string(), "-p", m_dir.path().string()}, {}, "",
                              null_fd.get(), null_fd.get(), null_fd.get());
        for (int i = 0; i < 100; ++i) {
            if (m_tls ? accepts_connections() : http_request("GET", endpoint() + "/_hub.json").status == 200) return;
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        throw std::runtime_error("nginx did not start on port " + std::to_string(m_port));
    }
    ~Nginx() {
        kill(m_pid, SIGQUIT);
        wait_process(m_pid);
    }
    std::string endpoint() const {
        return (m_tls ? "https" : "http") + std::string("://127.0.0.1:") + std::to_string(m_port);
    }
    fs::path access_log() const { return m_dir.path() / "access.log"; }
    std::size_t lines_in_access_log() const {
        std::ifstream in(access_log());
        return static_cast<std::size_t>(std::count(std::istreambuf_iterator<char>(in), {}, '\n'));
    }

    std::vector<std::string> access_lines() const {
        std::ifstream in(access_log());
        std::vector<std::string> lines;
        for (std::string line; std::getline(in, line);) lines.push_back(line);
        return lines;
    }

private:
    bool accepts_connections() const {
        UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        addr.sin_port = htons(static_cast<std::uint16_t>(m_port));
        return connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    }

    TempDir m_dir;
    int m_port;
    bool m_tls;
    pid_t m_pid = -1;
};

// Sets an environment variable for one scope.
class ScopedEnv {
public:
    ScopedEnv(const char* name, const std::string& value) : m_name(name) {
        if (const char* old = std::getenv(name)) m_old = old;
        ::setenv(name, value.c_str(), 1);
    }
    ~ScopedEnv() {
        if (m_old) {
            ::setenv(m_name, m_old->c_str(), 1);
        } else {
            ::unsetenv(m_name);
        }
    }
    ScopedEnv(const ScopedEnv&) = delete;
    ScopedEnv& operator=(const ScopedEnv&) = delete;

private:
    const char* m_name;
    std::optional<std::string> m_old;
};

// A hub of one variant with twelve 1 MiB files (data<i>.bin holds 'a' + i)
// served by nginx over HTTPS with HTTP/2, each response at 8 MiB/s.
struct H2Hub {
    TempDir dir;
    std::optional<Nginx> server;
    fs::path cert;
    std::string commit;

    H2Hub() {
        nlohmann::json files = nlohmann::json::object();
        const std::string variant = "build/" + host_cpu_variant() + "/";
        files[variant + "libkern.so"] = {{"path", vector_add_so().string()}, {"lfs", true}};
        for (int i = 0; i < 12; ++i) {
            files[variant + "data" + std::to_string(i) + ".bin"] = {{"text", data(i)}, {"lfs", true}};
        }
        nlohmann::json spec = {
            {"repos",
             {{{"repo_id", "kernhub-test/h2"},
               {"type", "kernel"},
               {"commits", {{{"message", "one"}, {"branches", {"main"}}, {"metadata", true}, {"files", files}}}}}}}};
        const fs::path root = dir.path() / "hub";
        make_hub(spec, root);
        // A static tree serves files under their commit only.
        std::ifstream revision(root / "api/kernels/kernhub-test/h2/revision/main");
        commit = nlohmann::json::parse(revision)["sha"].get<std::string>();
        const TlsFiles tls = make_certificate(dir.path());
        cert = tls.cert;
        server.emplace(find_nginx(), root, tls);
    }
    static std::string data(int i) { return std::string(1u << 20, static_cast<char>('a' + i)); }
    std::string file_url(int i) const {
        return server->endpoint() + "/kernels/kernhub-test/h2/resolve/" + commit + "/build/" + host_cpu_variant() +
               "/data" + std::to_string(i) + ".bin";
    }
};

// Options for a fetch from `endpoint` into a cache under `dir`.
Options options_for(const std::string& endpoint, const TempDir& dir) {
    Options options;
    options.endpoint = endpoint;
    options.cache_dir = (dir.path() / "cache").string();
    options.project_dir = dir.path().string();
    options.offline = false;
    options.token = "";
    return options;
}

}  // namespace

TEST_CASE("the demo hub served by stock nginx fetches and loads over HTTP", "[hub][nginx][needs:nginx]") {
    Nginx server(find_nginx(), KERNHUB_DEMO_HUB);
    TempDir dir;
    Options options = options_for(server.endpoint(), dir);

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

TEST_CASE("over HTTPS with HTTP/2, a variant's files are multiplexed on one connection",
          "[hub][nginx][needs:https-h2]") {
    H2Hub hub;
    TempDir dir;
    Nginx& server = *hub.server;
    ScopedEnv trust("SSL_CERT_FILE", hub.cert.string());

    Options options = options_for(server.endpoint(), dir);
    options.max_connections = 6;
    FetchResult fetched = Client(options).fetch("kernhub-test/h2");
    REQUIRE(fetched.files.size() == 14);  // metadata.json, libkern.so and the twelve data files
    for (const auto& f : fetched.files) {
        if (f.path.rfind("data", 0) != 0) continue;  // data<i>.bin holds 'a' + i
        std::ifstream in(fs::path(fetched.path) / f.path, std::ios::binary);
        std::string body = kernhub::test::read_all(in);
        CHECK(body == H2Hub::data(std::stoi(f.path.substr(4))));
    }

    // nginx logs after each response: wait for every request to be there.
    std::vector<std::string> lines;
    for (int i = 0; i < 40; ++i) {
        lines = server.access_lines();
        if (lines.size() >= fetched.requests) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    INFO(nlohmann::json(lines).dump(1));
    REQUIRE(lines.size() == fetched.requests);
    std::set<std::string> connections;
    std::vector<std::pair<double, int>> edges;  // (time, +1 at a download's start, -1 at its end)
    for (const std::string& line : lines) {
        std::istringstream fields(line);
        std::string connection, protocol, status, uri;
        double end = 0, took = 0;
        fields >> connection >> protocol >> status >> uri >> end >> took;
        CHECK(protocol == "HTTP/2.0");
        CHECK(status == "200");
        connections.insert(connection);
        if (uri.find("/resolve/") == std::string::npos) continue;
        edges.emplace_back(end - took, 1);
        edges.emplace_back(end, -1);
    }
    CHECK(edges.size() == 2 * 14);
    // Revision, listing and fourteen files: one connection carried them all,
    std::sort(edges.begin(), edges.end());  // an end sorts before a start at the same instant
    int in_flight = 0;
    int peak = 0;
    for (const auto& edge : edges) peak = std::max(peak, in_flight += edge.second);
    CHECK(connections.size() == 1);
    // as streams in flight side by side (at 8 MiB/s a 1 MiB file takes
    // 0.125 s), never more than max_connections.
    CHECK(peak >= 3);
    CHECK(peak <= 6);
}

TEST_CASE("over HTTP/2 a stream whose target stalls is paused while the others flow, and loses no byte",
          "[hub][nginx][needs:https-h2]") {
    H2Hub hub;
    http::Policy policy;
    policy.ca_file = hub.cert.string();
    http::Session session(policy, "", hub.server->endpoint());
    StringTarget first;  // opens the connection the others join
    REQUIRE(session.download(hub.file_url(0), first).status == 200);
    GatedTarget stalled;
    std::thread slow([&] { CHECK(session.download(hub.file_url(1), stalled).status == 200); });
    stalled.wait_for_first_write();
    // While data1's caller is stuck, its stream pauses once its pipe is
    // full; two more files come whole over the same connection meanwhile.
    StringTarget second;
    StringTarget third;
    CHECK(session.download(hub.file_url(2), second).status == 200);
    CHECK(session.download(hub.file_url(3), third).status == 200);
    stalled.open();
    slow.join();
    CHECK_FALSE(stalled.timed_out);
    CHECK(first.data == H2Hub::data(0));
    CHECK(stalled.data == H2Hub::data(1));
    CHECK(second.data == H2Hub::data(2));
    CHECK(third.data == H2Hub::data(3));
    std::set<std::string> connections;
    for (const std::string& line : hub.server->access_lines()) connections.insert(line.substr(0, line.find(' ')));
    CHECK(connections.size() == 1);  // the readiness probe sends no request, so it is not logged
}

TEST_CASE("SSL_CERT_FILE that cannot be used is a usage error naming it", "[hub][nginx][needs:https-h2]") {
    H2Hub hub;
    TempDir dir;
    const fs::path garbage = dir.path() / "garbage.pem";
    std::ofstream(garbage) << "-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n";
    const fs::path big = dir.path() / "big.pem";
    std::ofstream(big) << std::string((8u << 20) + 1, '\n');
    for (const fs::path& bad : {dir.path(), dir.path() / "missing.pem", garbage, big}) {
        INFO(bad.string());
        http::Policy policy;
        policy.ca_file = bad.string();
        policy.retries = 0;
        http::Session session(policy, "", hub.server->endpoint());
        StringTarget target;
        try {
            session.download(hub.file_url(0), target);
            FAIL("the download should have been refused");
        } catch (const Error& e) {
            CHECK(e.code() == ErrorCode::usage);
            CHECK(std::string(e.what()).find("SSL_CERT_FILE") != std::string::npos);
        }
        CHECK(target.data.empty());
    }
    // A plain-HTTP hub does not care.
    Nginx plain(find_nginx(), KERNHUB_DEMO_HUB);
    http::Policy policy;
    policy.ca_file = (dir.path() / "missing.pem").string();
    http::Session session(policy, "", plain.endpoint());
    CHECK(session.get(plain.endpoint() + "/_hub.json").status == 200);
}
