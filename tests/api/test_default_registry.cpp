// The default registry is looked up relative to the file holding kernhub's
// code; no build or install path is compiled in.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include "api/default_registry.hpp"

namespace fs = std::filesystem;
using kernhub::api::default_registry_candidates;

namespace {
bool ends_with(const fs::path& path, const std::string& tail) {
    const std::string text = path.generic_string();
    return text.size() >= tail.size() && text.compare(text.size() - tail.size(), tail.size(), tail) == 0;
}
}  // namespace

TEST_CASE("default registry: an executable in <prefix>/bin looks in <prefix>/share first", "[api]") {
    auto candidates = default_registry_candidates({"/opt/kh/bin/kernhub", true});
    REQUIRE(candidates.size() == 2);
    CHECK(ends_with(candidates[0], "/kernhub/registry.json"));
    CHECK(candidates[0].generic_string().rfind("/opt/kh/", 0) == 0);
    CHECK(candidates[0].generic_string().find("/bin/") == std::string::npos);
    CHECK(candidates[0].generic_string().find("..") == std::string::npos);
    // The build tree's copy sits next to the binary.
    CHECK(candidates[1] == fs::path("/opt/kh/bin/share/kernhub/registry.json"));
}

TEST_CASE("default registry: a library in <prefix>/<libdir> looks in <prefix>/share first", "[api]") {
    auto candidates = default_registry_candidates({"/opt/kh/lib/libkernhub.so.0", false});
    REQUIRE(candidates.size() == 2);
    CHECK(ends_with(candidates[0], "/kernhub/registry.json"));
    CHECK(candidates[0].generic_string().rfind("/opt/", 0) == 0);
    CHECK(candidates[0].generic_string().find("..") == std::string::npos);
    CHECK(candidates[1] == fs::path("/opt/kh/lib/share/kernhub/registry.json"));
}

TEST_CASE("default registry: no candidates when the code file is unknown", "[api]") {
    CHECK(default_registry_candidates({}).empty());
}

TEST_CASE("default registry: a test binary one folder below the build root finds the build's copy", "[api]") {
    // tests/<exe> -> ../share/kernhub/registry.json is the build root's copy.
    fs::path found = kernhub::api::find_default_registry();
    REQUIRE_FALSE(found.empty());
    CHECK(fs::equivalent(found, fs::path(KERNHUB_BINARY_DIR) / "share" / "kernhub" / "registry.json"));
}
