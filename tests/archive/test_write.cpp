// The archive module's writer: sorted entries, fixed times, owners and
// modes, compression by name, identical bytes for identical entries.
#include <archive.h>
#include <archive_entry.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "archive/archive.hpp"
#include "kernhub/error.hpp"
#include "support/slurp.hpp"
#include "support/temp_dir.hpp"

namespace fs = std::filesystem;
using kernhub::Error;
using kernhub::ErrorCode;
using kernhub::archive::Compression;
using kernhub::archive::EntryType;
using kernhub::archive::WriteEntry;
using namespace kernhub::test;

namespace {

struct Header {
    std::string path;
    unsigned mode = 0;
    long long mtime = -1;
    long long uid = -1;
    long long gid = -1;
    std::string uname;
    std::string gname;
    std::string link;
};

// The headers as libarchive reads them back.
std::vector<Header> headers_of(const fs::path& file) {
    std::vector<Header> out;
    struct archive* reader = archive_read_new();
    archive_read_support_format_tar(reader);
    archive_read_support_filter_all(reader);
    REQUIRE(archive_read_open_filename(reader, file.c_str(), 10240) == ARCHIVE_OK);
    struct archive_entry* entry = nullptr;
    while (archive_read_next_header(reader, &entry) == ARCHIVE_OK) {
        Header h;
        h.path = archive_entry_pathname(entry);
        h.mode = archive_entry_mode(entry);
        h.mtime = archive_entry_mtime(entry);
        h.uid = archive_entry_uid(entry);
        h.gid = archive_entry_gid(entry);
        h.uname = archive_entry_uname(entry) ? archive_entry_uname(entry) : "";
        h.gname = archive_entry_gname(entry) ? archive_entry_gname(entry) : "";
        h.link = archive_entry_symlink(entry) ? archive_entry_symlink(entry) : "";
        out.push_back(h);
    }
    archive_read_free(reader);
    return out;
}

struct Sources {
    TempDir dir;
    fs::path blob = dir.path() / "blob";
    fs::path ref = dir.path() / "ref";

    Sources() {
        std::ofstream(blob, std::ios::binary) << std::string(70000, 'b');
        std::ofstream(ref, std::ios::binary) << "0123456789abcdef0123456789abcdef01234567";
    }

    // Deliberately unsorted, with a name too long for ustar (a pax header).
    std::vector<WriteEntry> entries() const {
        std::vector<WriteEntry> list;
        list.push_back({"repo/refs/main", EntryType::file, ref, "", false});
        list.push_back({"repo/blobs/" + std::string(64, 'a'), EntryType::file, blob, "", true});
        list.push_back({"repo", EntryType::directory, {}, "", false});
        list.push_back(
            {"repo/snapshots/" + std::string(40, 'c') + "/build/" + std::string(60, 'v') + "/" + std::string(120, 'l'),
             EntryType::symlink,
             {},
             "../../../../blobs/" + std::string(64, 'a'),
             false});
        return list;
    }
};

}  // namespace

TEST_CASE("the writer sorts entries and fixes times, owners and modes", "[archive]") {
    Sources src;
    const fs::path out = src.dir.path() / "out.tar";
    auto stats = kernhub::archive::write_archive(out, src.entries());
    CHECK(stats.entries == 4);
    CHECK(stats.bytes == 70000 + 40);
    CHECK(stats.compression == Compression::none);
    std::vector<Header> headers = headers_of(out);
    REQUIRE(headers.size() == 4);
    CHECK(headers[0].path == "repo/");  // ustar marks a directory with a trailing '/'
    CHECK(headers[1].path == "repo/blobs/" + std::string(64, 'a'));
    CHECK(headers[2].path == "repo/refs/main");
    CHECK(headers[3].path.size() > 200);  // stored through pax, read back whole
    CHECK(headers[0].mode == (AE_IFDIR | 0755));
    CHECK(headers[1].mode == (AE_IFREG | 0444));
    CHECK(headers[2].mode == (AE_IFREG | 0644));
    CHECK(headers[3].mode == (AE_IFLNK | 0777));
    CHECK(headers[3].link == "../../../../blobs/" + std::string(64, 'a'));
    for (const auto& h : headers) {
        INFO(h.path);
        CHECK(h.mtime == 0);
        CHECK(h.uid == 0);
        CHECK(h.gid == 0);
        CHECK(h.uname.empty());
        CHECK(h.gname.empty());
    }
    // Only the archive is left in its folder: the temp file was renamed.
    std::size_t files = 0;
    for (const auto& e : fs::directory_iterator(src.dir.path())) files += e.path().filename().string()[0] == '.';
    CHECK(files == 0);
}

TEST_CASE("the same entries give the same bytes, in every compression", "[archive]") {
    Sources src;
    for (const char* name : {"a.tar", "a.tar.gz", "a.tar.xz", "a.tar.zst"}) {
        INFO(name);
        const fs::path first = src.dir.path() / "first" / name;
        const fs::path second = src.dir.path() / "second" / name;
        fs::create_directories(first.parent_path());
        fs::create_directories(second.parent_path());
        kernhub::archive::write_archive(first, src.entries());
        // What a reproducible archive must not depend on: source times and modes.
        fs::last_write_time(src.blob, fs::file_time_type::clock::now() - std::chrono::hours(48));
        fs::permissions(src.ref, fs::perms::owner_read);
        // Another process (another pid) writes the second one.
        pid_t child = ::fork();
        REQUIRE(child >= 0);
        if (child == 0) {
            try {
                kernhub::archive::write_archive(second, src.entries());
            } catch (...) {
                ::_exit(1);
            }
            ::_exit(0);
        }
        int status = 0;
        REQUIRE(::waitpid(child, &status, 0) == child);
        REQUIRE((WIFEXITED(status) && WEXITSTATUS(status) == 0));
        fs::permissions(src.ref, fs::perms::owner_read | fs::perms::owner_write);
        CHECK(slurp(first) == slurp(second));
        CHECK(headers_of(first).size() == 4);
    }
    // The long name really went through a pax header, which the other pid wrote alike.
    CHECK(slurp(src.dir.path() / "first" / "a.tar").find(" path=repo/snapshots/") != std::string::npos);
    // A gzip header's MTIME field (bytes 4-7) is zero: no time of writing.
    const std::string gz = slurp(src.dir.path() / "first" / "a.tar.gz");
    REQUIRE(gz.size() > 10);
    CHECK(gz.substr(0, 2) == "\x1f\x8b");
    CHECK(gz.substr(4, 4) == std::string(4, '\0'));
    CHECK(slurp(src.dir.path() / "first" / "a.tar.zst").substr(0, 4) == "\x28\xb5\x2f\xfd");
    CHECK(slurp(src.dir.path() / "first" / "a.tar.xz").substr(0, 6) == std::string("\xfd"
                                                                                   "7zXZ",
                                                                                   5) +
                                                                           '\0');
}

TEST_CASE("compression follows the file name", "[archive]") {
    using kernhub::archive::compression_for;
    CHECK(compression_for("x/cache.tar.zst") == Compression::zstd);
    CHECK(compression_for("cache.tzst") == Compression::zstd);
    CHECK(compression_for("cache.tar.gz") == Compression::gzip);
    CHECK(compression_for("cache.tgz") == Compression::gzip);
    CHECK(compression_for("cache.tar.xz") == Compression::xz);
    CHECK(compression_for("cache.tar") == Compression::none);
    for (const char* bad : {"cache.zip", "cache.zst", "cache", ".tar"}) {
        INFO(bad);
        CHECK_THROWS_MATCHES(compression_for(bad), Error,
                             Catch::Predicate<Error>([](const Error& e) { return e.code() == ErrorCode::usage; }));
    }
}

TEST_CASE("a source that is not a regular file fails the write and leaves no file", "[archive]") {
    Sources src;
    fs::create_symlink(src.blob, src.dir.path() / "link");
    std::vector<WriteEntry> entries{{"repo/x", EntryType::file, src.dir.path() / "link", "", false}};
    const fs::path out = src.dir.path() / "out.tar.zst";
    CHECK_THROWS_MATCHES(kernhub::archive::write_archive(out, entries), Error,
                         Catch::Predicate<Error>([](const Error& e) { return e.code() == ErrorCode::internal; }));
    CHECK(!fs::exists(out));
    for (const auto& e : fs::directory_iterator(src.dir.path())) CHECK(e.path().filename().string()[0] != '.');

    entries = {{"../escape", EntryType::directory, {}, "", false}};
    CHECK_THROWS_AS(kernhub::archive::write_archive(out, entries), Error);
    CHECK(!fs::exists(out));
}
