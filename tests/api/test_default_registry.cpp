// The default registry is looked up relative to the file holding kernhub's
// code; no build or install path is compiled in.
#include <unistd.h>

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "api/default_registry.hpp"
#include "support/build_paths.hpp"
#include "support/temp_dir.hpp"

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
    REQUIRE(candidates.size() == 1);
    CHECK(ends_with(candidates[0], "/kernhub/registry.json"));
    CHECK(candidates[0].generic_string().rfind("/opt/kh/", 0) == 0);
    CHECK(candidates[0].generic_string().find("/bin/") == std::string::npos);
    CHECK(candidates[0].generic_string().find("..") == std::string::npos);
}

TEST_CASE("default registry: a library in <prefix>/<libdir> looks in <prefix>/share first", "[api]") {
    auto candidates = default_registry_candidates({"/opt/kh/lib/libkernhub.so.0", false});
    REQUIRE(candidates.size() == 1);
    CHECK(ends_with(candidates[0], "/kernhub/registry.json"));
    CHECK(candidates[0].generic_string().rfind("/opt/", 0) == 0);
    CHECK(candidates[0].generic_string().find("..") == std::string::npos);
}

TEST_CASE("default registry: the copy next to the file only in a build tree others cannot write", "[api]") {
    kernhub::test::TempDir dir;
    const fs::path exe = dir.path() / "kernhub";
    const fs::path next_to = dir.path() / "share" / "kernhub" / "registry.json";
    fs::permissions(dir.path(), fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                    fs::perms::others_read | fs::perms::others_exec);
    // Not a build tree: a program dropped into a folder (think /tmp) does
    // not take a registry someone put beside it.
    CHECK(default_registry_candidates({exe, true}).size() == 1);
    std::ofstream(dir.path() / "CMakeCache.txt") << "# a build tree\n";
    auto candidates = default_registry_candidates({exe, true});
    REQUIRE(candidates.size() == 2);
    CHECK(candidates[1] == next_to);
    // A build tree others may write to is no better than /tmp.
    fs::permissions(dir.path(), fs::perms::others_write, fs::perm_options::add);
    CHECK(default_registry_candidates({exe, true}).size() == 1);
    fs::permissions(dir.path(), fs::perms::others_write, fs::perm_options::remove);
    // Group-writable is what umask 002 gives every build tree.
    fs::permissions(dir.path(), fs::perms::group_write, fs::perm_options::add);
    CHECK(default_registry_candidates({exe, false}).size() == 2);
}

TEST_CASE("default registry: a subproject's build folder (cmake_install.cmake, no cache) counts too", "[api]") {
    kernhub::test::TempDir dir;
    const fs::path library = dir.path() / "libkernhub.so";
    fs::permissions(dir.path(), fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                    fs::perms::others_read | fs::perms::others_exec);
    CHECK(default_registry_candidates({library, false}).size() == 1);
    // A link is no marker: it may point anywhere.
    fs::create_symlink("/etc/hostname", dir.path() / "cmake_install.cmake");
    CHECK(default_registry_candidates({library, false}).size() == 1);
    fs::remove(dir.path() / "cmake_install.cmake");
    std::ofstream(dir.path() / "cmake_install.cmake") << "# a subproject's build folder\n";
    auto candidates = default_registry_candidates({library, false});
    REQUIRE(candidates.size() == 2);
    CHECK(candidates[1] == dir.path() / "share" / "kernhub" / "registry.json");
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

TEST_CASE("default registry: a file in a share/ others may write, or own, is not taken", "[api]") {
    kernhub::test::TempDir dir;
    const fs::path share = dir.path() / "share";
    const fs::path file = share / "kernhub" / "registry.json";
    fs::create_directories(file.parent_path());
    std::ofstream(file) << "{\"format\": 1, \"kernels\": {}}\n";
    const fs::perms folder = fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                             fs::perms::others_read | fs::perms::others_exec;
    fs::permissions(share, folder);
    fs::permissions(file.parent_path(), folder);
    CHECK(kernhub::api::is_private_registry_file(file));
    // Anyone may add or rename entries in share/ (a /tmp/build whose ../share
    // is another user's, or a world-writable one).
    fs::permissions(share, fs::perms::others_write, fs::perm_options::add);
    CHECK_FALSE(kernhub::api::is_private_registry_file(file));
    fs::permissions(share, fs::perms::others_write, fs::perm_options::remove);
    fs::permissions(file.parent_path(), fs::perms::others_write, fs::perm_options::add);
    CHECK_FALSE(kernhub::api::is_private_registry_file(file));
    fs::permissions(file.parent_path(), fs::perms::others_write, fs::perm_options::remove);
    fs::permissions(file, fs::perms::others_write, fs::perm_options::add);
    CHECK_FALSE(kernhub::api::is_private_registry_file(file));
    fs::permissions(file, fs::perms::others_write, fs::perm_options::remove);
    CHECK(kernhub::api::is_private_registry_file(file));
    CHECK_FALSE(kernhub::api::is_private_registry_file(share / "kernhub" / "missing.json"));
    // Another user's: only root can make one here.
    if (::geteuid() == 0) {
        REQUIRE(::chown(share.c_str(), 65534, 65534) == 0);
        CHECK_FALSE(kernhub::api::is_private_registry_file(file));
        REQUIRE(::chown(share.c_str(), 0, 0) == 0);
        REQUIRE(::chown(file.c_str(), 65534, 65534) == 0);
        CHECK_FALSE(kernhub::api::is_private_registry_file(file));
        // A build tree whose marker another user owns is none.
        REQUIRE(::chown(file.c_str(), 0, 0) == 0);
        std::ofstream(dir.path() / "CMakeCache.txt") << "# a build tree\n";
        fs::permissions(dir.path(), folder);
        CHECK(default_registry_candidates({dir.path() / "kernhub", true}).size() == 2);
        REQUIRE(::chown((dir.path() / "CMakeCache.txt").c_str(), 65534, 65534) == 0);
        CHECK(default_registry_candidates({dir.path() / "kernhub", true}).size() == 1);
    }
}
