// Scans and parses of hostile files are linear and bounded, and a signal
// ends them: `inspect` of a torch op library with 1,000 and 10,000 section
// headers over one large read-only section, and `prewarm --lock` of a lock
// with 100,001 files, each under a CPU-time and memory limit the old
// quadratic code broke at once (the figures are in bench/bench_parse.cpp);
// SIGINT and SIGTERM during the op listing end `inspect` with 130 and 143.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "cli_support.hpp"
#include "support/elf_craft.hpp"
#include "support/slurp.hpp"

using namespace kernhub::test;
using namespace kernhub::test::cli;

namespace {

const fs::path k_library = fs::path(KERNHUB_SOURCE_DIR) / "tests/fuzz/corpus/elf/torch_pydata_ops.so";

void write_bytes(const fs::path& path, const std::vector<std::uint8_t>& bytes) {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    REQUIRE(out.good());
}

// The op library with `payload` as one more read-only section whose header
// is copied `copies` times.
fs::path crafted(const fs::path& dir, const std::vector<std::uint8_t>& payload, std::size_t copies) {
    const fs::path path = dir / ("crafted-" + std::to_string(copies) + ".so");
    write_bytes(path, with_last_section_copies(with_read_only_section(slurp_bytes(k_library), payload), copies));
    return path;
}

std::vector<std::uint8_t> schema_strings(int count) {
    std::vector<std::uint8_t> out;
    for (int i = 0; i < count; ++i) {
        const std::string schema = "op_" + std::to_string(i) + "(Tensor x, float factor) -> Tensor";
        out.insert(out.end(), schema.begin(), schema.end());
        out.push_back(0);
    }
    return out;
}

// Runs the CLI with a CPU-time limit and (except under ASan, whose shadow
// memory needs a large address space) a limit on its address space: a scan
// or parse that is not linear in its input is killed by one of them.
ProcessResult run_limited(const Sandbox& box, const std::vector<std::string>& args) {
#if defined(__SANITIZE_ADDRESS__)
    const std::string limits = "ulimit -t 120";
#else
    const std::string limits = "ulimit -t 60 && ulimit -v 393216";  // 60 s of CPU, 384 MiB
#endif
    std::vector<std::string> argv{"/bin/sh", "-c", limits + " && exec \"$0\" \"$@\"", KERNHUB_CLI_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    return run_process(argv, box.env(), box.dir.path().string());
}

// Whether process `pid` has `path` open.
bool has_open(pid_t pid, const fs::path& path) {
    std::error_code ec;
    for (fs::directory_iterator it("/proc/" + std::to_string(pid) + "/fd", ec), end; !ec && it != end;
         it.increment(ec)) {
        std::error_code link_ec;
        if (fs::read_symlink(it->path(), link_ec) == path) return true;
    }
    return false;
}

}  // namespace

TEST_CASE("inspect of an op library with 1,000 or 10,000 headers over one section is bounded in time and memory",
          "[cli]") {
    Sandbox box;
    const std::vector<std::uint8_t> payload = schema_strings(12000);  // about 0.5 MiB of schemas
    const json plain =
        parse_stdout(run_limited(box, {"inspect", crafted(box.dir.path(), payload, 0).string(), "--json"}));
    REQUIRE(plain["torch_ops"].size() == 12000 + 3);
    for (std::size_t copies : {1000u, 10000u}) {
        INFO(copies << " copies");
        const ProcessResult r =
            run_limited(box, {"inspect", crafted(box.dir.path(), payload, copies).string(), "--json"});
        INFO(describe(r));
        REQUIRE(r.exit_code == 0);
        const json out = parse_stdout(r);
        CHECK(out["torch_ops"] == plain["torch_ops"]);
        CHECK(out["torch_schemas"] == plain["torch_schemas"]);
    }
}

TEST_CASE("a lock of 100,001 files in one variant is refused naming k_max_lock_files, within the limits", "[cli]") {
    Sandbox box;
    const auto lock_of = [](std::size_t files) {
        json listed = json::object();
        for (std::size_t i = 0; i < files; ++i) {
            listed["f" + std::to_string(i)] = {{"size", i}, {"sha256", std::string(64, 'c')}};
        }
        return json{{"format", 1},
                    {"kernels",
                     {{"k",
                       {{"repo_id", "org/k"},
                        {"repo_type", "kernel"},
                        {"revision", "main"},
                        {"commit", std::string(40, 'a')},
                        {"symbol", "f"},
                        {"variants",
                         {{host_cpu_variant(), {{"hash", "sha256-" + std::string(64, 'b')}, {"files", listed}}}}}}}}}}
            .dump();
    };
    const fs::path over = box.dir.path() / "over.lock";
    write_text(over, lock_of(100001));
    const ProcessResult r =
        run_limited(box, {"prewarm", "--lock", over.string(), "--offline", "--cache-dir", box.cache.string()});
    check_error(r, 2, {"more than 100000 entries (k_max_lock_files)", "\"files\""});
    // At the cap it is read, and the offline prewarm then finds nothing cached.
    const fs::path at = box.dir.path() / "at.lock";
    write_text(at, lock_of(100000));
    const ProcessResult cap =
        run_limited(box, {"prewarm", "--lock", at.string(), "--offline", "--cache-dir", box.cache.string()});
    INFO(describe(cap));
    CHECK(cap.exit_code == 6);
}

TEST_CASE("SIGINT or SIGTERM during the op listing ends inspect at once with 130 or 143", "[cli]") {
    Sandbox box;
    // About 96 MiB of short strings that name nothing: a listing of
    // seconds, which a signal must cut short.
    std::vector<std::uint8_t> payload;
    payload.reserve(96u << 20);
    while (payload.size() < (96u << 20)) payload.insert(payload.end(), {'a', '-', 'b', 0});
    const fs::path file = crafted(box.dir.path(), payload, 0);
    payload = {};
    for (int signo : {SIGINT, SIGTERM}) {
        INFO("signal " << signo);
        const fs::path out = box.dir.path() / "out", err = box.dir.path() / "err";
        const int in_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
        const int out_fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        const int err_fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        REQUIRE((in_fd > 2 && out_fd > 2 && err_fd > 2));
        const pid_t pid = spawn_process({KERNHUB_CLI_PATH, "inspect", file.string(), "--json"}, box.env(),
                                        box.dir.path().string(), in_fd, out_fd, err_fd);
        ::close(in_fd);
        ::close(out_fd);
        ::close(err_fd);
        // The file stays open while inspect reads and lists it.
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        bool reading = false;
        while (!(reading = has_open(pid, file)) && std::chrono::steady_clock::now() < deadline) {
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        ::kill(pid, signo);
        const int code = wait_process(pid);
        REQUIRE(reading);
        const std::string text = read_text(err);
        INFO(text);
        CHECK(code == 128 + signo);
        CHECK(text.find(signo == SIGINT ? "interrupted by SIGINT" : "interrupted by SIGTERM") != std::string::npos);
        CHECK(read_text(out).find("torch_ops") == std::string::npos);  // no listing came out
    }
}
