// read_zip_member reads a member of a zip as Python's zipimport would find
// it: by its exact name in the central directory. A zip whose local
// headers name its entries otherwise is refused, since kernhub would check
// one _ops.py and Python import another.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include "archive/archive.hpp"
#include "kernhub/error.hpp"
#include "support/temp_dir.hpp"
#include "support/zip_craft.hpp"

using kernhub::Error;
using kernhub::ErrorCode;
using kernhub::test::make_zip;
using kernhub::test::TempDir;
namespace fs = std::filesystem;

namespace {

// Renames, in the local header (which == "local") or the central directory
// entry ("cd"), the nth (0-based) occurrence of `from`.
std::string rename_in(std::string zip, const std::string& which, const std::string& from, const std::string& to,
                      int nth = 0) {
    const std::string signature = which == "local" ? std::string("PK\x03\x04") : std::string("PK\x01\x02");
    const std::size_t back = which == "local" ? 30 : 46;
    std::size_t at = 0;
    for (int seen = -1;; ++at) {
        at = zip.find(from, at);
        REQUIRE(at != std::string::npos);
        if (at >= back && zip.compare(at - back, 4, signature) == 0 && ++seen == nth) break;
    }
    REQUIRE(from.size() == to.size());
    zip.replace(at, from.size(), to);
    return zip;
}

fs::path write(const TempDir& dir, const std::string& name, const std::string& bytes) {
    const fs::path path = dir.path() / name;
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
}

std::string refusal(const fs::path& zip) {
    try {
        kernhub::archive::read_zip_member(zip, "_ops.py", 1 << 20, nullptr);
    } catch (const Error& e) {
        CHECK(e.code() == ErrorCode::verification);
        return e.plain_message();
    }
    FAIL("no refusal");
    return {};
}

}  // namespace

TEST_CASE("a zip member is read by the name zipimport finds, and disagreeing names are refused", "[archive]") {
    TempDir dir;
    const std::string good = "ops = torch.ops._good\n";
    const std::string evil = "ops = torch.ops._evil\n";
    const std::string honest = make_zip({{"__init__.py", ""}, {"_ops.py", good}});
    CHECK(kernhub::archive::read_zip_member(write(dir, "honest.zip", honest), "_ops.py", 1 << 20, nullptr) == good);
    // Bytes before the zip (a self-extracting stub) move nothing zipimport sees.
    CHECK(kernhub::archive::read_zip_member(write(dir, "prefixed.zip", std::string(4096, 'x') + honest), "_ops.py",
                                            1 << 20, nullptr) == good);

    // The directory says _ops.py, the local header _opz.py: Python imports it, so kernhub must not miss it.
    CHECK_THAT(refusal(write(dir, "hidden.zip", rename_in(honest, "local", "_ops.py", "_opz.py"))),
               Catch::Contains("central directory and its local headers"));
    // The other way round: a file kernhub would read and Python would never import.
    CHECK_THAT(refusal(write(dir, "phantom.zip", rename_in(honest, "cd", "_ops.py", "_opz.py"))),
               Catch::Contains("central directory and its local headers"));
    // Twice in the directory, once under a local header: the twice rule still holds.
    const std::string twice = make_zip({{"_ops.py", good}, {"_ops.py", evil}});
    CHECK_THAT(refusal(write(dir, "twice.zip", twice)), Catch::Contains("twice"));
    CHECK_THAT(refusal(write(dir, "bypass.zip", rename_in(twice, "local", "_ops.py", "_opz.py"))),
               Catch::Contains("twice"));
    // "./_ops.py" is no _ops.py to zipimport.
    CHECK_FALSE(kernhub::archive::read_zip_member(write(dir, "dotted.zip", make_zip({{"./_ops.py", evil}})), "_ops.py",
                                                  1 << 20, nullptr)
                    .has_value());
    // A damaged end: no directory to read.
    CHECK_THAT(refusal(write(dir, "cut.zip", honest.substr(0, honest.size() - 10))), Catch::Contains("zip"));
}
