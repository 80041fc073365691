// cache::read_file_into, the whole-file read the api, registry and file://
// hub share: what it reports, so each caller can word its own error.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cache/cache.hpp"
#include "support/temp_dir.hpp"

namespace fs = std::filesystem;
using kernhub::cache::read_file_into;
using kernhub::cache::ReadStatus;
using kernhub::test::TempDir;

namespace {

fs::path write_text(const fs::path& path, const std::string& content) {
    std::ofstream out(path, std::ios::binary);
    out << content;
    return path;
}

}  // namespace

TEST_CASE("read_file_into reads a whole file as text or bytes", "[store]") {
    TempDir dir;
    // Larger than one read(2) chunk, with a NUL inside.
    std::string content(200 * 1024, 'k');
    content[7] = '\0';
    const fs::path file = write_text(dir.path() / "blob", content);

    std::string text = "stale";
    ReadStatus status = read_file_into(file, text);
    CHECK(status.error == 0);
    CHECK(status.opened);
    CHECK(text == content);

    std::vector<std::uint8_t> bytes;
    status = read_file_into(file, bytes);
    CHECK(status.error == 0);
    CHECK(bytes == std::vector<std::uint8_t>(content.begin(), content.end()));
}

TEST_CASE("read_file_into tells a refused open from a failed read", "[store]") {
    TempDir dir;
    std::string text;
    ReadStatus missing = read_file_into(dir.path() / "missing", text);
    CHECK(missing.error == ENOENT);
    CHECK_FALSE(missing.opened);

    const fs::path file = write_text(dir.path() / "file", "x");
    ReadStatus under_file = read_file_into(file / "child", text);
    CHECK(under_file.error == ENOTDIR);
    CHECK_FALSE(under_file.opened);

    ReadStatus directory = read_file_into(dir.path(), text);
    CHECK(directory.error == EISDIR);
    CHECK(directory.opened);
}

TEST_CASE("read_file_into stops at the size cap", "[store]") {
    TempDir dir;
    const fs::path file = write_text(dir.path() / "ten", "0123456789");
    std::string text;
    CHECK(read_file_into(file, text, 10).error == 0);
    CHECK(text == "0123456789");
    CHECK(read_file_into(file, text, 9).error == EFBIG);
}

TEST_CASE("read_file_into reads only regular files and never waits on a FIFO", "[store]") {
    TempDir dir;
    std::string text;
    // A device that never ends is not read at all.
    REQUIRE(fs::exists("/dev/zero"));
    ReadStatus zero = read_file_into("/dev/zero", text, 1 << 20);
    CHECK(zero.error == EINVAL);
    CHECK(zero.not_regular);
    CHECK(text.empty());
    // Opening a FIFO without a writer would block without O_NONBLOCK.
    const fs::path fifo = dir.path() / "fifo";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    ReadStatus pipe = read_file_into(fifo, text, 1 << 20);
    CHECK(pipe.opened);
    CHECK(pipe.not_regular);
    ReadStatus folder = read_file_into(dir.path(), text, 1 << 20);
    CHECK(folder.error == EISDIR);
    CHECK_FALSE(folder.not_regular);
}
