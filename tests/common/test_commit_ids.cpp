// Commit ids: a full SHA-1 (40 hex) or SHA-256 (64 hex) object id in
// lowercase, as the kernels library's Oid takes them; abbreviations name no
// commit. Version branches "vN".
#include <catch2/catch.hpp>
#include <string>

#include "common/repo.hpp"
#include "kernhub/error.hpp"
#include "registry/reference.hpp"
#include "registry/registry.hpp"

using kernhub::is_commit_sha;
using kernhub::revision_problem;

TEST_CASE("a commit id is 40 or 64 lowercase hex characters, nothing shorter, longer or uppercase", "[common]") {
    CHECK(is_commit_sha(std::string(40, 'a')));
    CHECK(is_commit_sha(std::string(64, '0')));
    CHECK(is_commit_sha("0123456789abcdef0123456789abcdef01234567"));
    CHECK(is_commit_sha("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"));
    for (std::size_t length : {0u, 7u, 12u, 39u, 41u, 63u, 65u, 80u, 128u}) {
        CAPTURE(length);
        CHECK_FALSE(is_commit_sha(std::string(length, 'a')));
    }
    for (const std::string& bad : {std::string(40, 'A'), std::string(64, 'F'), std::string(39, 'a') + "g",
                                   std::string(63, 'a') + "G", std::string(63, 'a') + " ", std::string(63, 'a') + "/"}) {
        CAPTURE(bad);
        CHECK_FALSE(is_commit_sha(bad));
    }
}

TEST_CASE("an uppercase commit id is refused as a revision at either length, other hex names are refs", "[common]") {
    CHECK(revision_problem(std::string(40, 'a')).empty());
    CHECK(revision_problem(std::string(64, 'a')).empty());
    CHECK(revision_problem(std::string(40, 'A')).find("uppercase") != std::string::npos);
    CHECK(revision_problem(std::string(64, 'A')).find("uppercase") != std::string::npos);
    CHECK(revision_problem(std::string(32, 'a') + std::string(32, 'B')).find("uppercase") != std::string::npos);
    // Not a commit's length: a branch or tag named so is the hub's to know.
    for (std::size_t length : {39u, 41u, 63u, 65u}) {
        CAPTURE(length);
        CHECK(revision_problem(std::string(length, 'A')).empty());
        CHECK(revision_problem(std::string(length, 'a')).empty());
    }
}

TEST_CASE("ORG/REPO@<64-hex> names that commit, an uppercase one is a usage error", "[common]") {
    const kernhub::registry::Registry none;
    const std::string sha256 = std::string(32, 'c') + std::string(32, '7');
    const kernhub::registry::KernelSpec spec = kernhub::registry::resolve_ref(none, "org/repo@" + sha256);
    CHECK(spec.repo_id == "org/repo");
    CHECK(spec.revision == sha256);
    CHECK(spec.effective_revision() == sha256);
    try {
        (void)kernhub::registry::resolve_ref(none, "org/repo@" + std::string(64, 'C'));
        FAIL("expected an Error");
    } catch (const kernhub::Error& e) {
        CHECK(e.code() == kernhub::ErrorCode::usage);
        CHECK_THAT(e.message(), Catch::Contains("uppercase"));
    }
}

TEST_CASE("a version branch is v and decimal digits that fit, anything else is no version", "[common]") {
    CHECK(kernhub::version_number("v1") == 1u);
    CHECK(kernhub::version_number("v10") == 10u);
    CHECK(kernhub::version_number("v007") == 7u);
    CHECK(kernhub::version_number("v999999999999999999") == 999999999999999999u);
    for (const char* name : {"", "v", "1", "V1", "v1.0", "v-1", "v+1", "v 1", "v1 ", "main", "v1a", "vv1",
                             "v1000000000000000000"}) {
        CAPTURE(name);
        CHECK_FALSE(kernhub::version_number(name).has_value());
    }
}

TEST_CASE("version_key orders version branches of any length by their number", "[common]") {
    CHECK(kernhub::version_key("v007") == std::string("7"));
    CHECK(kernhub::version_key("v0") == std::string("0"));
    CHECK(kernhub::version_key("v000") == std::string("0"));
    CHECK(kernhub::version_key("v" + std::string(254, '9')) == std::string(254, '9'));
    for (const std::string& name : {std::string("v"), std::string("V1"), std::string("v1.0"), std::string("v+1"),
                                    std::string("v1_0"), std::string("main"), "v" + std::string(255, '1')}) {
        INFO(name);
        CHECK_FALSE(kernhub::version_key(name).has_value());
    }
    const auto less = [](const char* a, const char* b) {
        return kernhub::version_key_less(*kernhub::version_key(a), *kernhub::version_key(b));
    };
    CHECK(less("v2", "v10"));
    CHECK(less("v9", "v010"));
    CHECK(less("v999999999999999999", "v99999999999999999999"));
    CHECK_FALSE(less("v10", "v2"));
    CHECK_FALSE(less("v7", "v007"));
    CHECK_FALSE(less("v007", "v7"));
}
