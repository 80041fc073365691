// kh_last_error names an error's hint (the setting or operation its advice
// refers to) as the C API does: a kh_hub_set key or a C function, never a
// flag of the command-line tool or a C++ name it has its own word for.
#include <catch2/catch.hpp>

#include <memory>
#include <string>

#include "capi/capi_support.hpp"
#include "capi/hint.hpp"
#include "common/hint.hpp"
#include "kernhub/kernhub.h"
#include "support/build_paths.hpp"
#include "support/temp_dir.hpp"

using kernhub::test::Hub;
using kernhub::test::last_error;

namespace {

// A handle on the demo hub's registry (the installed default registry) with
// an empty cache of its own; no retries.
Hub empty_cache_hub(const kernhub::test::TempDir& dir) {
    Hub hub(kh_hub_new());
    REQUIRE(hub != nullptr);
    REQUIRE(kh_hub_set(hub.get(), "cache_dir", (dir.path() / "cache").c_str()) == 0);
    REQUIRE(kh_hub_set(hub.get(), "project", dir.path().c_str()) == 0);
    REQUIRE(kh_hub_set(hub.get(), "retries", "0") == 0);
    return hub;
}

}  // namespace

TEST_CASE("kh_last_error names a setting hint as its kh_hub_set key: an unreachable hub", "[capi]") {
    kernhub::test::TempDir dir;
    Hub hub = empty_cache_hub(dir);
    REQUIRE(kh_hub_set(hub.get(), "endpoint", "http://127.0.0.1:9") == 0);
    REQUIRE(kh_hub_set(hub.get(), "offline", "0") == 0);
    CHECK(kh_load(hub.get(), "vector-add") == 5);
    const std::string error = last_error(hub);
    INFO(error);
    CHECK_THAT(error, Catch::StartsWith("network error: cannot fetch http://127.0.0.1:9/"));
    CHECK_THAT(error, Catch::Contains("or work offline from the cache (kh_hub_set \"offline\")"));
    CHECK_THAT(error, !Catch::Contains("--offline") && !Catch::Contains("Options::"));
}

TEST_CASE("kh_last_error names an action hint as its C function: offline and not cached", "[capi]") {
    kernhub::test::TempDir dir;
    Hub hub = empty_cache_hub(dir);
    REQUIRE(kh_hub_set(hub.get(), "endpoint", (std::string("file://") + KERNHUB_DEMO_HUB).c_str()) == 0);
    REQUIRE(kh_hub_set(hub.get(), "offline", "1") == 0);
    CHECK(kh_load(hub.get(), "vector-add") == 6);
    const std::string error = last_error(hub);
    INFO(error);
    CHECK_THAT(error, Catch::StartsWith("offline: "));
    CHECK_THAT(error, Catch::Contains("; offline mode is on: fetch it once while online (kh_prewarm)"));
    CHECK_THAT(error, !Catch::Contains("kernhub fetch") && !Catch::Contains("Client::"));
}

TEST_CASE("every Options setting a hint names is a key kh_hub_set takes", "[capi]") {
    Hub hub(kh_hub_new());
    REQUIRE(hub != nullptr);
    std::size_t keys = 0;
    for (const kernhub::hint::Known& known : kernhub::hint::known()) {
        const std::string name = known.name;
        if (known.kind != kernhub::ErrorHint::Kind::setting || name.find('.') != std::string::npos) continue;
        // `kh_hub_set "target"`: the key between the quotes.
        const std::string named = kernhub::capi::hint_name(kernhub::ErrorHint{known.kind, name});
        INFO(name << " -> " << named);
        REQUIRE(named.rfind("kh_hub_set \"", 0) == 0);
        REQUIRE(named.back() == '"');
        const std::string key = named.substr(12, named.size() - 13);
        CHECK(kh_hub_set(hub.get(), key.c_str(), "") == 0);  // "" restores the default: any known key takes it
        ++keys;
    }
    CHECK(keys >= 6);
}
