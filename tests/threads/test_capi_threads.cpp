// One C API handle (include/kernhub/kernhub.h) shared by several threads,
// against the real loopback hub: calls of every kind at once, each thread's
// own kh_last_error, and a kh_load held up by the hub while the other
// threads go on. Run under ThreadSanitizer by `tests/run.sh --tsan`.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "kernhub/kernhub.h"
#include "support/barrier.hpp"
#include "support/hub_server.hpp"
#include "support/kernel_hub.hpp"
#include "threads/threads_common.hpp"

using namespace kernhub::test;
using namespace kernhub::test::threads;

namespace {

struct HubDeleter {
    void operator()(kh_hub* hub) const { kh_hub_free(hub); }
};
using Handle = std::unique_ptr<kh_hub, HubDeleter>;

// A handle on the loopback hub with the test's own cache and the standard
// registry.
Handle shared_handle(const Env& env, const std::string& endpoint) {
    Handle handle(kh_hub_new());
    REQUIRE(handle != nullptr);
    const std::string cache = env.cache.string();
    const std::string registry = env.registry.string();
    const std::string project = env.dir.path().string();
    REQUIRE(kh_hub_set(handle.get(), "endpoint", endpoint.c_str()) == 0);
    REQUIRE(kh_hub_set(handle.get(), "cache_dir", cache.c_str()) == 0);
    REQUIRE(kh_hub_set(handle.get(), "registry", registry.c_str()) == 0);
    REQUIRE(kh_hub_set(handle.get(), "project", project.c_str()) == 0);
    REQUIRE(kh_hub_set(handle.get(), "offline", "0") == 0);
    REQUIRE(kh_hub_set(handle.get(), "retries", "2") == 0);
    return handle;
}

// The calling thread's last error on `handle`, "" for none.
std::string error_text(kh_hub* handle) {
    const char* text = kh_last_error(handle);
    return text == nullptr ? std::string() : std::string(text);
}

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

// Failures seen on the threads, checked on the main thread (Catch's
// assertions are not thread-safe).
struct Failures {
    std::mutex mutex;
    std::vector<std::string> list;

    void add(const std::string& what) {
        std::lock_guard<std::mutex> lock(mutex);
        list.push_back(what);
    }
    void check() {
        CHECK(list.empty());
        for (const auto& failure : list) UNSCOPED_INFO(failure);
    }
};

// What a kh_message_fn was given. Unlocked on purpose: the function is never
// called from two threads at once for one handle, and ThreadSanitizer
// reports it if it is.
struct Messages {
    std::vector<std::string> lines;
    std::size_t count(const std::string& part) const {
        std::size_t found = 0;
        for (const std::string& line : lines) found += line.find(part) != std::string::npos ? 1 : 0;
        return found;
    }
};

extern "C" void keep_message(int /*kind*/, const char* line, void* user) {
    static_cast<Messages*>(user)->lines.emplace_back(line);
}

// Settings, the message function, refusals and tvm-ffi calls that need no
// runtime, each checked against the calling thread's own error text.
void settings_and_refusals(kh_hub* handle, int t, int round, Failures& failures) {
    const std::string who = "thread " + std::to_string(t) + ": ";
    static Messages messages;
    if (kh_hub_on_message(handle, round % 2 == 0 ? keep_message : nullptr, &messages) != 0) {
        failures.add(who + "kh_hub_on_message was refused: " + error_text(handle));
    }
    if (kh_hub_set(handle, "retries", round % 2 == 0 ? "3" : "2") != 0 ||
        kh_hub_set(handle, "max_connections", round % 2 == 0 ? "4" : "8") != 0 || kh_last_error(handle) != nullptr) {
        failures.add(who + "a good setting was refused: " + error_text(handle));
    }
    const std::string bad = "eleven-" + std::to_string(t);
    if (kh_hub_set(handle, "retries", bad.c_str()) != 2 || !contains(error_text(handle), bad)) {
        failures.add(who + "a bad retries value: " + error_text(handle));
    }
    if (kh_tvm_call(handle, nullptr, nullptr, 0, nullptr) != 2 || !contains(error_text(handle), "kh_tvm_call")) {
        failures.add(who + "kh_tvm_call without a function: " + error_text(handle));
    }
    if (kh_tvm_set_stream(handle, -1, nullptr, nullptr) != 2 || !contains(error_text(handle), "device -1")) {
        failures.add(who + "kh_tvm_set_stream on device -1: " + error_text(handle));
    }
}

}  // namespace

TEST_CASE("one kh_hub shared by 8 threads: prewarm, kh_symbol, settings and errors at once", "[threads]") {
    KernelHub hub;
    Env env;
    Handle handle = shared_handle(env, hub.server().endpoint());
    Observed seen;
    Failures failures;
    run_together(k_threads, [&](int t) {
        const std::string who = "thread " + std::to_string(t) + ": ";
        for (int round = 0; round < k_rounds; ++round) {
            // Every fourth thread changes settings (each change drops the
            // handle's Client while the others load through it).
            if (t % 4 == 3) {
                settings_and_refusals(handle.get(), t, round, failures);
                continue;
            }
            for (std::size_t i = 0; i < k_names.size(); ++i) {
                const std::string& name = k_names[(i + static_cast<std::size_t>(t)) % k_names.size()];
                if (const int rc = kh_load(handle.get(), name.c_str()); rc != 0) {
                    failures.add(who + name + ": kh_load " + std::to_string(rc) + ": " + error_text(handle.get()));
                    continue;
                }
                if (kh_last_error(handle.get()) != nullptr) failures.add(who + name + ": an error after a success");
                void* address = kh_symbol(handle.get(), name.c_str());
                seen.record(name, address, address);
                const std::string missing = "never-prewarmed-" + std::to_string(t);
                if (kh_symbol(handle.get(), missing.c_str()) != nullptr ||
                    !contains(error_text(handle.get()), missing)) {
                    failures.add(who + "kh_symbol of a name not loaded: " + error_text(handle.get()));
                }
            }
        }
    });
    failures.check();
    check_addresses(seen);
    for (const auto& name : k_names) {
        INFO(name);
        CHECK(kh_symbol(handle.get(), name.c_str()) == *seen.addresses.at(name).begin());
    }
    // This thread's calls all succeeded, whatever the others' did.
    CHECK(kh_last_error(handle.get()) == nullptr);
}

TEST_CASE("kh_last_error on a shared kh_hub is the calling thread's own failure", "[threads]") {
    KernelHub hub;
    Env env;
    Handle handle = shared_handle(env, hub.server().endpoint());
    REQUIRE(kh_load(handle.get(), "vector-add") == 0);  // later ones are quick: warm
    constexpr int k_parties = 6;
    constexpr int k_turns = 6;
    Barrier barrier(k_parties);
    Failures failures;
    run_together(k_parties, [&](int t) {
        const std::string who = "thread " + std::to_string(t) + ": ";
        const std::string missing = "missing-kernel-" + std::to_string(t);
        for (int turn = 0; turn < k_turns; ++turn) {
            // Half the threads fail, half succeed, each a different way on
            // every turn; the roles swap from one turn to the next.
            const bool fails = (t + turn) % 2 == 0;
            int rc = 0;
            if (!fails) {
                rc = turn % 3 == 0 ? kh_hub_set(handle.get(), "verify_on_load", "0")
                                   : kh_load(handle.get(), "vector-add");
            } else if (turn % 3 == 1) {
                rc = kh_hub_set(handle.get(), missing.c_str(), "1");  // an unknown key, named in the message
            } else {
                rc = kh_load(handle.get(), missing.c_str());
            }
            const char* text = kh_last_error(handle.get());
            const std::string copy = text == nullptr ? std::string() : std::string(text);
            // Every thread has made its call before any reads again.
            barrier.arrive_and_wait();
            const char* again = kh_last_error(handle.get());
            if (fails && (rc == 0 || !contains(copy, missing))) {
                failures.add(who + "turn " + std::to_string(turn) + ": code " + std::to_string(rc) +
                             ", error: " + copy);
            }
            if (!fails && (rc != 0 || text != nullptr)) {
                failures.add(who + "turn " + std::to_string(turn) + ": code " + std::to_string(rc) +
                             ", error: " + copy);
            }
            // The text stays in place, unchanged, while other threads call.
            if (again != text || (text != nullptr && std::string(text) != copy)) {
                failures.add(who + "turn " + std::to_string(turn) + ": the error text changed from '" + copy +
                             "' to '" + (again == nullptr ? "(none)" : again) + "'");
            }
            // Nobody calls again before everyone has read.
            barrier.arrive_and_wait();
        }
    });
    failures.check();
    // This thread made only successful calls; the others' failures are theirs.
    CHECK(kh_last_error(handle.get()) == nullptr);
}

TEST_CASE("a kh_load held up by the hub does not hold up other calls on its kh_hub", "[threads]") {
    KernelHub hub;
    Env env;
    Handle handle = shared_handle(env, hub.server().endpoint());
    // The first request for vector-add's revision waits at the gate until
    // the test releases it; model-kernel and vector-add-v2 pass.
    hub.server().add_faults(nlohmann::json::array(
        {{{"match", "kernhub-test/vector-add/revision/main"}, {"action", "hold"}, {"gate", "slow"}}}));

    std::atomic<bool> slow_done{false};
    int slow_rc = -1;
    std::thread slow([&] {
        slow_rc = kh_load(handle.get(), "vector-add");
        slow_done = true;
    });
    const bool held = hub.server().wait_held("slow");

    // Another thread uses the handle while the prewarm waits on the hub.
    struct Seen {
        bool symbol_before = true;
        std::string symbol_error;
        int model_rc = -1;
        bool model_computes = false;
        int offline_set_rc = -1;
        int offline_rc = -1;
        std::string offline_error;
        bool held_throughout = false;
    } seen;
    std::mutex mutex;
    std::condition_variable finished;
    bool other_done = false;
    std::thread other([&] {
        seen.symbol_before = kh_symbol(handle.get(), "vector-add") != nullptr;
        seen.symbol_error = error_text(handle.get());
        seen.model_rc = kh_load(handle.get(), "model-kernel");
        seen.model_computes = computes("model-kernel", kh_symbol(handle.get(), "model-kernel"));
        // A settings change while the prewarm runs: it applies to
        // prewarms started from now on, not to the one in flight.
        seen.offline_set_rc = kh_hub_set(handle.get(), "offline", "1");
        seen.offline_rc = kh_load(handle.get(), "vector-add-v2");
        seen.offline_error = error_text(handle.get());
        seen.held_throughout = !slow_done.load();
        std::lock_guard<std::mutex> lock(mutex);
        other_done = true;
        finished.notify_all();
    });
    bool other_finished = false;
    {
        // The deadline only bounds a failure; success ends the wait early.
        std::unique_lock<std::mutex> lock(mutex);
        other_finished = finished.wait_for(lock, std::chrono::seconds(30), [&] { return other_done; });
    }
    hub.server().release("slow");
    other.join();
    slow.join();

    REQUIRE(held);
    CHECK(other_finished);
    CHECK(seen.held_throughout);
    CHECK_FALSE(seen.symbol_before);
    CHECK(contains(seen.symbol_error, "was not loaded on this handle"));
    CHECK(seen.model_rc == 0);
    CHECK(seen.model_computes);
    CHECK(seen.offline_set_rc == 0);
    CHECK(seen.offline_rc == 6);
    CHECK(seen.offline_error.rfind("offline: ", 0) == 0);
    // The held prewarm ran with the settings it started with (online).
    INFO(error_text(handle.get()));
    CHECK(slow_rc == 0);
    CHECK(computes("vector-add", kh_symbol(handle.get(), "vector-add")));
    // Offline now, and cached by the prewarm that was held.
    CHECK(kh_load(handle.get(), "vector-add") == 0);
}

TEST_CASE("overlapping kh_load of one name: kh_symbol keeps the one that started last", "[threads]") {
    KernelHub hub;
    Env env;
    Handle handle = shared_handle(env, hub.server().endpoint());
    hub.server().add_faults(nlohmann::json::array(
        {{{"match", "kernhub-test/vector-add/revision/main"}, {"action", "hold"}, {"gate", "first"}}}));
    int first_rc = -1;
    std::thread first([&] { first_rc = kh_load(handle.get(), "vector-add"); });
    const bool held = hub.server().wait_held("first");

    // Started later, into another cache: another file, another address.
    const std::string other_cache = (env.dir.path() / "other-cache").string();
    const int set_rc = kh_hub_set(handle.get(), "cache_dir", other_cache.c_str());
    const int second_rc = kh_load(handle.get(), "vector-add");
    void* second = kh_symbol(handle.get(), "vector-add");
    hub.server().release("first");
    first.join();

    REQUIRE(held);
    CHECK(set_rc == 0);
    CHECK(second_rc == 0);
    CHECK(first_rc == 0);
    CHECK(computes("vector-add", second));
    // The first one ended last, but started first: it does not replace the second.
    CHECK(kh_symbol(handle.get(), "vector-add") == second);

    // What the first resolved: the same file again, through a new handle on
    // the first cache. Another address, or this test proved nothing.
    Handle again = shared_handle(env, hub.server().endpoint());
    REQUIRE(kh_hub_set(again.get(), "offline", "1") == 0);
    REQUIRE(kh_load(again.get(), "vector-add") == 0);
    void* first_address = kh_symbol(again.get(), "vector-add");
    CHECK(computes("vector-add", first_address));
    CHECK(first_address != second);
}

TEST_CASE("kh_hub_on_message: messages from many threads one at a time, and a running call's go to the new function",
          "[threads]") {
    KernelHub hub;
    Env env;
    Handle handle = shared_handle(env, hub.server().endpoint());
    REQUIRE(kh_hub_set(handle.get(), "retries", "10") == 0);
    Messages before;
    Messages after;
    REQUIRE(kh_hub_on_message(handle.get(), keep_message, &before) == 0);
    // A prewarm held at the hub while the function changes: the retries it
    // meets after the change go to the new function.
    hub.server().add_faults(nlohmann::json::array(
        {{{"match", "kernhub-test/vector-add/revision/main"}, {"action", "hold"}, {"gate", "switch"}}}));
    int held_rc = -1;
    std::thread held_call([&] { held_rc = kh_prewarm(handle.get(), "vector-add"); });
    const bool held = hub.server().wait_held("switch");
    hub.server().add_faults(nlohmann::json::array({{{"match", "kernhub-test/vector-add/tree/"},
                                                    {"action", "status"},
                                                    {"status", 503},
                                                    {"retry_after", "0"},
                                                    {"count", 2}}}));
    const int switch_rc = kh_hub_on_message(handle.get(), keep_message, &after);
    hub.server().release("switch");
    held_call.join();
    REQUIRE(held);
    CHECK(switch_rc == 0);
    CHECK(held_rc == 0);
    CHECK(before.count("(HTTP 503)") == 0);
    CHECK(after.count("(HTTP 503)") == 2);

    // Four threads fetch at once into a new cache through one handle, each
    // meeting 503s: every retry is one message, delivered one at a time.
    const std::string cache = (env.dir.path() / "cache-many").string();
    REQUIRE(kh_hub_set(handle.get(), "cache_dir", cache.c_str()) == 0);
    Messages many;
    REQUIRE(kh_hub_on_message(handle.get(), keep_message, &many) == 0);
    hub.server().add_faults(nlohmann::json::array(
        {{{"match", "/revision/"}, {"action", "status"}, {"status", 503}, {"retry_after", "0"}, {"count", 8}}}));
    Failures failures;
    run_together(static_cast<int>(k_names.size()), [&](int t) {
        const std::string& name = k_names[static_cast<std::size_t>(t)];
        if (const int rc = kh_prewarm(handle.get(), name.c_str()); rc != 0) {
            failures.add(name + ": kh_prewarm " + std::to_string(rc) + ": " + error_text(handle.get()));
        }
    });
    failures.check();
    CHECK(many.count("(HTTP 503)") == 8);
    // Messages end with the function: none reaches `many` after NULL.
    REQUIRE(kh_hub_on_message(handle.get(), nullptr, nullptr) == 0);
    const std::size_t kept = many.lines.size();
    hub.server().add_faults(nlohmann::json::array(
        {{{"match", "/revision/"}, {"action", "status"}, {"status", 503}, {"retry_after", "0"}, {"count", 2}}}));
    REQUIRE(kh_hub_set(handle.get(), "cache_dir", (env.dir.path() / "cache-quiet").c_str()) == 0);
    CHECK(kh_prewarm(handle.get(), "vector-add") == 0);
    CHECK(many.lines.size() == kept);
}
