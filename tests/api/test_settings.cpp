// Options + environment -> settings (endpoint, token, offline, retries,
// max wait), and the settings that must reach the HTTP transport.
#include <sys/stat.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <map>
#include <thread>

#include "api/settings.hpp"
#include "http/scripted_server.hpp"
#include "http/session_support.hpp"
#include "kernhub/kernhub.hpp"
#include "support/temp_dir.hpp"

using namespace kernhub;
using kernhub::test::error_from;

namespace {

cache::EnvLookup settings_env_of(std::map<std::string, std::string> values) {
    return [values](const std::string& name) -> std::optional<std::string> {
        auto it = values.find(name);
        if (it == values.end()) return std::nullopt;
        return it->second;
    };
}

Options with_cache() {
    Options o;
    o.cache_dir = "/tmp/kernhub-settings-test";
    return o;
}

// A hub that answers every request with `status` and Retry-After.
test::ScriptedServer::Handler always(int status, std::string retry_after) {
    return [status, retry_after](const test::ScriptedRequest&, std::size_t) {
        test::ScriptedReply reply;
        reply.status = status;
        reply.headers = {{"Retry-After", retry_after}};
        return reply;
    };
}

}  // namespace

TEST_CASE("endpoint precedence: option, KERNHUB_ENDPOINT, HF_ENDPOINT, default", "[api]") {
    Options o = with_cache();
    CHECK(api::resolve_settings(o, settings_env_of({})).endpoint == "https://huggingface.co");
    CHECK(api::resolve_settings(o, settings_env_of({{"HF_ENDPOINT", "http://hf.local/"}})).endpoint ==
          "http://hf.local");
    CHECK(api::resolve_settings(o, settings_env_of({{"HF_ENDPOINT", "http://hf"}, {"KERNHUB_ENDPOINT", "http://kh"}}))
              .endpoint == "http://kh");
    CHECK(
        api::resolve_settings(o, settings_env_of({{"KERNHUB_ENDPOINT", ""}, {"HF_ENDPOINT", "http://hf"}})).endpoint ==
        "http://hf");
    o.endpoint = "file:///srv/hub//";
    CHECK(api::resolve_settings(o, settings_env_of({{"KERNHUB_ENDPOINT", "http://kh"}})).endpoint == "file:///srv/hub");
}

TEST_CASE("token precedence: option, HF_TOKEN, the HF_HOME token file, trimmed", "[api]") {
    test::TempDir home;
    std::ofstream(home.path() / "token") << "  hf_from_file\n";
    Options o = with_cache();
    auto hf_home = home.path().string();
    CHECK(api::resolve_settings(o, settings_env_of({{"HF_HOME", hf_home}})).token == "hf_from_file");
    CHECK(api::resolve_settings(o, settings_env_of({{"HF_HOME", hf_home}, {"HF_TOKEN", "hf_env "}})).token == "hf_env");
    o.token = "hf_option";
    CHECK(api::resolve_settings(o, settings_env_of({{"HF_HOME", hf_home}, {"HF_TOKEN", "hf_env"}})).token ==
          "hf_option");
    o.token = "";
    CHECK(api::resolve_settings(o, settings_env_of({{"HF_TOKEN", "hf_env"}})).token.empty());
    Options none = with_cache();
    CHECK(api::resolve_settings(none, settings_env_of({{"HOME", "/nonexistent-home"}})).token.empty());
}

TEST_CASE("a malformed token is a problem named by its source, never shown", "[api]") {
    // CR LF would end the Authorization header and start one of the
    // token's choosing.
    const std::string injected = "hf_secret_c3f1\r\nX-Injected: 1";
    test::TempDir home;
    std::ofstream(home.path() / "token") << injected << "\n";
    Options o = with_cache();
    const auto refused = [](const Options& options, const cache::EnvLookup& env, const std::string& source) {
        const api::Settings settings = api::resolve_settings(options, env);
        CHECK(settings.token.empty());
        CHECK_THAT(settings.token_problem, Catch::Contains("the token from " + source));
        CHECK_THAT(settings.token_problem, !Catch::Contains("c3f1") && !Catch::Contains("Injected"));
    };
    refused(o, settings_env_of({{"HF_HOME", home.path().string()}}), (home.path() / "token").string());
    refused(o, settings_env_of({{"HF_TOKEN", injected}}), "HF_TOKEN");
    refused(o, settings_env_of({{"HF_TOKEN", "hf_two words"}}), "HF_TOKEN");
    o.token = "hf_tab\there";
    refused(o, settings_env_of({}), "Options::token");
    o.token = "hf_bell\a";
    refused(o, settings_env_of({}), "Options::token");
    // Surrounding white space (a file's final newline) is trimmed, not refused.
    o.token = " hf_fine\n";
    CHECK(api::resolve_settings(o, settings_env_of({})).token == "hf_fine");
    CHECK(api::resolve_settings(o, settings_env_of({})).token_problem.empty());
    CHECK(api::token_is_well_formed("hf_AZaz09-_.~"));
    CHECK_FALSE(api::token_is_well_formed("hf_\x7f"));
    CHECK_FALSE(api::token_is_well_formed("hf_\xc3\xa9"));

    // A token file over its limit is a problem too; a FIFO there is no token
    // (and opening it does not wait for a writer).
    Options from_file = with_cache();
    std::ofstream(home.path() / "token", std::ios::trunc) << std::string(5000, 'a');
    CHECK_THAT(api::resolve_settings(from_file, settings_env_of({{"HF_HOME", home.path().string()}})).token_problem,
               Catch::Contains("k_max_token_file_bytes"));
    std::filesystem::remove(home.path() / "token");
    REQUIRE(::mkfifo((home.path() / "token").c_str(), 0600) == 0);
    const api::Settings fifo = api::resolve_settings(from_file, settings_env_of({{"HF_HOME", home.path().string()}}));
    CHECK(fifo.token.empty());
    CHECK(fifo.token_problem.empty());
}

TEST_CASE("a malformed token stops only the first request that would send it", "[api]") {
    test::TempDir cache;
    test::ScriptedServer server(always(500, "0"));
    Options o;
    o.cache_dir = cache.path().string();
    o.no_default_registry = true;
    o.endpoint = server.url();
    o.token = "hf_x\r\nX-Injected: 1";
    // Nothing asked of the hub: an offline fetch on an empty cache is the
    // usual offline error, not the token's.
    Options offline = o;
    offline.offline = true;
    CHECK(error_from("offline fetch", [&] { Client(offline).fetch("org/name@main"); }).code() == ErrorCode::offline);
    // Online, the request is refused before anything is sent.
    Client client(o);
    const Error e = error_from("online fetch", [&] { client.fetch("org/name@main"); });
    CHECK(e.code() == ErrorCode::usage);
    CHECK_THAT(e.message(), Catch::Contains("the token from Options::token"));
    CHECK_THAT(e.message(), !Catch::Contains("Injected"));
    CHECK(server.requests().empty());
}

TEST_CASE("offline and verify-on-load flags from the environment", "[api]") {
    Options o = with_cache();
    CHECK_FALSE(api::resolve_settings(o, settings_env_of({})).offline);
    for (const char* value : {"1", "true", "YES", "on"}) {
        CHECK(api::resolve_settings(o, settings_env_of({{"KERNHUB_OFFLINE", value}})).offline);
        CHECK(api::resolve_settings(o, settings_env_of({{"HF_HUB_OFFLINE", value}})).offline);
    }
    for (const char* value : {"0", "false", "", "no"}) {
        CHECK_FALSE(api::resolve_settings(o, settings_env_of({{"KERNHUB_OFFLINE", value}})).offline);
    }
    o.offline = false;
    CHECK_FALSE(api::resolve_settings(o, settings_env_of({{"HF_HUB_OFFLINE", "1"}})).offline);
    CHECK(api::resolve_settings(o, settings_env_of({{"KERNHUB_VERIFY_ON_LOAD", "1"}})).verify_on_load);
}

TEST_CASE("retries: option, then KERNHUB_RETRIES, then 3", "[api]") {
    Options o = with_cache();
    CHECK(api::resolve_settings(o, settings_env_of({})).retries == 3);
    CHECK(api::resolve_settings(o, settings_env_of({{"KERNHUB_RETRIES", "0"}})).retries == 0);
    CHECK(api::resolve_settings(o, settings_env_of({{"KERNHUB_RETRIES", "10"}})).retries == 10);
    CHECK(api::resolve_settings(o, settings_env_of({{"KERNHUB_RETRIES", "07"}})).retries == 7);
    o.retries = 1;
    CHECK(api::resolve_settings(o, settings_env_of({{"KERNHUB_RETRIES", "5"}})).retries == 1);
    // The option wins, so a bad variable under it is never read.
    CHECK(api::resolve_settings(o, settings_env_of({{"KERNHUB_RETRIES", "junk"}})).retries == 1);
}

TEST_CASE("max wait: option, then KERNHUB_MAX_WAIT, then 60 seconds", "[api]") {
    Options o = with_cache();
    CHECK(api::resolve_settings(o, settings_env_of({})).max_wait_seconds == 60);
    CHECK(api::resolve_settings(o, settings_env_of({{"KERNHUB_MAX_WAIT", "0"}})).max_wait_seconds == 0);
    CHECK(api::resolve_settings(o, settings_env_of({{"KERNHUB_MAX_WAIT", "86400"}})).max_wait_seconds == 86400);
    o.max_wait_seconds = 5;
    CHECK(api::resolve_settings(o, settings_env_of({{"KERNHUB_MAX_WAIT", "600"}})).max_wait_seconds == 5);
}

TEST_CASE("ref TTL: option, then KERNHUB_REF_TTL, then 0 (ask the hub every time)", "[api]") {
    Options o = with_cache();
    CHECK(api::resolve_settings(o, settings_env_of({})).ref_ttl_seconds == 0);
    CHECK(api::resolve_settings(o, settings_env_of({{"KERNHUB_REF_TTL", "0"}})).ref_ttl_seconds == 0);
    CHECK(api::resolve_settings(o, settings_env_of({{"KERNHUB_REF_TTL", "300"}})).ref_ttl_seconds == 300);
    CHECK(api::resolve_settings(o, settings_env_of({{"KERNHUB_REF_TTL", "31536000"}})).ref_ttl_seconds == 31536000);
    for (const char* bad : {"31536001", "-1", "", "5m", " 5"}) {
        INFO(bad);
        const Error e = error_from("accepted", [&] {
            api::resolve_settings(with_cache(), settings_env_of({{"KERNHUB_REF_TTL", bad}}));
        });
        CHECK(e.code() == ErrorCode::usage);
        CHECK(e.message().find("KERNHUB_REF_TTL") != std::string::npos);
        CHECK(e.message().find("from 0 to 31536000") != std::string::npos);
    }
    o.ref_ttl_seconds = 7;
    CHECK(api::resolve_settings(o, settings_env_of({{"KERNHUB_REF_TTL", "junk"}})).ref_ttl_seconds == 7);
    o.ref_ttl_seconds = 31536001;
    CHECK_THROWS_WITH(api::resolve_settings(o, settings_env_of({})), Catch::Contains("Options::ref_ttl_seconds"));
}

TEST_CASE("max connections: option, then KERNHUB_MAX_CONNECTIONS, then 8", "[api]") {
    Options o = with_cache();
    CHECK(api::resolve_settings(o, settings_env_of({})).max_connections == 8);
    CHECK(api::resolve_settings(o, settings_env_of({{"KERNHUB_MAX_CONNECTIONS", "1"}})).max_connections == 1);
    CHECK(api::resolve_settings(o, settings_env_of({{"KERNHUB_MAX_CONNECTIONS", "64"}})).max_connections == 64);
    for (const char* bad : {"0", "65", "-1", "", "8x", " 8"}) {
        INFO(bad);
        const Error e = error_from("accepted", [&] {
            api::resolve_settings(with_cache(), settings_env_of({{"KERNHUB_MAX_CONNECTIONS", bad}}));
        });
        CHECK(e.code() == ErrorCode::usage);
        CHECK(e.message().find("KERNHUB_MAX_CONNECTIONS") != std::string::npos);
        CHECK(e.message().find("from 1 to 64") != std::string::npos);
    }
    o.max_connections = 3;
    CHECK(api::resolve_settings(o, settings_env_of({{"KERNHUB_MAX_CONNECTIONS", "junk"}})).max_connections == 3);
    // Kernels side by side: never more than the connections, at most four.
    CHECK(api::parallel_kernels(api::resolve_settings(o, settings_env_of({}))) == 3);
    o.max_connections = 16;
    CHECK(api::parallel_kernels(api::resolve_settings(o, settings_env_of({}))) == 4);
    o.max_connections = 0;
    CHECK_THROWS_WITH(api::resolve_settings(o, settings_env_of({})), Catch::Contains("Options::max_connections"));
}

TEST_CASE("numeric variables that are not a plain number in range are usage errors", "[api]") {
    struct Case {
        const char* variable;
        const char* range;
    };
    for (Case c : {Case{"KERNHUB_RETRIES", "from 0 to 10"}, Case{"KERNHUB_MAX_WAIT", "from 0 to 86400"}}) {
        for (const char* value : {"3abc", " 3", "3 ", "-1", "+3", "99999999999", "", "1e3", "0x10", "86401", "3.0"}) {
            if (std::string(c.variable) == "KERNHUB_RETRIES" && std::string(value) == "86401") continue;
            INFO(c.variable << "='" << value << "'");
            const Error e = error_from("accepted", [&] {
                api::resolve_settings(with_cache(), settings_env_of({{c.variable, value}}));
            });
            CHECK(e.code() == ErrorCode::usage);
            CHECK(e.message().find(c.variable) != std::string::npos);
            CHECK(e.message().find(c.range) != std::string::npos);
            CHECK(e.message().find(std::string("'") + value + "'") != std::string::npos);
        }
    }
    // 11 is out of range for retries: an error, not clamped to 10.
    CHECK_THROWS_AS(api::resolve_settings(with_cache(), settings_env_of({{"KERNHUB_RETRIES", "11"}})), Error);
}

TEST_CASE("out-of-range Options values are usage errors too", "[api]") {
    Options o = with_cache();
    o.retries = 11;
    CHECK_THROWS_WITH(api::resolve_settings(o, settings_env_of({})),
                      Catch::Contains("Options::retries") && Catch::Contains("from 0 to 10"));
    o.retries = -1;
    CHECK_THROWS_AS(api::resolve_settings(o, settings_env_of({})), Error);
    o.retries.reset();
    o.max_wait_seconds = 86401;
    CHECK_THROWS_WITH(api::resolve_settings(o, settings_env_of({})), Catch::Contains("Options::max_wait_seconds"));
    o.max_wait_seconds = -1;
    CHECK_THROWS_AS(api::resolve_settings(o, settings_env_of({})), Error);
}

TEST_CASE("Options::max_wait_seconds and Options::cancel reach the hub transport", "[api]") {
    test::TempDir cache;
    Options o;
    o.cache_dir = cache.path().string();
    o.no_default_registry = true;
    o.retries = 2;
    // One request to wait on: the trusted-publisher overview would go out
    // beside the revision request.
    o.trust_remote_code = "org/name";

    SECTION("a hub wait over max_wait_seconds fails at once") {
        test::ScriptedServer server(always(429, "5"));
        o.endpoint = server.url();
        o.max_wait_seconds = 1;
        Client client(o);
        const Error e = error_from("fetch waited for the hub", [&] { client.fetch("org/name@main"); });
        CHECK(e.code() == ErrorCode::network);
        CHECK(e.message().find("maximum of 1 s") != std::string::npos);
        CHECK(server.requests().size() == 1);
    }
    SECTION("the cancel flag ends a hub wait") {
        // Ignoring the flag would sleep 10 minutes, past ctest's timeout.
        test::ScriptedServer server(always(503, "600"));
        std::atomic<bool> cancel{false};
        o.endpoint = server.url();
        o.max_wait_seconds = 3600;
        o.api_timeout_seconds = 3600;  // else the API deadline refuses the wait at once
        o.cancel = &cancel;
        Client client(o);
        std::thread thread([&] {
            for (int i = 0; i < 6000 && server.requests().empty(); ++i) {
                std::this_thread::sleep_for(std::chrono::milliseconds(10));
            }
            cancel = true;
        });
        struct Join {
            std::thread& thread;
            ~Join() { thread.join(); }
        } join{thread};
        const Error e = error_from("fetch returned", [&] { client.fetch("org/name@main"); });
        CHECK(e.code() == ErrorCode::interrupted);
        CHECK(server.requests().size() == 1);
    }
}

TEST_CASE("hub-answer bounds: option, then variable, then default, and bad values are usage errors", "[api]") {
    Options o = with_cache();
    const api::Settings defaults = api::resolve_settings(o, settings_env_of({}));
    CHECK(defaults.max_listing_entries == 100000);
    CHECK(defaults.max_listing_bytes == 64 << 20);
    CHECK(defaults.api_timeout_seconds == 60);
    CHECK(defaults.min_rate == 1024);
    CHECK(defaults.min_rate_window_seconds == 30);

    const api::Settings from_env = api::resolve_settings(o, settings_env_of({{"KERNHUB_MAX_LISTING_ENTRIES", "5"},
                                                                             {"KERNHUB_MAX_LISTING_BYTES", "4096"},
                                                                             {"KERNHUB_API_TIMEOUT", "7"},
                                                                             {"KERNHUB_MIN_RATE", "0"},
                                                                             {"KERNHUB_MIN_RATE_WINDOW", "3"}}));
    CHECK(from_env.max_listing_entries == 5);
    CHECK(from_env.max_listing_bytes == 4096);
    CHECK(from_env.api_timeout_seconds == 7);
    CHECK(from_env.min_rate == 0);
    CHECK(from_env.min_rate_window_seconds == 3);

    o.max_listing_entries = 9;
    o.api_timeout_seconds = 11;
    const api::Settings from_options = api::resolve_settings(
        o, settings_env_of({{"KERNHUB_MAX_LISTING_ENTRIES", "junk"}, {"KERNHUB_API_TIMEOUT", "5"}}));
    CHECK(from_options.max_listing_entries == 9);
    CHECK(from_options.api_timeout_seconds == 11);

    struct Case {
        const char* variable;
        const char* value;
        const char* range;
    };
    for (Case c : {Case{"KERNHUB_MAX_LISTING_ENTRIES", "0", "from 1 to 100000000"},
                   Case{"KERNHUB_MAX_LISTING_BYTES", "1000", "from 1024 to 536870912"},
                   Case{"KERNHUB_API_TIMEOUT", "86401", "from 1 to 86400"},
                   Case{"KERNHUB_MIN_RATE", "1k", "from 0 to 100000000"},
                   Case{"KERNHUB_MIN_RATE_WINDOW", "0", "from 1 to 3600"}}) {
        INFO(c.variable << "='" << c.value << "'");
        const Error e = error_from("accepted", [&] {
            api::resolve_settings(with_cache(), settings_env_of({{c.variable, c.value}}));
        });
        CHECK(e.code() == ErrorCode::usage);
        CHECK(e.message().find(c.variable) != std::string::npos);
        CHECK(e.message().find(c.range) != std::string::npos);
    }
    Options bad = with_cache();
    bad.min_rate = -1;
    CHECK_THROWS_WITH(api::resolve_settings(bad, settings_env_of({})), Catch::Contains("Options::min_rate"));
    bad.min_rate.reset();
    bad.max_listing_bytes = 10;
    CHECK_THROWS_WITH(api::resolve_settings(bad, settings_env_of({})), Catch::Contains("Options::max_listing_bytes"));
}

TEST_CASE("archive caps: option, then KERNHUB_ARCHIVE_*, then the defaults, and junk is a usage error", "[api]") {
    Options o = with_cache();
    const api::Settings plain = api::resolve_settings(o, settings_env_of({}));
    CHECK(plain.archive_max_bytes == 0);  // the ratio rule
    CHECK(plain.archive_max_entries == 100'000);
    CHECK(plain.archive_max_path == 1024);
    const api::Settings set = api::resolve_settings(o, settings_env_of({{"KERNHUB_ARCHIVE_MAX_BYTES", "4294967296"},
                                                                        {"KERNHUB_ARCHIVE_MAX_ENTRIES", "50"},
                                                                        {"KERNHUB_ARCHIVE_MAX_PATH", "4096"}}));
    CHECK(set.archive_max_bytes == (4ull << 30));
    CHECK(set.archive_max_entries == 50);
    CHECK(set.archive_max_path == 4096);
    o.archive_max_bytes = 1;
    o.archive_max_entries = 7;
    CHECK(api::resolve_settings(o, settings_env_of({{"KERNHUB_ARCHIVE_MAX_BYTES", "9"}})).archive_max_bytes == 1);
    CHECK(api::resolve_settings(o, settings_env_of({{"KERNHUB_ARCHIVE_MAX_ENTRIES", "9"}})).archive_max_entries == 7);
    for (const char* value : {"0", "", "-1", "1k", " 5", "9999999999999999999"}) {
        INFO("KERNHUB_ARCHIVE_MAX_BYTES='" << value << "'");
        const Error e = error_from("accepted", [&] {
            api::resolve_settings(with_cache(), settings_env_of({{"KERNHUB_ARCHIVE_MAX_BYTES", value}}));
        });
        CHECK(e.code() == ErrorCode::usage);
        CHECK(e.message().find("KERNHUB_ARCHIVE_MAX_BYTES") != std::string::npos);
    }
    CHECK(error_from("accepted", [&] {
              api::resolve_settings(with_cache(), settings_env_of({{"KERNHUB_ARCHIVE_MAX_PATH", "4097"}}));
          }).code() == ErrorCode::usage);
}
