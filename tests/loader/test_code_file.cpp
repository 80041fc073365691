// loader::file_containing: which file holds a given address, the question the
// default-registry lookup asks about kernhub's own code.
#include <catch2/catch.hpp>

#include <filesystem>

#include "loader/code_file.hpp"
#include "loader/loader.hpp"
#include "support/build_paths.hpp"
#include "support/temp_dir.hpp"

namespace fs = std::filesystem;

namespace {
const char k_anchor = 0;
}  // namespace

TEST_CASE("file_containing: an address in the executable names /proc/self/exe", "[loader]") {
    kernhub::loader::CodeFile code = kernhub::loader::file_containing(&k_anchor);
    CHECK(code.main_program);
    CHECK(code.path == fs::canonical("/proc/self/exe"));
}

TEST_CASE("file_containing: an address in a shared object names that file, symlinks resolved", "[loader]") {
    const fs::path good = fs::path(KERNHUB_FIXTURE_DIR) / "libkh_good.so";
    kernhub::test::TempDir dir;
    const fs::path link = dir.path() / "libkh_link.so";
    fs::create_symlink(good, link);
    auto library = kernhub::loader::Library::open(link);
    kernhub::loader::CodeFile code = kernhub::loader::file_containing(library.symbol("kh_fixture_id"));
    CHECK_FALSE(code.main_program);
    CHECK(code.path == fs::canonical(good));
}

TEST_CASE("file_containing: an address no object maps is unknown", "[loader]") {
    int on_stack = 0;
    kernhub::loader::CodeFile code = kernhub::loader::file_containing(&on_stack);
    CHECK(code.path.empty());
}
