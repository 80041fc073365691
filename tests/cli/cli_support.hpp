// Helpers for the CLI tests: run the real kernhub binary in a sandbox that
// the machine's environment cannot reach (no endpoint, token, cache or
// registry variables leak in; cwd is a fresh temp dir without kernhub.json).
#pragma once

#include <fcntl.h>
#include <openssl/evp.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "support/build_paths.hpp"
#include "support/hub_builder.hpp"
#include "support/kernel_hub.hpp"
#include "support/process.hpp"
#include "support/slurp.hpp"
#include "support/temp_dir.hpp"

namespace kernhub::test::cli {

namespace fs = std::filesystem;
using nlohmann::json;

// One test's sandbox: a temp dir holding HF_HOME, the registry and the cache.
struct Sandbox {
    TempDir dir;
    fs::path home = dir.path() / "hf-home";
    fs::path cache = dir.path() / "cache";
    fs::path registry = write_standard_registry(dir.path());

    Sandbox() { fs::create_directories(home); }

    // The isolating environment; `extra` is applied on top of it.
    EnvChanges env(const EnvChanges& extra = {}) const {
        EnvChanges changes;
        for (const char* name :
             {"KERNHUB_ENDPOINT", "HF_ENDPOINT", "HF_TOKEN", "KERNHUB_OFFLINE", "HF_HUB_OFFLINE", "KERNHUB_REGISTRY",
              "KERNHUB_CACHE", "KERNELS_CACHE", "HF_HUB_CACHE", "KERNHUB_VERIFY_ON_LOAD",
              "HF_HUB_DISABLE_PROGRESS_BARS", "NO_COLOR", "KERNHUB_MAX_WAIT", "KERNHUB_NO_FLOCK", "KERNHUB_REF_TTL"}) {
            changes[name] = std::nullopt;
        }
        changes["HF_HOME"] = home.string();
        changes["KERNHUB_RETRIES"] = "1";
        for (const auto& [name, value] : extra) changes[name] = value;
        return changes;
    }

    // kernhub ARGS... with the isolating environment, in the sandbox dir.
    ProcessResult run(const std::vector<std::string>& args, const EnvChanges& extra = {}) const {
        std::vector<std::string> argv{KERNHUB_CLI_PATH};
        argv.insert(argv.end(), args.begin(), args.end());
        return run_process(argv, env(extra), dir.path().string());
    }

    // `kernhub COMMAND REF --registry R --endpoint E --cache-dir C MORE...`.
    ProcessResult kh(const std::string& command, const std::string& ref, const std::string& endpoint,
                     const std::vector<std::string>& more = {}, const EnvChanges& extra = {}) const {
        std::vector<std::string> args{command,      ref,      "--registry",  registry.string(),
                                      "--endpoint", endpoint, "--cache-dir", cache.string()};
        args.insert(args.end(), more.begin(), more.end());
        return run(args, extra);
    }
};

inline std::string describe(const ProcessResult& r) {
    return "exit " + std::to_string(r.exit_code) + "\n--- stdout ---\n" + r.out + "--- stderr ---\n" + r.err;
}

inline std::size_t count_lines(const std::string& text) {
    std::size_t n = 0;
    for (char c : text) n += c == '\n' ? 1 : 0;
    return n;
}

// The run failed with `code`, and stderr is exactly one line
// "kernhub: error: ..." that mentions every string in `names`.
inline void check_error(const ProcessResult& r, int code, const std::vector<std::string>& names) {
    INFO(describe(r));
    CHECK(r.exit_code == code);
    CHECK(r.err.rfind("kernhub: error: ", 0) == 0);
    CHECK(count_lines(r.err) == 1);
    CHECK(r.err.back() == '\n');
    for (const auto& name : names) {
        INFO("expected in stderr: " << name);
        CHECK(r.err.find(name) != std::string::npos);
    }
}

// stdout parsed as JSON; fails the test when it is not one JSON value.
inline json parse_stdout(const ProcessResult& r) {
    INFO(describe(r));
    json parsed = json::parse(r.out, nullptr, false);
    REQUIRE_FALSE(parsed.is_discarded());
    return parsed;
}

inline std::vector<std::string> keys_of(const json& object) {
    std::vector<std::string> keys;
    for (auto it = object.begin(); it != object.end(); ++it) keys.push_back(it.key());
    std::sort(keys.begin(), keys.end());
    return keys;
}

inline std::string read_text(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return kernhub::test::read_all(in);
}

inline void write_text(const fs::path& path, const std::string& text) {
    std::ofstream(path, std::ios::binary) << text;
}

// Lowercase hex digest of `bytes` with `md` (EVP_sha256(), EVP_sha1()), via OpenSSL.
inline std::string hex_digest(const std::string& bytes, const EVP_MD* md) {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    REQUIRE(EVP_Digest(bytes.data(), bytes.size(), digest, &length, md, nullptr) == 1);
    std::string hex;
    char buffer[3];
    for (unsigned int i = 0; i < length; ++i) {
        std::snprintf(buffer, sizeof buffer, "%02x", digest[i]);
        hex += buffer;
    }
    return hex;
}

// Lowercase hex SHA-256 of a file's bytes (links followed).
inline std::string sha256_of(const fs::path& path) {
    return hex_digest(read_text(path), EVP_sha256());
}

// Does any regular file or link under dir have a name containing `part`?
inline bool tree_has_name(const fs::path& dir, const std::string& part) {
    std::error_code ec;
    if (!fs::exists(dir, ec)) return false;
    for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        if (it->path().filename().string().find(part) != std::string::npos) return true;
    }
    return false;
}

inline const std::string k_vector_add_folder = "kernels--kernhub-test--vector-add";
inline const std::string k_dead_endpoint = "http://127.0.0.1:9";

// A test's own hub: `spec` laid out (make_hub) in the sandbox and served on
// loopback for the object's life.
struct SpecHub {
    Sandbox box;
    fs::path dir = box.dir.path() / "hub";
    std::unique_ptr<HubServer> server;
    explicit SpecHub(const json& spec) {
        make_hub(spec, dir);
        server = std::make_unique<HubServer>(dir);
    }
    // The commit branch `revision` of kernel repo `repo_id` names in the hub.
    std::string commit_of(const std::string& repo_id, const std::string& revision = "v1") const {
        return json::parse(read_text(dir / "api/kernels" / repo_id / "revision" / revision))["sha"].get<std::string>();
    }
};

struct Interrupted {
    bool started = false;  // `started` held before the signal was sent
    int exit_code = -1;
    std::string out;
    std::string err;
};

// Whether the hub has sent some body for a request whose target contains
// `path` (its answer is on its way).
inline bool body_sent(const HubServer& server, const std::string& path) {
    const nlohmann::json stats = server.stats();
    for (const auto& request : stats["requests"]) {
        if (request["path"].get<std::string>().find(path) != std::string::npos &&
            request["sent"].get<std::uint64_t>() > 0) {
            return true;
        }
    }
    return false;
}

// A kernhub command running in the background, its output in files.
class Background {
public:
    Background(const Sandbox& box, const std::vector<std::string>& args, const EnvChanges& extra = {})
        : m_out(box.dir.path() / ("bg" + std::to_string(next_id()) + ".out")), m_err(m_out.string() + ".err") {
        UniqueFd in(::open("/dev/null", O_RDONLY | O_CLOEXEC));
        UniqueFd out(::open(m_out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
        UniqueFd err(::open(m_err.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
        REQUIRE((in.get() > 2 && out.get() > 2 && err.get() > 2));
        std::vector<std::string> argv{KERNHUB_CLI_PATH};
        argv.insert(argv.end(), args.begin(), args.end());
        m_pid = spawn_process(argv, box.env(extra), box.dir.path().string(), in.get(), out.get(), err.get());
    }
    ~Background() {
        if (m_pid > 0) {
            ::kill(m_pid, SIGKILL);
            wait_process(m_pid);
        }
    }
    Background(const Background&) = delete;
    Background& operator=(const Background&) = delete;

    std::string err_so_far() const { return read_text(m_err); }

    // Whether it has ended (reaped here; finish() then only reads the output).
    bool ended() {
        if (m_pid <= 0) return true;
        int status = 0;
        if (::waitpid(m_pid, &status, WNOHANG) != m_pid) return false;
        m_code = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
        m_pid = -1;
        return true;
    }

    // finish(), when it has ended within `limit` (polled every millisecond);
    // nullopt when it has not (the destructor then kills it).
    std::optional<ProcessResult> finish_within(std::chrono::seconds limit) {
        const auto deadline = std::chrono::steady_clock::now() + limit;
        while (!ended()) {
            if (std::chrono::steady_clock::now() > deadline) return std::nullopt;
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        return finish();
    }

    ProcessResult finish() {
        ProcessResult r;
        if (m_pid > 0) m_code = wait_process(m_pid);
        r.exit_code = m_code;
        m_pid = -1;
        r.out = read_text(m_out);
        r.err = read_text(m_err);
        return r;
    }

private:
    static int next_id() {
        static int id = 0;
        return ++id;
    }
    fs::path m_out;
    fs::path m_err;
    pid_t m_pid = -1;
    int m_code = -1;
};

// Runs the CLI with `args` in the background and sends it `signo` once
// `started` holds (polled every millisecond, at most 60 s): a signal that
// lands while the command is under way, whatever the machine's speed.
inline Interrupted interrupt_when(const Sandbox& box, const std::vector<std::string>& args, int signo,
                                  const std::function<bool()>& started) {
    const fs::path out = box.dir.path() / "interrupted.out";
    const fs::path err = box.dir.path() / "interrupted.err";
    UniqueFd in(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    UniqueFd out_fd(::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    UniqueFd err_fd(::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    REQUIRE((in.get() > 2 && out_fd.get() > 2 && err_fd.get() > 2));
    std::vector<std::string> argv{KERNHUB_CLI_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    const pid_t pid = spawn_process(argv, box.env(), box.dir.path().string(), in.get(), out_fd.get(), err_fd.get());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    Interrupted result;
    while (!(result.started = started()) && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ::kill(pid, signo);
    result.exit_code = wait_process(pid);
    result.out = read_text(out);
    result.err = read_text(err);
    return result;
}

}  // namespace kernhub::test::cli
