// cache::remove_beneath removes a file, a link or a folder below a base
// without following any link, on the way or inside.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "cache/cache.hpp"
#include "kernhub/error.hpp"
#include "support/temp_dir.hpp"

namespace fs = std::filesystem;
using kernhub::cache::remove_beneath;

namespace {

void write(const fs::path& path, const std::string& text) {
    fs::create_directories(path.parent_path());
    std::ofstream(path) << text;
}

}  // namespace

TEST_CASE("remove_beneath removes a folder whole, links inside but never their targets", "[store]") {
    kernhub::test::TempDir dir;
    const fs::path base = dir.path() / "repo";
    const fs::path outside = dir.path() / "outside";
    write(outside / "precious.txt", "keep me");
    write(base / "tmp" / "unpack" / "lib" / "a.so", "a");
    write(base / "tmp" / "unpack" / "b.txt", "b");
    fs::create_directory_symlink(outside, base / "tmp" / "unpack" / "lib" / "out");
    fs::create_symlink(outside / "precious.txt", base / "tmp" / "unpack" / "file-link");

    remove_beneath(base, "tmp/unpack");
    CHECK_FALSE(fs::exists(fs::symlink_status(base / "tmp" / "unpack")));
    CHECK(fs::is_directory(base / "tmp"));
    CHECK(fs::exists(outside / "precious.txt"));

    // A file, and something already gone.
    write(base / "blobs" / "x", "x");
    remove_beneath(base, "blobs/x");
    CHECK_FALSE(fs::exists(base / "blobs" / "x"));
    CHECK_NOTHROW(remove_beneath(base, "blobs/x"));
    CHECK_NOTHROW(remove_beneath(base, "nothing/here/at-all"));
}

TEST_CASE("remove_beneath never passes through a link on the way", "[store]") {
    kernhub::test::TempDir dir;
    const fs::path base = dir.path() / "repo";
    const fs::path outside = dir.path() / "outside";
    write(outside / "tmp" / "old" / "precious.txt", "keep me");
    fs::create_directories(base);
    // .kernhub swapped for a link to a folder of the same shape.
    fs::create_directory_symlink(outside, base / ".kernhub");
    CHECK_THROWS_AS(remove_beneath(base, ".kernhub/tmp/old"), kernhub::Error);
    CHECK(fs::exists(outside / "tmp" / "old" / "precious.txt"));

    // The base itself as a link: not entered either.
    const fs::path linked_base = dir.path() / "linked-repo";
    fs::create_directory_symlink(outside, linked_base);
    CHECK_THROWS_AS(remove_beneath(linked_base, "tmp/old"), kernhub::Error);
    CHECK(fs::exists(outside / "tmp" / "old" / "precious.txt"));

    // A link as the entry itself is removed as a link.
    remove_beneath(base, ".kernhub");
    CHECK_FALSE(fs::exists(fs::symlink_status(base / ".kernhub")));
    CHECK(fs::exists(outside / "tmp" / "old" / "precious.txt"));
}
