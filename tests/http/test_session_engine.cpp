// http::Session's transfer engine (one libcurl multi handle on a thread of
// the session's) against the loopback test hub: a download whose target is
// slow holds up no other transfer, paused bytes arrive whole and in order,
// the path without the engine still works, and a forked child can use its
// parent's session.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "http/http.hpp"
#include "http/session_support.hpp"
#include "support/gated_target.hpp"
#include "support/hub_builder.hpp"
#include "support/hub_server.hpp"
#include "support/kernel_hub.hpp"
#include "support/string_target.hpp"
#include "support/temp_dir.hpp"

using kernhub::http::Policy;
using kernhub::http::Session;
using kernhub::test::fast_policy;
using kernhub::test::GatedTarget;
using kernhub::test::HubServer;
using kernhub::test::StringTarget;
using kernhub::test::TempDir;
namespace fs = std::filesystem;

namespace {

const std::string k_repo = "kernhub-test/engine";

// A hub with a 4 MiB LFS file (eight times the body pipe of a download) and
// a small one, both behind the hub's redirect to its CDN.
struct EngineHub {
    TempDir dir;
    std::string big;
    std::string small = "a small file\n";
    std::unique_ptr<HubServer> server;

    EngineHub() {
        big.resize(4u << 20);
        std::mt19937 random(7);
        for (auto& c : big) c = static_cast<char>(random());
        const fs::path source = dir.path() / "big.src";
        std::ofstream(source, std::ios::binary) << big;
        const std::string variant = "build/" + kernhub::test::host_cpu_variant() + "/";
        nlohmann::json files = {{variant + "big.bin", {{"path", source.string()}, {"lfs", true}}},
                                {variant + "small.bin", {{"text", small}, {"lfs", true}}}};
        nlohmann::json spec = {
            {"repos",
             {{{"repo_id", k_repo},
               {"type", "kernel"},
               {"commits", {{{"message", "one"}, {"branches", {"main"}}, {"metadata", true}, {"files", files}}}}}}}};
        kernhub::test::make_hub(spec, dir.path() / "hub");
        server = std::make_unique<HubServer>(dir.path() / "hub");
    }

    std::string file_url(const std::string& name) const {
        return server->endpoint() + "/kernels/" + k_repo + "/resolve/main/build/" + kernhub::test::host_cpu_variant() +
               "/" + name;
    }
    std::string revision_url() const { return server->endpoint() + "/api/kernels/" + k_repo + "/revision/main"; }
};

// The threads of this process, as /proc lists them.
std::size_t threads_in_process() {
    return static_cast<std::size_t>(std::distance(fs::directory_iterator("/proc/self/task"), fs::directory_iterator()));
}

}  // namespace

TEST_CASE("a download whose target stalls holds up neither other downloads nor API requests", "[http]") {
    EngineHub hub;
    Session session(fast_policy(0), "", hub.server->endpoint());
    const std::size_t threads = threads_in_process();
    CHECK(session.get(hub.revision_url()).status == 200);
    CHECK(threads_in_process() == threads + 1);  // the engine's thread
    GatedTarget stalled;
    std::thread slow([&] {
        const auto response = session.download(hub.file_url("big.bin"), stalled);
        CHECK(response.status == 200);
    });
    stalled.wait_for_first_write();
    // The stalled download's pipe fills and its transfer pauses; the other
    // requests of the session go on meanwhile, or the gate times out.
    CHECK(session.get(hub.revision_url()).status == 200);
    StringTarget quick;
    CHECK(session.download(hub.file_url("small.bin"), quick).status == 200);
    CHECK(quick.data == hub.small);
    stalled.open();
    slow.join();
    CHECK_FALSE(stalled.timed_out);
    // Every byte arrived once and in order across the pauses.
    CHECK(stalled.data.size() == hub.big.size());
    CHECK(stalled.data == hub.big);
    CHECK(stalled.restarts == 0);
}

TEST_CASE("a download target that fails while its pipe is full ends the transfer", "[http]") {
    EngineHub hub;
    Session session(fast_policy(0), "", hub.server->endpoint());
    // Slow before it fails, so that the pipe is full and the transfer
    // paused when the failure comes: the transfer must be resumed to end.
    class FailingTarget : public StringTarget {
    public:
        void write(const char* bytes, std::size_t count) override {
            if (data.size() + count > (1u << 20)) {
                std::this_thread::sleep_for(std::chrono::milliseconds(200));
                throw std::runtime_error("disk full, as the test says");
            }
            StringTarget::write(bytes, count);
        }
    } failing;
    CHECK_THROWS_WITH(session.download(hub.file_url("big.bin"), failing), "disk full, as the test says");
    CHECK(failing.data == hub.big.substr(0, failing.data.size()));
    StringTarget next;  // the session stays usable
    CHECK(session.download(hub.file_url("big.bin"), next).status == 200);
    CHECK(next.data == hub.big);
}

TEST_CASE("without its thread, a Session runs each transfer on its caller", "[http]") {
    EngineHub hub;
    Policy policy = fast_policy(0);
    policy.use_engine = false;
    Session session(policy, "", hub.server->endpoint());
    const std::size_t threads = threads_in_process();
    CHECK(session.get(hub.revision_url()).status == 200);
    CHECK(threads_in_process() == threads);  // no engine thread was started
    StringTarget whole;
    CHECK(session.download(hub.file_url("big.bin"), whole).status == 200);  // through the 302
    CHECK(whole.data == hub.big);
    CHECK(session.requests() == 3);
    class FailingTarget : public StringTarget {
    public:
        void write(const char*, std::size_t) override { throw std::runtime_error("refused"); }
    } failing;
    CHECK_THROWS_WITH(session.download(hub.file_url("small.bin"), failing), "refused");
}

TEST_CASE("a forked child uses its parent's Session, and the parent goes on", "[http]") {
    EngineHub hub;
    Session session(fast_policy(0), "", hub.server->endpoint());
    StringTarget before;
    REQUIRE(session.download(hub.file_url("small.bin"), before).status == 200);
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        // The parent's engine thread is not here: the session starts its own.
        ::alarm(60);  // a child that hangs dies rather than hold up the test
        int status = 1;
        try {
            StringTarget again;
            const bool got = session.get(hub.revision_url()).status == 200 &&
                             session.download(hub.file_url("big.bin"), again).status == 200 && again.data == hub.big;
            status = got ? 0 : 2;
        } catch (...) {
            status = 3;
        }
        ::_exit(status);
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    StringTarget after;
    CHECK(session.download(hub.file_url("small.bin"), after).status == 200);
    CHECK(after.data == hub.small);
}

TEST_CASE("a forked child does not wait for the download slots its parent's transfers hold", "[http]") {
    EngineHub hub;
    Policy policy = fast_policy(0);
    policy.max_host_connections = 1;
    Session session(policy, "", hub.server->endpoint());
    // The parent's one slot for the file's origin stays taken while this
    // download waits on its gate.
    GatedTarget stalled;
    std::thread slow([&] { CHECK(session.download(hub.file_url("big.bin"), stalled).status == 200); });
    stalled.wait_for_first_write();
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        // The parent's transfer is not here: its slot is free in the child,
        // or this download waits until the alarm ends the child.
        ::alarm(30);
        int status = 1;
        try {
            StringTarget small;
            const bool got =
                session.download(hub.file_url("small.bin"), small).status == 200 && small.data == hub.small;
            status = got ? 0 : 2;
        } catch (...) {
            status = 3;
        }
        ::_exit(status);
    }
    int status = 0;
    const bool reaped = ::waitpid(child, &status, 0) == child;
    stalled.open();
    slow.join();
    REQUIRE(reaped);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    CHECK_FALSE(stalled.timed_out);
    CHECK(stalled.data == hub.big);
}
