// Options + environment -> settings (endpoint, token, offline, retries).
#include <catch2/catch.hpp>
#include <fstream>
#include <map>

#include "api/settings.hpp"
#include "support/temp_dir.hpp"

using namespace kernhub;

namespace {

store::EnvLookup env_of(std::map<std::string, std::string> values) {
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

}  // namespace

TEST_CASE("endpoint precedence: option, KERNHUB_ENDPOINT, HF_ENDPOINT, default", "[api]") {
    Options o = with_cache();
    CHECK(api::resolve_settings(o, env_of({})).endpoint == "https://huggingface.co");
    CHECK(api::resolve_settings(o, env_of({{"HF_ENDPOINT", "http://hf.local/"}})).endpoint == "http://hf.local");
    CHECK(
        api::resolve_settings(o, env_of({{"HF_ENDPOINT", "http://hf"}, {"KERNHUB_ENDPOINT", "http://kh"}})).endpoint ==
        "http://kh");
    CHECK(api::resolve_settings(o, env_of({{"KERNHUB_ENDPOINT", ""}, {"HF_ENDPOINT", "http://hf"}})).endpoint ==
          "http://hf");
    o.endpoint = "file:///srv/hub//";
    CHECK(api::resolve_settings(o, env_of({{"KERNHUB_ENDPOINT", "http://kh"}})).endpoint == "file:///srv/hub");
}

TEST_CASE("token precedence: option, HF_TOKEN, the HF_HOME token file, trimmed", "[api]") {
    test::TempDir home;
    std::ofstream(home.path() / "token") << "  hf_from_file\n";
    Options o = with_cache();
    auto hf_home = home.path().string();
    CHECK(api::resolve_settings(o, env_of({{"HF_HOME", hf_home}})).token == "hf_from_file");
    CHECK(api::resolve_settings(o, env_of({{"HF_HOME", hf_home}, {"HF_TOKEN", "hf_env "}})).token == "hf_env");
    o.token = "hf_option";
    CHECK(api::resolve_settings(o, env_of({{"HF_HOME", hf_home}, {"HF_TOKEN", "hf_env"}})).token == "hf_option");
    o.token = "";
    CHECK(api::resolve_settings(o, env_of({{"HF_TOKEN", "hf_env"}})).token.empty());
    Options none = with_cache();
    CHECK(api::resolve_settings(none, env_of({{"HOME", "/nonexistent-home"}})).token.empty());
}

TEST_CASE("offline and verify-on-load flags from the environment", "[api]") {
    Options o = with_cache();
    CHECK_FALSE(api::resolve_settings(o, env_of({})).offline);
    for (const char* value : {"1", "true", "YES", "on"}) {
        CHECK(api::resolve_settings(o, env_of({{"KERNHUB_OFFLINE", value}})).offline);
        CHECK(api::resolve_settings(o, env_of({{"HF_HUB_OFFLINE", value}})).offline);
    }
    for (const char* value : {"0", "false", "", "no"}) {
        CHECK_FALSE(api::resolve_settings(o, env_of({{"KERNHUB_OFFLINE", value}})).offline);
    }
    o.offline = false;
    CHECK_FALSE(api::resolve_settings(o, env_of({{"HF_HUB_OFFLINE", "1"}})).offline);
    CHECK(api::resolve_settings(o, env_of({{"KERNHUB_VERIFY_ON_LOAD", "1"}})).verify_on_load);
}

TEST_CASE("retries: option, KERNHUB_RETRIES, clamped, junk is a usage error", "[api]") {
    Options o = with_cache();
    CHECK(api::resolve_settings(o, env_of({})).retries == 3);
    CHECK(api::resolve_settings(o, env_of({{"KERNHUB_RETRIES", "0"}})).retries == 0);
    CHECK(api::resolve_settings(o, env_of({{"KERNHUB_RETRIES", "99"}})).retries == 10);
    try {
        api::resolve_settings(o, env_of({{"KERNHUB_RETRIES", "many"}}));
        FAIL("expected a usage error");
    } catch (const Error& e) {
        CHECK(e.code() == ErrorCode::usage);
        CHECK(std::string(e.what()).find("KERNHUB_RETRIES") != std::string::npos);
    }
    o.retries = 1;
    CHECK(api::resolve_settings(o, env_of({{"KERNHUB_RETRIES", "5"}})).retries == 1);
}
