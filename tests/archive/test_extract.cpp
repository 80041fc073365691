// The archive module's reader under an ExtractionPolicy: what it extracts,
// and every refusal, each on a real crafted archive, each leaving nothing
// behind (docs/cache-format.md, "Cache archives").
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "archive/archive.hpp"
#include "archive/tar_builder.hpp"
#include "kernhub/error.hpp"
#include "support/slurp.hpp"
#include "support/temp_dir.hpp"

namespace fs = std::filesystem;
using kernhub::Error;
using kernhub::ErrorCode;
using kernhub::archive::EntryType;
using kernhub::archive::ExtractionPolicy;
using namespace kernhub::test;

namespace {

bool is_empty_dir(const fs::path& dir) {
    return fs::is_directory(dir) && fs::directory_iterator(dir) == fs::directory_iterator();
}

// Extracting `file` under `policy` is refused with Error(verification)
// whose message names every string in `names`, and `out` stays empty.
void check_refused(const fs::path& file, const fs::path& out, const ExtractionPolicy& policy,
                   const std::vector<std::string>& names) {
    std::string message;
    ErrorCode code = ErrorCode::ok;
    try {
        kernhub::archive::extract(file, out, policy);
    } catch (const Error& e) {
        code = e.code();
        message = e.what();
    }
    INFO(message);
    CHECK(code == ErrorCode::verification);
    for (const auto& name : names) {
        INFO("expected in the message: " << name);
        CHECK(message.find(name) != std::string::npos);
    }
    CHECK(is_empty_dir(out));
}

struct ExtractScratch {
    TempDir dir;
    fs::path out = dir.path() / "out";
    fs::path tar = dir.path() / "in.tar";
    ExtractScratch() { fs::create_directories(out); }
};

ExtractionPolicy with_symlinks() {
    ExtractionPolicy policy;
    policy.allow_symlinks = true;
    return policy;
}

}  // namespace

TEST_CASE("extract writes files, folders and inner links into a fresh private folder", "[archive]") {
    ExtractScratch s;
    TarBuilder(s.tar)
        .dir("./")
        .dir("./pkg/")
        .file("./pkg/lib/a.so", "ELF-ish")
        .symlink("pkg/lib/b.so", "a.so")
        .finish();
    auto tree = kernhub::archive::extract(s.tar, s.out, with_symlinks());
    const fs::path root = tree.root();
    CHECK(root.parent_path() == s.out);
    CHECK(slurp(root / "pkg/lib/a.so") == "ELF-ish");
    CHECK(fs::read_symlink(root / "pkg/lib/b.so") == "a.so");
    CHECK((fs::status(root / "pkg/lib/a.so").permissions() & fs::perms::all) ==
          (fs::perms::owner_read | fs::perms::owner_write));
    CHECK((fs::status(root).permissions() & fs::perms::all) == fs::perms::owner_all);
    REQUIRE(tree.entries().size() == 3);  // "./" is the archive's top, not an entry
    CHECK(tree.entries()[0].path == "pkg");
    CHECK(tree.entries()[1].path == "pkg/lib/a.so");
    CHECK(tree.entries()[2].type == EntryType::symlink);
    CHECK(tree.bytes() == 7);
    { auto moved = std::move(tree); }
    CHECK(is_empty_dir(s.out));  // the tree removes its folder
}

TEST_CASE("compression is recognised by content, whatever the name says", "[archive]") {
    ExtractScratch s;
    for (auto filter : {TarBuilder::Filter::gzip, TarBuilder::Filter::xz, TarBuilder::Filter::zstd}) {
        const fs::path misnamed = s.dir.path() / "archive.bin";
        TarBuilder(misnamed, filter).file("x/data", "payload").finish();
        auto tree = kernhub::archive::extract(misnamed, s.out, ExtractionPolicy{});
        CHECK(slurp(tree.root() / "x/data") == "payload");
    }
}

TEST_CASE("paths that climb out or are absolute are refused", "[archive]") {
    ExtractScratch s;
    TarBuilder(s.tar).file("ok", "1").file("/etc/kernhub-test", "x").finish();
    check_refused(s.tar, s.out, {}, {"/etc/kernhub-test", "absolute"});

    TarBuilder(s.tar).file("a/../../evil", "x").finish();
    check_refused(s.tar, s.out, {}, {"a/../../evil", "'..'"});

    TarBuilder(s.tar).file("a//b", "x").finish();
    check_refused(s.tar, s.out, {}, {"a//b", "empty path part"});
}

TEST_CASE("symlinks: refused unless allowed, and never absolute or leading out", "[archive]") {
    ExtractScratch s;
    TarBuilder(s.tar).symlink("pkg/link", "target").finish();
    check_refused(s.tar, s.out, ExtractionPolicy{}, {"pkg/link", "symbolic link"});

    TarBuilder(s.tar).symlink("pkg/passwd", "/etc/passwd").finish();
    check_refused(s.tar, s.out, with_symlinks(), {"pkg/passwd", "/etc/passwd", "leads out of the archive"});

    TarBuilder(s.tar).symlink("pkg/up", "../../outside").finish();
    check_refused(s.tar, s.out, with_symlinks(), {"pkg/up", "leads out of the archive"});

    ExtractionPolicy picky = with_symlinks();
    picky.symlink_rule = [](const kernhub::archive::Entry& e) {
        return e.link_target == "allowed" ? "" : "is not a link this policy allows";
    };
    TarBuilder(s.tar).symlink("a", "allowed").symlink("b", "other").finish();
    check_refused(s.tar, s.out, picky, {"'b'", "not a link this policy allows"});
}

TEST_CASE("nothing is ever written through a symlink the archive made", "[archive]") {
    ExtractScratch s;
    TarBuilder(s.tar).symlink("a", "sub").dir("sub").file("a/file", "through the link").finish();
    check_refused(s.tar, s.out, with_symlinks(), {"a/file", "would be written through 'a'"});

    TarBuilder(s.tar).file("same", "one").file("same", "two").finish();
    check_refused(s.tar, s.out, {}, {"same", "more than once"});

    TarBuilder(s.tar).file("f", "x").dir("f").finish();
    check_refused(s.tar, s.out, {}, {"'f'", "earlier entry"});
}

TEST_CASE("hard links, devices and FIFOs are never extracted", "[archive]") {
    ExtractScratch s;
    ExtractionPolicy everything = with_symlinks();
    TarBuilder(s.tar).file("a", "x").hardlink("b", "a").finish();
    check_refused(s.tar, s.out, everything, {"'b'", "hard link"});

    TarBuilder(s.tar).special("dev/null", AE_IFCHR).finish();
    check_refused(s.tar, s.out, everything, {"dev/null", "character device"});

    TarBuilder(s.tar).special("dev/sda", AE_IFBLK).finish();
    check_refused(s.tar, s.out, everything, {"dev/sda", "block device"});

    TarBuilder(s.tar).special("pipe", AE_IFIFO).finish();
    check_refused(s.tar, s.out, everything, {"pipe", "FIFO"});

    ExtractionPolicy no_dirs;
    no_dirs.allow_directories = false;
    TarBuilder(s.tar).dir("d").finish();
    check_refused(s.tar, s.out, no_dirs, {"'d'", "directory"});
}

TEST_CASE("the count, size and path limits are named when hit", "[archive]") {
    ExtractScratch s;
    ExtractionPolicy small;
    small.max_entries = 3;
    TarBuilder(s.tar).file("1", "").file("2", "").file("3", "").file("4", "").finish();
    check_refused(s.tar, s.out, small, {"max_entries", "3"});

    small = {};
    small.max_entry_bytes = 1000;
    TarBuilder(s.tar).zeros("big", 1001).finish();
    check_refused(s.tar, s.out, small, {"big", "max_entry_bytes", "1000"});

    // A header that declares more than the limit is refused before any data is read.
    TarBuilder(s.tar).header_only("huge", 20ull << 30).finish();
    check_refused(s.tar, s.out, ExtractionPolicy{}, {"huge", "max_entry_bytes", "8 GiB"});

    small = {};
    small.max_total_bytes = 1500;
    TarBuilder(s.tar).zeros("a", 1000).zeros("b", 1000).finish();
    check_refused(s.tar, s.out, small, {"'b'", "max_total_bytes"});

    const std::string long_path = std::string(600, 'd') + "/" + std::string(200, 'e') + "/" + std::string(250, 'f');
    TarBuilder(s.tar).file(long_path, "x").finish();
    check_refused(s.tar, s.out, ExtractionPolicy{}, {"max_path_bytes", "1024"});

    TarBuilder(s.tar).file(std::string(300, 'n'), "x").finish();
    check_refused(s.tar, s.out, ExtractionPolicy{}, {"max_name_bytes", "255"});
}

TEST_CASE("a compression bomb stops at the ratio limit", "[archive]") {
    ExtractScratch s;
    const fs::path bomb = s.dir.path() / "bomb.tar.gz";
    TarBuilder(bomb, TarBuilder::Filter::gzip).zeros("zeros", 16u << 20).finish();
    REQUIRE(fs::file_size(bomb) < (100u << 10));  // 16 MiB of zeros in under 100 KiB
    ExtractionPolicy policy;
    policy.ratio_floor_bytes = 1u << 20;
    check_refused(bomb, s.out, policy, {"zeros", "max_ratio", "ratio_floor_bytes"});
    CHECK(policy.output_limit(fs::file_size(bomb)) == (1u << 20));

    policy.ratio_floor_bytes = 32u << 20;  // the same archive within the floor is fine
    auto tree = kernhub::archive::extract(bomb, s.out, policy);
    CHECK(fs::file_size(tree.root() / "zeros") == (16u << 20));
}

TEST_CASE("damaged input is refused as such", "[archive]") {
    ExtractScratch s;
    std::ofstream(s.tar, std::ios::binary) << std::string(4096, 'z');
    check_refused(s.tar, s.out, {}, {s.tar.string(), "not a tar archive"});

    // A gzip stream cut in half.
    const fs::path whole = s.dir.path() / "whole.tar.gz";
    TarBuilder(whole, TarBuilder::Filter::gzip).zeros("a", 1 << 20).file("b", std::string(200000, 'q')).finish();
    std::string bytes = slurp(whole);
    std::ofstream(s.tar, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
    check_refused(s.tar, s.out, {}, {s.tar.string()});

    CHECK_THROWS_MATCHES(kernhub::archive::extract(s.dir.path() / "missing.tar", s.out, {}), Error,
                         Catch::Predicate<Error>([](const Error& e) { return e.code() == ErrorCode::not_found; }));
    CHECK_THROWS_MATCHES(kernhub::archive::extract(s.dir.path(), s.out, {}), Error,
                         Catch::Predicate<Error>([](const Error& e) { return e.code() == ErrorCode::usage; }));
    CHECK(is_empty_dir(s.out));
}

TEST_CASE("resolve_link stays lexical and inside the archive", "[archive]") {
    using kernhub::archive::resolve_link;
    CHECK(resolve_link("r/snapshots/c/build/v/f", "../../../../blobs/abc") ==
          std::optional<std::string>("r/blobs/abc"));
    CHECK(resolve_link("a/b", "./c") == std::optional<std::string>("a/c"));
    CHECK(resolve_link("a/b", "..") == std::optional<std::string>(""));
    CHECK(!resolve_link("a/b", "../.."));
    CHECK(!resolve_link("a/b", "/etc/passwd"));
    CHECK(!resolve_link("a/b", ""));
}
