// The C API (include/kernhub/kernhub.h): settings, return codes, messages,
// kh_symbol, independence of handles, against the bundled demo hub and the
// loopback hub server.
#include "kernhub/kernhub.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "capi/c_header_check.h"
#include "capi/capi_support.hpp"
#include "kernhub/kernhub.hpp"
#include "support/build_paths.hpp"
#include "support/forked.hpp"
#include "support/hub_builder.hpp"
#include "support/kernel_hub.hpp"
#include "support/process.hpp"
#include "support/temp_dir.hpp"

using namespace kernhub::test;

namespace {

using VectorAdd = void (*)(const float*, const float*, float*, std::size_t);

Hub new_hub() {
    Hub hub(kh_hub_new());
    REQUIRE(hub != nullptr);
    return hub;
}

// A handle on the demo hub (file://) with its own cache, online, and a
// project folder without kernhub.json.
struct DemoEnv {
    TempDir dir;
    std::string cache = (dir.path() / "cache").string();
    std::string endpoint = std::string("file://") + KERNHUB_DEMO_HUB;

    Hub hub(const std::string& cache_dir) const {
        Hub h = new_hub();
        REQUIRE(kh_hub_set(h.get(), "endpoint", endpoint.c_str()) == 0);
        REQUIRE(kh_hub_set(h.get(), "cache_dir", cache_dir.c_str()) == 0);
        REQUIRE(kh_hub_set(h.get(), "project", dir.path().c_str()) == 0);
        REQUIRE(kh_hub_set(h.get(), "offline", "0") == 0);
        return h;
    }
    Hub hub() const { return hub(cache); }

    // A handle on the loopback test hub with the standard test registry.
    Hub test_hub(KernelHub& server) const {
        Hub h = hub();
        const std::string registry = write_standard_registry(dir.path()).string();
        REQUIRE(kh_hub_set(h.get(), "endpoint", server.server().endpoint().c_str()) == 0);
        REQUIRE(kh_hub_set(h.get(), "registry", registry.c_str()) == 0);
        return h;
    }
};

bool adds_correctly(void* address) {
    if (address == nullptr) return false;
    auto add = reinterpret_cast<VectorAdd>(address);
    std::vector<float> a{1, 2, 3, 4}, b{10, 20, 30, 40}, out(4);
    add(a.data(), b.data(), out.data(), out.size());
    return out == std::vector<float>{11, 22, 33, 44};
}

}  // namespace

TEST_CASE("kh_hub_set refuses unknown keys, bad booleans, NULLs and oversized values with 2", "[capi]") {
    Hub hub = new_hub();
    CHECK(kh_last_error(hub.get()) == nullptr);

    CHECK(kh_hub_set(hub.get(), "colour", "blue") == 2);
    CHECK(last_error(hub) ==
          "usage error: unknown setting 'colour'; the settings are endpoint, cache_dir, registry, project, target, "
          "host, offline, token, verify_on_load, retries, max_wait_seconds, max_listing_entries, max_listing_bytes, "
          "api_timeout_seconds, min_rate, min_rate_window_seconds, max_connections, ref_ttl, archive_max_bytes, "
          "archive_max_entries, archive_max_path, allowed_orgs, trust_remote_code, require_signatures, "
          "sigstore_trusted_root, tvm_ffi_library, torch_dir, backend, local_kernels");
    // A typo is told the key it was probably meant to be.
    CHECK(kh_hub_set(hub.get(), "retrys", "3") == 2);
    CHECK(last_error(hub).rfind("usage error: unknown setting 'retrys' (did you mean 'retries'?); the settings are ",
                                0) == 0);

    for (const char* bad : {"2", " 1", "maybe", "enabled"}) {
        CHECK(kh_hub_set(hub.get(), "offline", bad) == 2);
        CHECK(last_error(hub).find("setting 'offline' takes 1, true, yes or on, or 0, false, no or off") !=
              std::string::npos);
        CHECK(last_error(hub).find(std::string("not '") + bad + "'") != std::string::npos);
    }
    // The words the environment variables take, in any case.
    for (const char* good : {"on", "YES", "False", "off", "0", "true"}) {
        CHECK(kh_hub_set(hub.get(), "verify_on_load", good) == 0);
    }
    CHECK(kh_hub_set(hub.get(), "verify_on_load", "sure") == 2);
    CHECK(last_error(hub).find("'verify_on_load'") != std::string::npos);

    CHECK(kh_hub_set(hub.get(), nullptr, "1") == 2);
    CHECK(last_error(hub) == "usage error: kh_hub_set: the key is NULL");
    CHECK(kh_hub_set(hub.get(), "endpoint", nullptr) == 2);
    CHECK(last_error(hub).find("the value of 'endpoint' is NULL") != std::string::npos);
    CHECK(kh_hub_set(hub.get(), "cache_dir", std::string(5000, 'x').c_str()) == 2);
    CHECK(last_error(hub).find("longer than 4096 bytes (k_max_setting_bytes)") != std::string::npos);

    // An endpoint with a query string or a fragment is a usage error at the
    // first call that would send a request, and the query is not shown.
    for (const char* endpoint : {"http://127.0.0.1:9/?token=hf_secret", "http://127.0.0.1:9/hub#hf_secret"}) {
        Hub hubbed = new_hub();
        REQUIRE(kh_hub_set(hubbed.get(), "endpoint", endpoint) == 0);
        CHECK(kh_prewarm(hubbed.get(), "kernhub-test/vector-add") == 2);
        INFO(last_error(hubbed));
        CHECK(last_error(hubbed).find("the endpoint 'http://127.0.0.1:9/") != std::string::npos);
        CHECK(last_error(hubbed).find("hf_secret") == std::string::npos);
    }

    // A control character in a key is shown escaped: the message stays one line.
    CHECK(kh_hub_set(hub.get(), "bad\nkey", "1") == 2);
    CHECK(last_error(hub).find("'bad\\nkey'") != std::string::npos);

    // NULL handle and NULL names: a code, no crash.
    CHECK(kh_hub_set(nullptr, "offline", "1") == 2);
    CHECK(kh_load(nullptr, "vector-add") == 2);
    CHECK(kh_load(hub.get(), nullptr) == 2);
    CHECK(last_error(hub) == "usage error: kh_load: the kernel name is NULL");
    CHECK(kh_symbol(nullptr, "vector-add") == nullptr);
    CHECK(kh_symbol(hub.get(), nullptr) == nullptr);
    CHECK(std::string(kh_last_error(nullptr)).find("NULL") != std::string::npos);
    kh_hub_free(nullptr);

    // Every key takes a good value, and a success clears the last error.
    for (const char* key : {"endpoint", "cache_dir", "registry", "project", "target", "token"}) {
        CHECK(kh_hub_set(hub.get(), key, "") == 0);
    }
    for (const char* value : {"1", "0", "true", "false", ""}) {
        CHECK(kh_hub_set(hub.get(), "offline", value) == 0);
        CHECK(kh_hub_set(hub.get(), "verify_on_load", value) == 0);
    }
    CHECK(kh_last_error(hub.get()) == nullptr);

    // A repeatable key holds a bounded number of values; "" clears it.
    for (int i = 0; i < 256; ++i) REQUIRE(kh_hub_set(hub.get(), "target", "native-cpu-x86_64-linux") == 0);
    CHECK(kh_hub_set(hub.get(), "target", "native-cpu-x86_64-linux") == 2);
    CHECK(last_error(hub).find("at most 256 values") != std::string::npos);
    CHECK(kh_hub_set(hub.get(), "target", "") == 0);
    CHECK(kh_hub_set(hub.get(), "target", "native-cpu-x86_64-linux") == 0);
}

TEST_CASE("local_kernels loads from a folder with no request or cache write, and \"\" defers to LOCAL_KERNELS",
          "[capi]") {
    DemoEnv env;
    const std::filesystem::path variant = env.dir.path() / "local" / "build" / kernhub::test::host_cpu_variant();
    std::filesystem::create_directories(variant);
    std::filesystem::copy_file(vector_add_so(), variant / "libvector_add.so");
    Hub hub = env.hub();
    REQUIRE(kh_hub_set(hub.get(), "endpoint", "http://127.0.0.1:9") == 0);  // a dead port: no request may go
    const std::string value = "kernhub-demo/vector-add=" + (env.dir.path() / "local").string();
    REQUIRE(kh_hub_set(hub.get(), "local_kernels", value.c_str()) == 0);
    CHECK(kh_load(hub.get(), "vector-add") == 0);
    CHECK(adds_correctly(kh_symbol(hub.get(), "vector-add")));
    CHECK_FALSE(std::filesystem::exists(env.cache));
    // "" is the environment's choice, here a malformed LOCAL_KERNELS.
    REQUIRE(::setenv("LOCAL_KERNELS", "kernhub-demo/vector-add", 1) == 0);
    REQUIRE(kh_hub_set(hub.get(), "local_kernels", "") == 0);
    CHECK(kh_load(hub.get(), "vector-add") == 2);
    CHECK(last_error(hub).find("LOCAL_KERNELS entry") != std::string::npos);
    REQUIRE(::unsetenv("LOCAL_KERNELS") == 0);
}

TEST_CASE("trust_remote_code opts a dependency of an untrusted organisation in, and \"\" defers to the variable",
          "[capi]") {
    DemoEnv env;
    const std::string cpu = "build/" + kernhub::test::host_cpu_variant() + "/";
    auto repo = [&](const std::string& id, const std::string& so, const nlohmann::json& depends) {
        nlohmann::json commit = {
            {"message", "v1"},
            {"branches", {"main", "v1"}},
            {"metadata", true},
            {"files", {{cpu + so, {{"path", (std::filesystem::path(KERNHUB_FIXTURE_DIR) / so).string()}}}}}};
        if (!depends.empty()) commit["metadata_extra"] = {{"kernel-depends", depends}};
        return nlohmann::json{{"repo_id", id}, {"type", "kernel"}, {"commits", {commit}}};
    };
    const nlohmann::json leaf = {{"repo-id", "capibad/leaf"}, {"version", 1}};
    make_hub({{"organizations",
               {{"capiok", {{"trusted_kernel_publisher", true}}}, {"capibad", {{"trusted_kernel_publisher", false}}}}},
              {"repos",
               {repo("capiok/mid", "libkh_dep_mid.so", nlohmann::json::array({leaf})),
                repo("capibad/leaf", "libkh_dep_leaf.so", nlohmann::json::array())}}},
             env.dir.path() / "hub");
    HubServer server(env.dir.path() / "hub");
    const std::filesystem::path registry = env.dir.path() / "registry.json";
    std::ofstream(registry) << R"({"format": 1, "kernels": {"mid": {"repo_id": "capiok/mid", "version": 1,
                                  "symbol": "kh_dep_mid"}}})";
    Hub hub = env.hub();
    REQUIRE(kh_hub_set(hub.get(), "endpoint", server.endpoint().c_str()) == 0);
    REQUIRE(kh_hub_set(hub.get(), "registry", registry.c_str()) == 0);
    // The registry names mid; its dependency's organisation is not trusted.
    CHECK(kh_load(hub.get(), "mid") == 4);
    CHECK(last_error(hub).find("'capibad/leaf' is not from a trusted kernel publisher") != std::string::npos);
    REQUIRE(::setenv("KERNHUB_TRUST_REMOTE_CODE", "capibad/leaf", 1) == 0);
    REQUIRE(kh_hub_set(hub.get(), "trust_remote_code", "") == 0);
    CHECK(kh_load(hub.get(), "mid") == 0);
    REQUIRE(::unsetenv("KERNHUB_TRUST_REMOTE_CODE") == 0);
    REQUIRE(kh_hub_set(hub.get(), "trust_remote_code", "capibad/other") == 0);
    CHECK(kh_load(hub.get(), "mid") == 4);
    REQUIRE(kh_hub_set(hub.get(), "trust_remote_code", "capibad/leaf") == 0);
    CHECK(kh_load(hub.get(), "mid") == 0);
    using Mid = int (*)();
    void* address = kh_symbol(hub.get(), "mid");
    REQUIRE(address != nullptr);
    Mid mid = nullptr;
    std::memcpy(&mid, &address, sizeof mid);
    CHECK(mid() == 70);
}

TEST_CASE("kh_error_name and kh_version", "[capi]") {
    CHECK(std::string(kh_error_name(0)) == "ok");
    CHECK(std::string(kh_error_name(3)) == "not found");
    CHECK(std::string(kh_error_name(6)) == "offline");
    CHECK(std::string(kh_error_name(130)) == "interrupted");
    CHECK(std::string(kh_error_name(42)) == "unknown error");
    CHECK(std::string(kh_version()) == kernhub::version());
    CHECK(std::string(kh_kernels_release()) == kernhub::kernels_release());
}

TEST_CASE("kh_load of a demo kernel gives a callable kh_symbol, other names NULL", "[capi]") {
    DemoEnv env;
    Hub hub = env.hub();
    CHECK(kh_symbol(hub.get(), "vector-add") == nullptr);
    CHECK(last_error(hub) ==
          "not found: kernel 'vector-add' was not loaded on this handle; call kh_load with the same name first");

    REQUIRE(kh_load(hub.get(), "vector-add") == 0);
    CHECK(kh_last_error(hub.get()) == nullptr);
    void* address = kh_symbol(hub.get(), "vector-add");
    CHECK(kh_last_error(hub.get()) == nullptr);
    CHECK(adds_correctly(address));
    CHECK(kh_symbol(hub.get(), "vector-add") == address);

    // The same kernel by repo: kh_symbol answers for the name as prewarmed.
    CHECK(kh_symbol(hub.get(), "kernhub-demo/vector-add") == nullptr);
    CHECK(kh_symbol(hub.get(), "saxpy") == nullptr);

    CHECK(kh_load(hub.get(), "no-such-kernel") == 3);
    CHECK(last_error(hub).rfind("not found: ", 0) == 0);
    CHECK(last_error(hub).find("no-such-kernel") != std::string::npos);
    CHECK(kh_symbol(hub.get(), "no-such-kernel") == nullptr);
    // A failure leaves the earlier prewarm in place, and the pointer
    // outlives the handle.
    CHECK(kh_symbol(hub.get(), "vector-add") == address);
    hub.reset();
    CHECK(adds_correctly(address));
}

TEST_CASE("kh_load offline on an empty cache returns 6, then warm offline returns 0", "[capi]") {
    DemoEnv env;
    Hub hub = env.hub();
    REQUIRE(kh_hub_set(hub.get(), "offline", "1") == 0);
    CHECK(kh_load(hub.get(), "vector-add") == 6);
    CHECK(last_error(hub).rfind("offline: ", 0) == 0);
    CHECK(kh_symbol(hub.get(), "vector-add") == nullptr);

    // Settings changed after a kh_load apply to the next one.
    REQUIRE(kh_hub_set(hub.get(), "offline", "false") == 0);
    CHECK(kh_load(hub.get(), "vector-add") == 0);
    REQUIRE(kh_hub_set(hub.get(), "offline", "true") == 0);
    CHECK(kh_load(hub.get(), "vector-add") == 0);
    CHECK(adds_correctly(kh_symbol(hub.get(), "vector-add")));
}

TEST_CASE("settings changed after kh_load take effect on the next kh_load", "[capi]") {
    DemoEnv env;
    Hub hub = env.hub();
    REQUIRE(kh_load(hub.get(), "vector-add") == 0);
    void* first = kh_symbol(hub.get(), "vector-add");

    // A fresh, empty cache and offline: the Client must be rebuilt to see it.
    std::string other_cache = (env.dir.path() / "other-cache").string();
    REQUIRE(kh_hub_set(hub.get(), "cache_dir", other_cache.c_str()) == 0);
    REQUIRE(kh_hub_set(hub.get(), "offline", "1") == 0);
    CHECK(kh_load(hub.get(), "vector-add") == 6);
    CHECK(kh_symbol(hub.get(), "vector-add") == first);

    // An endpoint with nothing behind it, online: no longer the demo hub.
    REQUIRE(kh_hub_set(hub.get(), "offline", "0") == 0);
    std::string nowhere = "file://" + (env.dir.path() / "no-hub").string();
    REQUIRE(kh_hub_set(hub.get(), "endpoint", nowhere.c_str()) == 0);
    int code = kh_load(hub.get(), "vector-add");
    CHECK(code != 0);
    CHECK_FALSE(last_error(hub).empty());

    // A registry added later wins per name: "vector-add" now names the
    // standard test hub's repo, which the demo hub lacks.
    REQUIRE(kh_hub_set(hub.get(), "endpoint", env.endpoint.c_str()) == 0);
    std::string registry = write_standard_registry(env.dir.path()).string();
    REQUIRE(kh_hub_set(hub.get(), "registry", registry.c_str()) == 0);
    CHECK(kh_load(hub.get(), "vector-add") == 3);
    CHECK(last_error(hub).find("kernhub-test/vector-add") != std::string::npos);
    // Clearing the registry list brings the default's entry back.
    REQUIRE(kh_hub_set(hub.get(), "registry", "") == 0);
    CHECK(kh_load(hub.get(), "vector-add") == 0);
    // Loaded from the other cache now: another file, another address; the
    // first one stays callable.
    void* second = kh_symbol(hub.get(), "vector-add");
    CHECK(second != first);
    CHECK(adds_correctly(second));
    CHECK(adds_correctly(first));
}

TEST_CASE("two handles are independent: settings, prewarmed names and errors", "[capi]") {
    DemoEnv env;
    Hub one = env.hub();
    Hub two = env.hub((env.dir.path() / "cache-two").string());
    REQUIRE(kh_hub_set(two.get(), "offline", "1") == 0);

    REQUIRE(kh_load(one.get(), "vector-add") == 0);
    CHECK(kh_symbol(two.get(), "vector-add") == nullptr);
    CHECK(kh_load(two.get(), "vector-add") == 6);
    CHECK(kh_last_error(one.get()) == nullptr);
    CHECK(adds_correctly(kh_symbol(one.get(), "vector-add")));
    CHECK(last_error(two).rfind("offline: ", 0) == 0);
    two.reset();
    CHECK(adds_correctly(kh_symbol(one.get(), "vector-add")));
}

TEST_CASE("separate handles work from separate threads at once", "[capi]") {
    DemoEnv env;
    constexpr int k_threads = 4;
    std::vector<Hub> hubs;
    for (int i = 0; i < k_threads; ++i) {
        hubs.push_back(env.hub((env.dir.path() / ("cache-" + std::to_string(i))).string()));
    }
    std::vector<int> codes(k_threads, -1);
    std::vector<void*> addresses(k_threads, nullptr);
    std::vector<std::thread> threads;
    for (int i = 0; i < k_threads; ++i) {
        threads.emplace_back([&, i] {
            codes[i] = kh_load(hubs[i].get(), "vector-add");
            addresses[i] = kh_symbol(hubs[i].get(), "vector-add");
        });
    }
    for (auto& t : threads) t.join();
    for (int i = 0; i < k_threads; ++i) {
        INFO("handle " << i << ": " << last_error(hubs[i]));
        CHECK(codes[i] == 0);
        CHECK(adds_correctly(addresses[i]));
    }
}

TEST_CASE("kh_last_error belongs to the calling thread and to the handle, not to its address", "[capi]") {
    // Another thread's failure is not this thread's.
    Hub hub = new_hub();
    std::string other_thread_error;
    std::thread([&] {
        CHECK(kh_hub_set(hub.get(), "colour", "blue") == 2);
        other_thread_error = last_error(hub);
    }).join();
    CHECK(other_thread_error.find("unknown setting 'colour'") != std::string::npos);
    CHECK(kh_last_error(hub.get()) == nullptr);

    // A failure's text stays in place while the same thread uses other handles.
    REQUIRE(kh_hub_set(hub.get(), "offline", "maybe") == 2);
    const char* text = kh_last_error(hub.get());
    REQUIRE(text != nullptr);
    const std::string copy = text;
    {
        Hub other = new_hub();
        CHECK(kh_hub_set(other.get(), "colour", "red") == 2);
        CHECK(kh_hub_set(other.get(), "offline", "1") == 0);
        CHECK(kh_hub_set(other.get(), "shade", "dark") == 2);
    }
    CHECK(kh_last_error(hub.get()) == text);
    CHECK(std::string(text) == copy);

    // A handle made right after one that failed was freed starts with no
    // error: the texts follow the handle, not its address. glibc's
    // allocator hands the freed block straight back, so the new handle
    // usually lies where the old one did; AddressSanitizer never reuses a
    // block that soon, and there this checks only that a new handle starts
    // clean.
    for (int i = 0; i < 8; ++i) {
        kh_hub* failed = kh_hub_new();
        REQUIRE(failed != nullptr);
        CHECK(kh_hub_set(failed, "colour", "green") == 2);
        kh_hub_free(failed);
        Hub fresh = new_hub();
        CHECK(kh_last_error(fresh.get()) == nullptr);
    }
}

TEST_CASE("a token never appears in any error text", "[capi]") {
    const std::string token = "hf_capi_secret_7d41b9";
    DemoEnv env;
    KernelHub hub({k_test_token, 1000});
    Hub h = env.test_hub(hub);
    REQUIRE(kh_hub_set(h.get(), "token", token.c_str()) == 0);

    std::vector<std::string> errors;
    auto record = [&](int code) {
        CHECK(code != 0);
        errors.push_back(last_error(h));
    };
    record(kh_load(h.get(), "private"));  // the hub refuses this token
    record(kh_load(h.get(), "no-such-kernel"));
    record(kh_load(h.get(), "missing-symbol"));
    record(kh_hub_set(h.get(), "token", (token + std::string(5000, 'x')).c_str()));
    REQUIRE(kh_hub_set(h.get(), "offline", "1") == 0);
    record(kh_load(h.get(), "vector-add-v2"));
    record(kh_symbol(h.get(), "private") == nullptr ? 3 : 0);
    REQUIRE(errors.size() == 6);
    for (const auto& message : errors) {
        INFO(message);
        CHECK_FALSE(message.empty());
        CHECK(message.find(token) == std::string::npos);
        CHECK(message.find("7d41b9") == std::string::npos);
    }

    // The right token opens the private repo: the setting reached the hub.
    REQUIRE(kh_hub_set(h.get(), "offline", "0") == 0);
    REQUIRE(kh_hub_set(h.get(), "token", k_test_token) == 0);
    CHECK(kh_load(h.get(), "private") == 0);
    CHECK(adds_correctly(kh_symbol(h.get(), "private")));
}

TEST_CASE("kh_load of ORG/REPO takes the symbol from the registry entries naming the repo", "[capi]") {
    DemoEnv env;
    KernelHub hub({k_test_token, 1000});
    Hub h = env.test_hub(hub);
    REQUIRE(kh_hub_set(h.get(), "token", k_test_token) == 0);
    // One entry names kernhub-test/private: its symbol is used.
    REQUIRE(kh_load(h.get(), "kernhub-test/private") == 0);
    CHECK(adds_correctly(kh_symbol(h.get(), "kernhub-test/private")));
    // The repo type comes along (a model repo, a different hub path).
    CHECK(kh_load(h.get(), "kernhub-test/model-kernel@main") == 0);
    CHECK(kh_symbol(h.get(), "kernhub-test/model-kernel@main") != nullptr);
    // Entries that disagree on the symbol give none: a usage error, not a guess
    // (they agree on the file, libvector_add.so, which is taken).
    CHECK(kh_load(h.get(), "kernhub-test/vector-add") == 2);
    CHECK_THAT(last_error(h), Catch::Contains("no symbol to resolve for 'kernhub-test/vector-add'"));
    CHECK_THAT(last_error(h), Catch::Contains("must agree"));
    // A repo no entry names has no symbol either.
    CHECK(kh_load(h.get(), "kernhub-test/unlisted") == 2);
}

TEST_CASE("a token that could inject a header is refused with 2 and the old one kept", "[capi]") {
    DemoEnv env;
    KernelHub hub({k_test_token, 1000});
    Hub h = env.test_hub(hub);
    REQUIRE(kh_hub_set(h.get(), "token", k_test_token) == 0);
    for (const char* bad : {"hf_x\r\nX-Injected: 1", "hf_x\nX-Injected: 1", "hf x", "hf_\x1b[2J"}) {
        CHECK(kh_hub_set(h.get(), "token", bad) == 2);
        INFO(last_error(h));
        CHECK_THAT(last_error(h), Catch::Contains("control character"));
        CHECK_THAT(last_error(h), !Catch::Contains("Injected") && !Catch::Contains("hf_x"));
    }
    // The refused values changed nothing: the good token still opens the
    // private repo.
    CHECK(kh_load(h.get(), "private") == 0);
    CHECK(adds_correctly(kh_symbol(h.get(), "private")));
}

TEST_CASE("a huge or unprintable kernel name gives one bounded line", "[capi]") {
    DemoEnv env;
    Hub h = env.hub();
    const std::string huge(1 << 20, 'n');
    CHECK(kh_load(h.get(), huge.c_str()) == 3);
    CHECK(last_error(h).size() < 1000);
    CHECK(kh_load(h.get(), ("org/" + huge).c_str()) == 2);
    CHECK(last_error(h).size() < 1000);
    CHECK(kh_load(h.get(), "evil\x1b]0;title\x07\nname") == 3);
    CHECK(last_error(h).find('\x1b') == std::string::npos);
    CHECK(last_error(h).find('\n') == std::string::npos);
    CHECK(kh_symbol(h.get(), huge.c_str()) == nullptr);
    CHECK(last_error(h).size() < 1000);
}

TEST_CASE("the C API header compiles as ISO C99 and works from C", "[capi]") {
    DemoEnv env;
    CHECK(kh_c_header_check(env.endpoint.c_str(), env.cache.c_str(), env.dir.path().c_str()) == 0);
}

TEST_CASE("target and verify_on_load reach the loader", "[capi]") {
    DemoEnv env;
    SECTION("a target the demo hub has no variant for is not found (3)") {
        Hub hub = env.hub();
        REQUIRE(kh_hub_set(hub.get(), "target", "native-cpu-riscv64-linux") == 0);
        CHECK(kh_load(hub.get(), "vector-add") == 3);
        CHECK(last_error(hub).find("(kh_hub_set \"target\")") != std::string::npos);
        // Clearing the targets detects the host again.
        REQUIRE(kh_hub_set(hub.get(), "target", "") == 0);
        CHECK(kh_load(hub.get(), "vector-add") == 0);
    }
    SECTION("verify_on_load re-hashes: a changed cached file is a verification failure (4)") {
        {
            Hub warm = env.hub();
            REQUIRE(kh_load(warm.get(), "vector-add") == 0);
        }
        // Change the cached shared object behind kernhub's back (same size).
        std::filesystem::path so;
        for (const auto& entry : std::filesystem::recursive_directory_iterator(env.cache)) {
            if (entry.path().filename() == "libvector_add.so") so = std::filesystem::canonical(entry.path());
        }
        REQUIRE_FALSE(so.empty());
        std::filesystem::permissions(so, std::filesystem::perms::owner_write, std::filesystem::perm_options::add);
        {
            std::fstream file(so, std::ios::in | std::ios::out | std::ios::binary);
            file.seekp(-1, std::ios::end);
            file.put('\x7f');
        }
        Hub hub = env.hub();
        REQUIRE(kh_hub_set(hub.get(), "offline", "1") == 0);
        REQUIRE(kh_hub_set(hub.get(), "verify_on_load", "1") == 0);
        CHECK(kh_load(hub.get(), "vector-add") == 4);
        CHECK(kh_symbol(hub.get(), "vector-add") == nullptr);
    }
}

TEST_CASE("allowed_orgs refuses other organisations with 4 and a bad name with 2", "[capi]") {
    DemoEnv env;
    Hub hub = env.hub();
    REQUIRE(kh_hub_set(hub.get(), "allowed_orgs", "kernels-community") == 0);
    CHECK(kh_load(hub.get(), "vector-add") == 4);
    CHECK(last_error(hub).find("'kernhub-demo'") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(std::filesystem::path(env.cache) / "kernels--kernhub-demo--vector-add"));

    REQUIRE(kh_hub_set(hub.get(), "allowed_orgs", "kernels-community,kernhub-demo") == 0);
    CHECK(kh_load(hub.get(), "vector-add") == 0);
    CHECK(adds_correctly(kh_symbol(hub.get(), "vector-add")));

    REQUIRE(kh_hub_set(hub.get(), "allowed_orgs", "kernhub-demo,../x") == 0);  // checked by kh_load
    CHECK(kh_load(hub.get(), "vector-add") == 2);
    CHECK(last_error(hub).find("Options::allowed_orgs") != std::string::npos);
    REQUIRE(kh_hub_set(hub.get(), "allowed_orgs", "") == 0);  // back to KERNHUB_ALLOWED_ORGS (unset)
    CHECK(kh_load(hub.get(), "vector-add") == 0);
}

TEST_CASE("require_signatures and sigstore_trusted_root reach the fetch", "[capi]") {
    DemoEnv env;
    Hub hub = env.hub();
    // The demo's registry entry has no signature policy.
    REQUIRE(kh_hub_set(hub.get(), "require_signatures", "1") == 0);
    CHECK(kh_load(hub.get(), "vector-add") == 4);
    CHECK(last_error(hub).find("no \"signature\" policy") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(std::filesystem::path(env.cache) / "kernels--kernhub-demo--vector-add"));
    CHECK(kh_hub_set(hub.get(), "require_signatures", "maybe") == 2);
    REQUIRE(kh_hub_set(hub.get(), "require_signatures", "0") == 0);
    // A root that does not exist matters only to a kernel with a policy.
    REQUIRE(kh_hub_set(hub.get(), "sigstore_trusted_root", "/nonexistent/trusted_root.json") == 0);
    CHECK(kh_load(hub.get(), "vector-add") == 0);
    REQUIRE(kh_hub_set(hub.get(), "sigstore_trusted_root", "") == 0);
}

TEST_CASE("the limit settings reach the fetch, and a bad or out-of-range value is refused with 2", "[capi]") {
    DemoEnv env;
    KernelHub server;
    Hub h = env.test_hub(server);
    for (const char* bad : {"-1", "1e3", " 5", "5 ", "0x10", "2147483648", "9999999999999999999"}) {
        INFO(bad);
        CHECK(kh_hub_set(h.get(), "max_listing_entries", bad) == 2);
        CHECK(last_error(h).find("setting 'max_listing_entries' takes a whole number") != std::string::npos);
    }
    // A listing cap below what the repo lists stops the fetch, naming the cap.
    REQUIRE(kh_hub_set(h.get(), "max_listing_entries", "1") == 0);
    CHECK(kh_load(h.get(), "vector-add") == 5);
    CHECK(last_error(h).find("KERNHUB_MAX_LISTING_ENTRIES") != std::string::npos);
    // Out of range: checked by kh_load, which names the setting.
    REQUIRE(kh_hub_set(h.get(), "max_listing_entries", "0") == 0);
    CHECK(kh_load(h.get(), "vector-add") == 2);
    CHECK(last_error(h).find("max_listing_entries") != std::string::npos);
    REQUIRE(kh_hub_set(h.get(), "api_timeout_seconds", "0") == 0);
    REQUIRE(kh_hub_set(h.get(), "max_listing_entries", "") == 0);
    CHECK(kh_load(h.get(), "vector-add") == 2);
    CHECK(last_error(h).find("api_timeout_seconds") != std::string::npos);
    // Back to the environment's choice: the fetch goes through.
    REQUIRE(kh_hub_set(h.get(), "api_timeout_seconds", "") == 0);
    for (const char* key : {"retries", "max_wait_seconds", "max_listing_bytes", "min_rate", "min_rate_window_seconds",
                            "archive_max_bytes", "archive_max_entries", "archive_max_path"}) {
        INFO(key);
        CHECK(kh_hub_set(h.get(), key, "x") == 2);
        CHECK(kh_hub_set(h.get(), key, "") == 0);
    }
    REQUIRE(kh_hub_set(h.get(), "archive_max_bytes", "18446744073709551") == 0);
    REQUIRE(kh_hub_set(h.get(), "min_rate", "0") == 0);
    CHECK(kh_load(h.get(), "vector-add") == 0);
    CHECK(adds_correctly(kh_symbol(h.get(), "vector-add")));
}

TEST_CASE("the ref_ttl setting lets a later handle use the branch the cache resolved", "[capi]") {
    DemoEnv env;
    KernelHub server;
    auto prewarm_with = [&](const char* ttl) {
        Hub h = env.test_hub(server);
        REQUIRE(kh_hub_set(h.get(), "ref_ttl", ttl) == 0);
        const int rc = kh_load(h.get(), "vector-add");
        INFO(last_error(h));
        CHECK(rc == 0);
        CHECK(adds_correctly(kh_symbol(h.get(), "vector-add")));
    };
    prewarm_with("300");
    server.server().reset();
    prewarm_with("300");
    CHECK(server.server().count_requests("/revision/") == 0);
    // "0" (and "", with KERNHUB_REF_TTL unset) asks the hub again.
    prewarm_with("0");
    CHECK(server.server().count_requests("/revision/main") == 1);
    prewarm_with("");
    CHECK(server.server().count_requests("/revision/main") == 2);

    Hub h = env.test_hub(server);
    CHECK(kh_hub_set(h.get(), "ref_ttl", "5m") == 2);
    REQUIRE(kh_hub_set(h.get(), "ref_ttl", "31536001") == 0);
    CHECK(kh_load(h.get(), "vector-add") == 2);
    CHECK(last_error(h).find("ref_ttl") != std::string::npos);
}

TEST_CASE("the max_connections setting bounds the downloads in flight and is range-checked", "[capi]") {
    DemoEnv env;
    KernelHub server;
    Hub h = env.test_hub(server);
    CHECK(kh_hub_set(h.get(), "max_connections", "many") == 2);
    REQUIRE(kh_hub_set(h.get(), "max_connections", "1") == 0);
    const int rc = kh_load(h.get(), "vector-add");
    INFO(last_error(h));
    REQUIRE(rc == 0);
    CHECK(adds_correctly(kh_symbol(h.get(), "vector-add")));
    CHECK(server.server().stats()["peak_in_flight"]["cdn"].get<int>() == 1);

    Hub bad = env.test_hub(server);
    REQUIRE(kh_hub_set(bad.get(), "max_connections", "65") == 0);
    CHECK(kh_load(bad.get(), "vector-add") == 2);
    CHECK(last_error(bad).find("max_connections") != std::string::npos);
}

TEST_CASE("kh_prewarm makes the cache hold the verified kernel and loads nothing, kh_load loads it", "[capi]") {
    KernelHub server({k_test_token, 1000});
    DemoEnv env;
    Hub hub = env.test_hub(server);
    CHECK(kh_prewarm(nullptr, "vector-add") == 2);
    CHECK(kh_prewarm(hub.get(), nullptr) == 2);
    CHECK(last_error(hub) == "usage error: kh_prewarm: the kernel name is NULL");

    // The "undefined" kernel's library has an undefined symbol: dlopen
    // refuses it, so only a call that loads fails.
    CHECK(kh_prewarm(hub.get(), "undefined") == 0);
    CHECK(kh_last_error(hub.get()) == nullptr);
    CHECK(kh_symbol(hub.get(), "undefined") == nullptr);
    CHECK(kh_load(hub.get(), "undefined") == 7);

    // Prewarmed: in the cache, whole, and loadable offline; not loaded.
    REQUIRE(kh_prewarm(hub.get(), "vector-add") == 0);
    CHECK(kh_symbol(hub.get(), "vector-add") == nullptr);
    CHECK(std::filesystem::exists(std::filesystem::path(env.cache) / "kernels--kernhub-test--vector-add"));
    REQUIRE(kh_hub_set(hub.get(), "offline", "1") == 0);
    REQUIRE(kh_load(hub.get(), "vector-add") == 0);
    CHECK(adds_correctly(kh_symbol(hub.get(), "vector-add")));
    // Offline, what the cache lacks is 6 for both.
    CHECK(kh_prewarm(hub.get(), "vector-add-v2") == 6);
    CHECK(kh_prewarm(hub.get(), "no-such-kernel") == 3);
}

namespace {

// What a kh_message_fn was given: "<kind> <line>" per message. Unlocked:
// the function is never called from two threads at once for one handle.
struct Messages {
    std::vector<std::string> lines;
    std::string joined() const {
        std::string all;
        for (const std::string& line : lines) all += line + "\n";
        return all;
    }
    std::size_t count(const std::string& part) const {
        std::size_t found = 0;
        for (const std::string& line : lines) found += line.find(part) != std::string::npos ? 1 : 0;
        return found;
    }
};

extern "C" void keep_message(int kind, const char* line, void* user) {
    static_cast<Messages*>(user)->lines.push_back(std::to_string(kind) + " " + line);
}

// Tries every other call of the C API from inside a kh_message_fn; each
// must be refused. `user` is a Reentry.
struct Reentry {
    kh_hub* hub = nullptr;
    int calls = 0;
    std::vector<std::string> accepted;
};
extern "C" void call_back_in(int /*kind*/, const char* /*line*/, void* user) {
    auto& seen = *static_cast<Reentry*>(user);
    ++seen.calls;
    auto expect_2 = [&](const char* what, int rc) {
        if (rc != 2 || kh_last_error(seen.hub) == nullptr) seen.accepted.emplace_back(what);
    };
    expect_2("kh_hub_on_message", kh_hub_on_message(seen.hub, nullptr, nullptr));
    expect_2("kh_hub_set", kh_hub_set(seen.hub, "retries", "1"));
    expect_2("kh_prewarm", kh_prewarm(seen.hub, "vector-add"));
    expect_2("kh_load", kh_load(seen.hub, "vector-add"));
    expect_2("kh_tvm_set_stream", kh_tvm_set_stream(seen.hub, 0, nullptr, nullptr));
    if (kh_torch_op(seen.hub, "vector-add") != nullptr || kh_last_error(seen.hub) == nullptr)
        seen.accepted.emplace_back("kh_torch_op");
    expect_2("kh_tvm_call", kh_tvm_call(seen.hub, reinterpret_cast<void*>(&call_back_in), nullptr, 0, nullptr));
    if (kh_symbol(seen.hub, "vector-add") != nullptr) seen.accepted.emplace_back("kh_symbol");
    if (kh_hub_new() != nullptr) seen.accepted.emplace_back("kh_hub_new");
    if (kh_kernels_release() == nullptr || kh_version() == nullptr)
        seen.accepted.emplace_back("kh_kernels_release or kh_version: NULL");
    kh_hub_free(seen.hub);  // refused: the handle stays usable
}

}  // namespace

namespace {

constexpr const char* k_warning_report = "KERNHUB_TEST_CAPI_REPORT";
constexpr const char* k_warning_child = "capi child: report the messages of a process's first handles";

}  // namespace

// Runs only when selected by name, in a process of its own, from the test
// below; it reports rather than asserts.
TEST_CASE("capi child: report the messages of a process's first handles", "[.][capi-child]") {
    const char* report_path = std::getenv(k_warning_report);
    if (report_path == nullptr) return;
    DemoEnv env;
    std::string out;
    // A handle without a function does not use the warning up.
    Hub quiet = env.hub();
    out += "quiet " + std::to_string(kh_prewarm(quiet.get(), "vector-add")) + "\n";
    Messages first;
    Hub hub = env.hub();
    out += "set " + std::to_string(kh_hub_on_message(hub.get(), keep_message, &first)) + "\n";
    out += "first " + std::to_string(kh_prewarm(hub.get(), "vector-add")) + "\n";
    out += first.joined();  // a statement of its own: after the prewarm
    // A settings change builds a new client, which does not warn again;
    // neither does another handle.
    Messages later;
    kh_hub_on_message(hub.get(), keep_message, &later);
    kh_hub_set(hub.get(), "offline", "1");
    out += "again " + std::to_string(kh_prewarm(hub.get(), "vector-add")) + "\n";
    Hub other = env.hub();
    kh_hub_on_message(other.get(), keep_message, &later);
    out += "other " + std::to_string(kh_load(other.get(), "vector-add")) + "\n";
    out += later.joined();
    std::ofstream(report_path) << out;
}

TEST_CASE("kh_hub_on_message hands the program the unknown-variable warning, once per process, printable", "[capi]") {
    CHECK(kh_hub_on_message(nullptr, keep_message, nullptr) == 2);
    // In a process of its own (this program run again, only the case
    // above): the warning is given once per process, and another test of
    // this program may have had it; a forked child would inherit that.
    kernhub::test::TempDir dir;
    const std::string report_path = (dir.path() / "report.txt").string();
    const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
    const auto child = kernhub::test::run_process(
        {self, k_warning_child},
        {{"KERNHUB_RETRYS", "3"}, {"KERNHUB_ESC\x1b[31mAPE", "1"}, {k_warning_report, report_path}});
    INFO("child output:\n" << child.out << child.err);
    REQUIRE(child.exit_code == 0);
    std::ifstream report(report_path);
    REQUIRE(report);
    const std::string seen((std::istreambuf_iterator<char>(report)), std::istreambuf_iterator<char>());
    INFO(seen);
    CHECK(seen.find("quiet 0\nset 0\nfirst 0\n") == 0);
    auto count = [&](const std::string& part) {
        std::size_t found = 0;
        for (std::size_t at = seen.find(part); at != std::string::npos; at = seen.find(part, at + 1)) ++found;
        return found;
    };
    CHECK(count("1 warning: KERNHUB_RETRYS is set but is not a kernhub setting; did you mean KERNHUB_RETRIES? "
                "(docs/configuration.md lists the settings)\n") == 1);
    // The name's escape character arrives as text, never as the byte.
    CHECK(count("1 warning: KERNHUB_ESC\\x1b[31mAPE is set but is not a kernhub setting") == 1);
    CHECK(count("\x1b") == 0);
    CHECK(count("again 0\nother 0\n") == 1);
    CHECK(count("KERNHUB_RETRYS") == 1);
}

TEST_CASE("kh_hub_on_message: retries reach the function with their kind, and NULL stops the messages", "[capi]") {
    DemoEnv env;
    KernelHub server;
    const nlohmann::json twice_503 = {
        {{"match", "/revision/"}, {"action", "status"}, {"status", 503}, {"retry_after", "0"}, {"count", 2}}};
    server.server().add_faults(twice_503);
    Messages messages;
    Hub hub = env.test_hub(server);
    REQUIRE(kh_hub_set(hub.get(), "retries", "3") == 0);
    REQUIRE(kh_hub_on_message(hub.get(), keep_message, &messages) == 0);
    CHECK(kh_last_error(hub.get()) == nullptr);
    CHECK(kh_prewarm(hub.get(), "vector-add") == 0);
    INFO(messages.joined());
    CHECK(messages.count("3 retrying ") == 2);
    CHECK(messages.count("(HTTP 503)") == 2);
    for (const std::string& line : messages.lines) CHECK(line.find('\n') == std::string::npos);
    CHECK(server.server().count_requests("/revision/") == 3);

    messages.lines.clear();
    REQUIRE(kh_hub_on_message(hub.get(), nullptr, nullptr) == 0);
    server.server().add_faults(twice_503);
    REQUIRE(kh_hub_set(hub.get(), "cache_dir", (env.dir.path() / "cache2").c_str()) == 0);
    CHECK(kh_prewarm(hub.get(), "vector-add") == 0);
    CHECK(server.server().count_requests("/revision/") == 6);  // the faults did fire
    CHECK(messages.lines.empty());
}

TEST_CASE("a kh_message_fn that calls kernhub is refused each call, and the handle goes on", "[capi]") {
    DemoEnv env;
    KernelHub server;
    server.server().add_faults(
        {{{"match", "/revision/"}, {"action", "status"}, {"status", 503}, {"retry_after", "0"}, {"count", 1}}});
    Hub hub = env.test_hub(server);
    Reentry seen;
    seen.hub = hub.get();
    REQUIRE(kh_hub_on_message(hub.get(), call_back_in, &seen) == 0);
    CHECK(kh_prewarm(hub.get(), "vector-add") == 0);
    CHECK(seen.calls >= 1);
    CHECK(seen.accepted.empty());
    for (const std::string& what : seen.accepted) UNSCOPED_INFO(what + " was not refused");
    // The refusals were the message function's; the handle is whole.
    CHECK(kh_load(hub.get(), "vector-add") == 0);
    CHECK(adds_correctly(kh_symbol(hub.get(), "vector-add")));
}

TEST_CASE("a hub's 20 KB header reaches a kh_message_fn as one line cut to 4 KiB, escaped", "[capi]") {
    DemoEnv env;
    KernelHub server;
    // The first download is a 206 whose Content-Range no client can read:
    // kernhub starts it again, and the retry message quotes the header.
    server.server().add_faults({{{"match", "/lfs/"}, {"action", "bad_range"}, {"value_bytes", 20000}, {"count", 1}}});
    Messages messages;
    Hub hub = env.test_hub(server);
    REQUIRE(kh_hub_on_message(hub.get(), keep_message, &messages) == 0);
    CHECK(kh_prewarm(hub.get(), "vector-add") == 0);
    INFO(messages.joined().substr(0, 4000));
    REQUIRE(messages.count("HTTP 206") == 1);
    CHECK(messages.count("bytes cut") == 1);
    CHECK(messages.count("\x1b") == 0);
    // 4 KiB once escaped, the cut's marker included; the header alone was
    // 20 KB, and the one marker says how much of it went.
    for (const std::string& line : messages.lines) CHECK(line.size() <= 4096);
    for (const std::string& line : messages.lines) {
        const std::size_t marker = line.find(" bytes cut)");
        if (marker == std::string::npos) continue;
        CHECK(line.find(" bytes cut)", marker + 1) == std::string::npos);
        const std::size_t open = line.rfind('(', marker);
        REQUIRE(open != std::string::npos);
        CHECK(std::stoul(line.substr(open + 1, marker - open - 1)) >= 15000);
    }
}

namespace {

// A kh_message_fn that says it is delivering, then waits until told to go
// on. `user` is a Gate.
struct Gate {
    std::mutex mutex;
    std::condition_variable changed;
    bool inside = false;
    bool go = false;
    // Whether a delivery reached the function (the deadline only bounds a
    // failure).
    bool wait_inside() {
        std::unique_lock<std::mutex> lock(mutex);
        return changed.wait_for(lock, std::chrono::seconds(30), [&] { return inside; });
    }
    // Lets the delivery, and every later one, go on.
    void open() {
        std::lock_guard<std::mutex> lock(mutex);
        go = true;
        changed.notify_all();
    }
};
extern "C" void wait_at_gate(int /*kind*/, const char* /*line*/, void* user) {
    auto& gate = *static_cast<Gate*>(user);
    std::unique_lock<std::mutex> lock(gate.mutex);
    gate.inside = true;
    gate.changed.notify_all();
    gate.changed.wait(lock, [&] { return gate.go; });
}

}  // namespace

TEST_CASE("a child forked while a message is being delivered can use the handle and its client", "[capi]") {
    DemoEnv env;
    KernelHub server;
    server.server().add_faults({{{"match", "kernhub-test/vector-add/revision/"},
                                 {"action", "status"},
                                 {"status", 503},
                                 {"retry_after", "0"},
                                 {"count", 1}},
                                {{"match", "kernhub-test/model-kernel/revision/"},
                                 {"action", "status"},
                                 {"status", 503},
                                 {"retry_after", "0"},
                                 {"count", 1}}});
    Hub hub = env.test_hub(server);
    Gate gate;
    REQUIRE(kh_hub_on_message(hub.get(), wait_at_gate, &gate) == 0);
    int call_rc = -1;
    std::thread call([&] { call_rc = kh_prewarm(hub.get(), "vector-add"); });
    const bool inside = gate.wait_inside();
    // The child takes a function of its own (the same client: no settings
    // change) and prewarms another kernel, whose retry is a message; it
    // inherited the parent's delivery, not the thread making it.
    Forked child;
    std::string fork_error;
    if (inside) {
        try {
            child = run_forked([&] {
                ::alarm(20);  // a hang ends the child, and fails the test
                Messages seen;
                const int set_rc = kh_hub_on_message(hub.get(), keep_message, &seen);
                const int rc = kh_prewarm(hub.get(), "model-kernel");
                return "set " + std::to_string(set_rc) + " prewarm " + std::to_string(rc) + "\n" + seen.joined();
            });
        } catch (const std::exception& e) {
            fork_error = e.what();
        }
    }
    gate.open();
    call.join();
    REQUIRE(inside);
    REQUIRE(fork_error.empty());
    INFO(child.out);
    CHECK(child.ok());
    CHECK(child.out.rfind("set 0 prewarm 0\n", 0) == 0);
    CHECK(child.out.find("(HTTP 503)") != std::string::npos);
    CHECK(call_rc == 0);
}

namespace {

// Whether the thread `tid` of this process is blocked in a futex wait
// (/proc/self/task/TID/syscall names the system call it is in): the wait
// for a turn, here.
bool thread_in_futex_wait(pid_t tid) {
    std::ifstream syscall_file("/proc/self/task/" + std::to_string(tid) + "/syscall");
    long number = -1;
    return static_cast<bool>(syscall_file >> number) && number == SYS_futex;
}

}  // namespace

TEST_CASE("a child forked while a thread waits in kh_hub_on_message for a delivery can set a function", "[capi]") {
    DemoEnv env;
    KernelHub server;
    server.server().add_faults({{{"match", "kernhub-test/vector-add/revision/"},
                                 {"action", "status"},
                                 {"status", 503},
                                 {"retry_after", "0"},
                                 {"count", 1}}});
    Hub hub = env.test_hub(server);
    Gate gate;
    REQUIRE(kh_hub_on_message(hub.get(), wait_at_gate, &gate) == 0);
    int call_rc = -1;
    std::thread call([&] { call_rc = kh_prewarm(hub.get(), "vector-add"); });
    const bool inside = gate.wait_inside();
    // Another thread replaces the function: it waits for the delivery.
    Messages replaced;
    std::atomic<pid_t> setter_tid{0};
    int set_rc = -1;
    std::thread setter([&] {
        setter_tid = static_cast<pid_t>(::syscall(SYS_gettid));
        set_rc = kh_hub_on_message(hub.get(), keep_message, &replaced);
    });
    // Until the setter sleeps in its wait (bounded; polls an event).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    bool setter_waits = false;
    while (!setter_waits && std::chrono::steady_clock::now() < deadline) {
        setter_waits = setter_tid != 0 && thread_in_futex_wait(setter_tid);
        if (!setter_waits) std::this_thread::yield();
    }
    Forked child;
    std::string fork_error;
    if (inside && setter_waits) {
        try {
            child = run_forked([&] {
                ::alarm(20);  // a hang ends the child, and fails the test
                Messages seen;
                const int rc = kh_hub_on_message(hub.get(), keep_message, &seen);
                const int off = kh_hub_on_message(hub.get(), nullptr, nullptr);
                return "set " + std::to_string(rc) + " off " + std::to_string(off) + "\n";
            });
        } catch (const std::exception& e) {
            fork_error = e.what();
        }
    }
    gate.open();
    call.join();
    setter.join();
    REQUIRE(inside);
    REQUIRE(setter_waits);
    REQUIRE(fork_error.empty());
    INFO(child.out);
    CHECK(child.ok());
    CHECK(child.out == "set 0 off 0\n");
    CHECK(call_rc == 0);
    CHECK(set_rc == 0);
}

TEST_CASE("a child forked while another thread downloads fetches once the parent's download ends", "[capi]") {
    DemoEnv env;
    KernelHub server;
    // The parent's download of the blob waits at the gate, holding the
    // blob's cache lock; the child, on the same cache, lets it go on.
    server.server().add_faults({{{"match", "/lfs/"}, {"action", "hold"}, {"gate", "blob"}, {"count", 1}}});
    Hub hub = env.test_hub(server);
    int call_rc = -1;
    std::thread call([&] { call_rc = kh_prewarm(hub.get(), "vector-add"); });
    const bool held = server.server().wait_held("blob");
    Forked child;
    std::string fork_error;
    if (held) {
        try {
            child = run_forked([&] {
                ::alarm(20);  // a hang ends the child, and fails the test
                server.server().release("blob");
                // Waits for the parent's download (its lock), then finds
                // the file in the cache.
                const int rc = kh_prewarm(hub.get(), "vector-add");
                return "prewarm " + std::to_string(rc) + "\n";
            });
        } catch (const std::exception& e) {
            fork_error = e.what();
        }
    }
    server.server().release("blob");  // also when no child was made
    call.join();
    REQUIRE(held);
    REQUIRE(fork_error.empty());
    INFO(child.out);
    CHECK(child.ok());
    CHECK(child.out == "prewarm 0\n");
    CHECK(call_rc == 0);
    // One download: the child found the parent's file.
    CHECK(server.server().count_requests("/lfs/") == 1);
}

TEST_CASE("children forked while another thread changes the handle's settings and function use the handle", "[capi]") {
    DemoEnv env;
    Hub hub = env.hub();
    // One thread changes the handle over and over, taking its mutex each
    // time; children forked meanwhile must not inherit it held.
    std::atomic<bool> stop{false};
    Messages unused;
    std::thread changer([&] {
        for (int i = 0; !stop; ++i) {
            kh_hub_on_message(hub.get(), (i % 2 == 0) ? keep_message : nullptr, &unused);
            kh_hub_set(hub.get(), "retries", (i % 2 == 0) ? "2" : "3");
        }
    });
    constexpr int k_children = 100;
    int good = 0;
    std::string first_bad;
    for (int i = 0; i < k_children; ++i) {
        const Forked child = run_forked([&] {
            ::alarm(10);  // a hang ends the child, and fails the test
            Messages seen;
            const int set_rc = kh_hub_set(hub.get(), "retries", "1");
            const int on_rc = kh_hub_on_message(hub.get(), keep_message, &seen);
            return "set " + std::to_string(set_rc) + " on " + std::to_string(on_rc);
        });
        if (child.ok() && child.out == "set 0 on 0") {
            ++good;
        } else if (first_bad.empty()) {
            first_bad = "child " + std::to_string(i) + ": status " + std::to_string(child.status) + " " + child.out;
        }
    }
    stop = true;
    changer.join();
    INFO(first_bad);
    CHECK(good == k_children);
}

namespace {

// A kh_message_fn that calls fork() at the first retry message, as a
// program's function may, and returns from it in the child too, with the
// child's stderr sent to a pipe. `user` is a ForkInside.
struct ForkInside {
    std::atomic<pid_t> child{0};
    int err_pipe[2] = {-1, -1};
};
extern "C" void fork_at_retry(int kind, const char* /*line*/, void* user) {
    auto& inside = *static_cast<ForkInside*>(user);
    if (kind != KH_MESSAGE_RETRY || inside.child != 0) return;
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::alarm(20);  // a hang ends the child, and fails the test
        ::dup2(inside.err_pipe[1], STDERR_FILENO);
    } else {
        inside.child = pid;
    }
}

}  // namespace

TEST_CASE("a child forked inside a kh_message_fn that returns into the call ends there, the parent's file whole",
          "[capi]") {
    DemoEnv env;
    KernelHub server;
    // The first download answers 503 (a retry message, at which the
    // function forks); the parent's retry waits at a gate.
    server.server().add_faults(
        {{{"match", "/lfs/"}, {"action", "status"}, {"status", 503}, {"retry_after", "0"}, {"count", 1}},
         {{"match", "/lfs/"}, {"action", "hold"}, {"gate", "parent"}, {"count", -1}}});
    Hub hub = env.test_hub(server);
    ForkInside inside;
    REQUIRE(::pipe(inside.err_pipe) == 0);
    REQUIRE(kh_hub_on_message(hub.get(), fork_at_retry, &inside) == 0);
    int call_rc = -1;
    std::thread call([&] { call_rc = kh_prewarm(hub.get(), "vector-add"); });
    const bool held = server.server().wait_held("parent");
    server.server().release("parent");
    call.join();
    ::close(inside.err_pipe[1]);
    const pid_t child = inside.child;
    REQUIRE(child > 0);
    int status = -1;
    REQUIRE(::waitpid(child, &status, 0) == child);
    std::string err;
    char buffer[4096];
    for (ssize_t n; (n = ::read(inside.err_pipe[0], buffer, sizeof buffer)) != 0;) {
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) break;
        err.append(buffer, static_cast<std::size_t>(n));
    }
    ::close(inside.err_pipe[0]);
    INFO(err);
    CHECK(held);
    CHECK(call_rc == 0);
    // The child went no further than the function's return.
    CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 1));
    CHECK_THAT(err, Catch::Contains("returned into its parent's call, which cannot go on across fork()"));
    // Only the parent's request reached the gate: the child sent none.
    CHECK(server.server().count_requests("/lfs/") == 2);
    // The cache holds exactly the bytes the hub has.
    kernhub::Options options;
    options.cache_dir = env.cache;
    options.offline = true;
    const kernhub::CacheVerifyReport verified = kernhub::Client(options).cache_verify(false);
    CHECK(verified.blobs_checked > 0);
    CHECK(verified.problems.empty());
}
