// Archive variants: a variant's .tar.gz/.tgz/.tar.zst/.tar.xz is verified,
// unpacked next to its files and loadable through the registry's "file";
// an archive breaking a rule is refused with exit 4 and leaves nothing
// unpacked in the cache or outside it. The archives are built here with
// libarchive's writer (tests/archive/tar_builder.hpp).
#include <sys/stat.h>

#include <archive_entry.h>

#include <fstream>
#include <functional>
#include <memory>
#include <set>

#include "archive/tar_builder.hpp"
#include "cli_support.hpp"
#include "kernhub/kernhub.hpp"
#include "support/hub_builder.hpp"
#include "support/slurp.hpp"

using namespace kernhub::test;
using namespace kernhub::test::cli;

namespace {

using Filter = TarBuilder::Filter;

// One repo per archive; the host variant holds README.txt and the archive.
struct ArchiveHub {
    TempDir dir;
    fs::path outside = dir.path() / "outside";  // a folder no archive may reach
    std::unique_ptr<HubServer> server;

    ArchiveHub() {
        fs::create_directories(outside);
        write_text(outside / "canary.txt", "canary");
        const fs::path src = dir.path() / "src";
        fs::create_directories(src);
        nlohmann::json repos = nlohmann::json::array();
        auto add = [&](const std::string& name, const std::string& archive_name,
                       const std::function<void(TarBuilder&)>& fill, Filter filter) {
            const fs::path file = src / (name + "-" + archive_name);
            {
                TarBuilder tar(file, filter);
                fill(tar);
            }
            const std::string variant = "build/" + host_cpu_variant() + "/";
            nlohmann::json files = nlohmann::json::object();
            files[variant + "README.txt"] = {{"text", "an archive variant\n"}};
            files[variant + archive_name] = {{"path", file.string()}};
            nlohmann::json commit = {{"message", name}, {"branches", {"main"}}, {"metadata", true}};
            commit["files"] = files;
            nlohmann::json repo = {{"repo_id", "kernhub-test/" + name}, {"type", "kernel"}};
            repo["commits"] = nlohmann::json::array({commit});
            repos.push_back(repo);
        };
        const std::string so = slurp(vector_add_so());
        add(
            "arc-good", "kernel.tar.gz",
            [&](TarBuilder& t) {
                t.dir("lib").file("lib/libvector_add.so", so).file("include/vector_add.h", "/**/\n");
            },
            Filter::gzip);
        add(
            "arc-abs", "bad.tar.xz", [&](TarBuilder& t) { t.file((outside / "abs.txt").string(), "x"); }, Filter::xz);
        add(
            "arc-dotdot", "bad.tgz", [&](TarBuilder& t) { t.file("lib/../../../../../../outside/evil.txt", "x"); },
            Filter::gzip);
        add(
            "arc-symlink", "bad.tar.gz",
            [&](TarBuilder& t) { t.symlink("lib", outside.string()).file("lib/evil.txt", "x"); }, Filter::gzip);
        add(
            "arc-hardlink", "bad.tar.gz", [&](TarBuilder& t) { t.file("a.txt", "x").hardlink("b.txt", "a.txt"); },
            Filter::gzip);
        add(
            "arc-fifo", "bad.tar.zst", [&](TarBuilder& t) { t.file("a.txt", "x").special("pipe", AE_IFIFO); },
            Filter::zstd);
        add(
            "arc-device", "bad.tar.zst", [&](TarBuilder& t) { t.special("null", AE_IFCHR); }, Filter::zstd);
        add(
            "arc-entries", "bad.tar.gz",
            [&](TarBuilder& t) {
                for (int i = 0; i < 60; ++i) t.file("f" + std::to_string(i) + ".txt", "x");
            },
            Filter::gzip);
        add(
            "arc-longpath", "bad.tar.gz",
            [&](TarBuilder& t) {
                std::string path;
                for (int i = 0; i < 11; ++i) path += std::string(100, static_cast<char>('a' + i)) + "/";
                t.file(path + "x.txt", "x");
            },
            Filter::gzip);
        add(
            "arc-bomb", "bomb.tar.zst", [&](TarBuilder& t) { t.zeros("zeros.bin", 1ull << 30); }, Filter::zstd);
        add(
            "arc-collide", "kernel.tar.gz", [&](TarBuilder& t) { t.file("lib/x.so", "x").file("README.txt", "mine"); },
            Filter::gzip);
        add(
            "arc-notutf8", "bad.tar.gz", [&](TarBuilder& t) { t.file("lib/\xff\xfe.txt", "x"); }, Filter::gzip);
        add(
            "arc-control", "bad.tar.gz", [&](TarBuilder& t) { t.file("lib/evil\x1b[31m.txt", "x"); }, Filter::gzip);
        add(
            "arc-deep", "bad.tar.gz",
            [&](TarBuilder& t) {
                std::string path;
                for (int i = 0; i < 30; ++i) path += "d/";
                t.file(path + "x.txt", "x");
            },
            Filter::gzip);
        add(
            "arc-utf8", "kernel.tar.gz", [&](TarBuilder& t) { t.file("lib/caf\xc3\xa9.txt", "accented"); },
            Filter::gzip);
        make_hub({{"repos", repos}}, dir.path() / "hub");
        server = std::make_unique<HubServer>(dir.path() / "hub");
    }

    std::string endpoint() { return server->endpoint(); }
};

ArchiveHub& archive_hub() {
    static ArchiveHub hub;
    return hub;
}

fs::path repo_folder(const Sandbox& box, const std::string& name) {
    return box.cache / ("kernels--kernhub-test--" + name);
}

// Every path under `root` (links not followed), relative, sorted.
std::set<std::string> files_under(const fs::path& root) {
    std::set<std::string> out;
    if (!fs::exists(root)) return out;
    for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
        out.insert(it->path().lexically_relative(root).string());
    }
    return out;
}

// After a refusal: the snapshot holds the listed files only (no folder or
// file of the archive), blobs/ the listed blobs only, no record was written
// and no temp folder is left; outside the cache the canary is alone.
void check_nothing_left(const Sandbox& box, const std::string& name, const std::string& archive_name) {
    const fs::path folder = repo_folder(box, name);
    std::set<std::string> snapshot_files;
    for (const auto& path : files_under(folder / "snapshots")) {
        if (fs::is_symlink(folder / "snapshots" / path) || !fs::is_directory(folder / "snapshots" / path)) {
            snapshot_files.insert(fs::path(path).filename().string());
        }
    }
    CHECK(snapshot_files == std::set<std::string>{"README.txt", "metadata.json", archive_name});
    CHECK(files_under(folder / "blobs").size() == 3);
    CHECK(files_under(folder / ".kernhub" / "variants").empty());
    CHECK(files_under(folder / ".kernhub" / "tmp").empty());
    CHECK(files_under(archive_hub().outside) == std::set<std::string>{"canary.txt"});
    CHECK(slurp(archive_hub().outside / "canary.txt") == "canary");
    for (const auto& path : files_under(box.dir.path())) {
        INFO(path);
        CHECK(path.find("evil.txt") == std::string::npos);
        CHECK(path.find("abs.txt") == std::string::npos);
    }
}

void check_refused(const std::string& name, const std::string& archive_name, const std::vector<std::string>& words,
                   const EnvChanges& extra = {}) {
    Sandbox box;
    ProcessResult r = box.kh("fetch", "kernhub-test/" + name, archive_hub().endpoint(), {"--quiet"}, extra);
    std::vector<std::string> names = words;
    names.push_back(archive_name);
    check_error(r, 4, names);
    check_nothing_left(box, name, archive_name);
}

}  // namespace

TEST_CASE("archive variants: each rule refuses its archive with exit 4 and leaves nothing behind", "[cli][archive]") {
    SECTION("absolute path") {
        check_refused("arc-abs", "bad.tar.xz", {"abs.txt", "absolute path"});
    }
    SECTION("..") {
        check_refused("arc-dotdot", "bad.tgz", {"evil.txt", "'..'"});
    }
    SECTION("symlink") {
        check_refused("arc-symlink", "bad.tar.gz", {"'lib'", "symbolic link"});
    }
    SECTION("hardlink") {
        check_refused("arc-hardlink", "bad.tar.gz", {"'b.txt'", "hard link"});
    }
    SECTION("fifo") {
        check_refused("arc-fifo", "bad.tar.zst", {"'pipe'", "FIFO"});
    }
    SECTION("device") {
        check_refused("arc-device", "bad.tar.zst", {"'null'", "character device"});
    }
    SECTION("too many entries") {
        check_refused("arc-entries", "bad.tar.gz", {"#51", "max_entries", "KERNHUB_ARCHIVE_MAX_ENTRIES"},
                      {{"KERNHUB_ARCHIVE_MAX_ENTRIES", "50"}});
    }
    SECTION("too long a path") {
        check_refused(
            "arc-longpath", "bad.tar.gz",
            {std::string(100, 'a') + "/" + std::string(50, 'b'), "max_path_bytes", "KERNHUB_ARCHIVE_MAX_PATH"});
    }
    SECTION("decompression bomb") {
        check_refused("arc-bomb", "bomb.tar.zst", {"'zeros.bin'", "max_ratio", "KERNHUB_ARCHIVE_MAX_BYTES"});
    }
    SECTION("a lower KERNHUB_ARCHIVE_MAX_BYTES stops the bomb sooner") {
        check_refused("arc-bomb", "bomb.tar.zst", {"'zeros.bin'", "1 MiB", "KERNHUB_ARCHIVE_MAX_BYTES"},
                      {{"KERNHUB_ARCHIVE_MAX_BYTES", "1048576"}});
    }
    SECTION("a name that is not UTF-8") {
        check_refused("arc-notutf8", "bad.tar.gz", {"is not UTF-8"});
    }
    SECTION("a name with a control character") {
        check_refused("arc-control", "bad.tar.gz", {"holds a control character", "evil\\x1b[31m.txt"});
    }
    SECTION("a path deeper than the cache commands walk") {
        check_refused("arc-deep", "bad.tar.gz", {"k_max_path_parts"});
    }
    SECTION("a name the variant already has") {
        check_refused("arc-collide", "kernel.tar.gz", {"'README.txt'", "the variant's file"});
    }
}

TEST_CASE("archive variants: a UTF-8 name is unpacked under any locale and recorded", "[cli][archive]") {
    Sandbox box;
    for (const char* locale : {"C", "C.UTF-8"}) {
        INFO(locale);
        ProcessResult r = box.kh("fetch", "kernhub-test/arc-utf8", archive_hub().endpoint(), {"--json"},
                                 {{"LANG", locale}, {"LC_ALL", locale}});
        INFO(describe(r));
        REQUIRE(r.exit_code == 0);
        const fs::path file =
            fs::path(nlohmann::json::parse(r.out)["path"].get<std::string>()) / "lib" / "caf\xc3\xa9.txt";
        CHECK(slurp(file) == "accented");
    }
    ProcessResult verify = box.run({"cache", "verify", "--cache-dir", box.cache.string()});
    INFO(describe(verify));
    CHECK(verify.exit_code == 0);

    // The name survives a cache archive, under the C locale too.
    const fs::path exported = box.dir.path() / "cache.tar.zst";
    const fs::path other = box.dir.path() / "other-cache";
    ProcessResult out = box.run({"cache", "export", "--to", exported.string(), "--cache-dir", box.cache.string()},
                                {{"LANG", "C"}, {"LC_ALL", "C"}});
    INFO(describe(out));
    REQUIRE(out.exit_code == 0);
    ProcessResult in = box.run({"cache", "import", exported.string(), "--cache-dir", other.string()},
                               {{"LANG", "C"}, {"LC_ALL", "C"}});
    INFO(describe(in));
    REQUIRE(in.exit_code == 0);
    bool found = false;
    for (const auto& e : fs::recursive_directory_iterator(other)) {
        if (e.path().filename() == "caf\xc3\xa9.txt") found = slurp(e.path()) == "accented";
    }
    CHECK(found);
}

TEST_CASE("archive variants: a .tar.gz variant is unpacked, loaded through the registry's file, warm, verified",
          "[cli][archive]") {
    Sandbox box;
    std::ofstream(box.registry) << nlohmann::json{{"format", 1},
                                                  {"kernels",
                                                   {{"archived",
                                                     {{"repo_id", "kernhub-test/arc-good"},
                                                      {"revision", "main"},
                                                      {"symbol", "kh_vector_add"},
                                                      {"file", "lib/libvector_add.so"}}}}}}
                                       .dump();
    const std::string endpoint = archive_hub().endpoint();

    ProcessResult cold = box.kh("fetch", "archived", endpoint, {"--json"});
    REQUIRE(cold.exit_code == 0);
    CHECK(cold.err.find("unpacking") != std::string::npos);
    const nlohmann::json result = nlohmann::json::parse(cold.out);
    std::set<std::string> paths;
    for (const auto& f : result["files"]) paths.insert(f["path"].get<std::string>());
    CHECK(paths == std::set<std::string>{"metadata.json", "README.txt", "kernel.tar.gz", "lib/libvector_add.so",
                                         "include/vector_add.h"});
    const fs::path so = fs::path(result["path"].get<std::string>()) / "lib" / "libvector_add.so";
    CHECK(fs::is_symlink(so));
    CHECK(slurp(so) == slurp(vector_add_so()));
    // The unpacked file is a read-only blob named by its SHA-256.
    const fs::path blob = fs::canonical(so);
    CHECK(blob.filename() == sha256_of(vector_add_so()));
    CHECK((fs::status(blob).permissions() & fs::perms::owner_write) == fs::perms::none);
    CHECK(files_under(repo_folder(box, "arc-good") / ".kernhub" / "tmp").empty());

    SECTION("warm: no download, no unpacking") {
        archive_hub().server->reset();
        ProcessResult warm = box.kh("fetch", "archived", endpoint, {"--json"});
        REQUIRE(warm.exit_code == 0);
        CHECK(warm.err.find("unpacking") == std::string::npos);
        CHECK(nlohmann::json::parse(warm.out)["bytes_downloaded"] == 0);
        CHECK(archive_hub().server->count_requests("/resolve/") == 0);
    }
    SECTION("cache verify passes") {
        ProcessResult verify = box.run({"cache", "verify", "--cache-dir", box.cache.string(), "--json"});
        INFO(describe(verify));
        CHECK(verify.exit_code == 0);
        CHECK(nlohmann::json::parse(verify.out)["ok"] == true);
    }
    SECTION("a lost unpacked link is unpacked again") {
        fs::remove(so);
        ProcessResult again = box.kh("fetch", "archived", endpoint);
        INFO(describe(again));
        CHECK(again.exit_code == 0);
        CHECK(again.err.find("unpacking") != std::string::npos);
        CHECK(slurp(so) == slurp(vector_add_so()));
    }
    SECTION("verify_on_load: the unpacked file loads, and once changed it is refused") {
        const EnvChanges verify = {{"KERNHUB_VERIFY_ON_LOAD", "1"}};
        ProcessResult ok = box.kh("load", "archived", endpoint, {"--offline"}, verify);
        INFO(describe(ok));
        CHECK(ok.exit_code == 0);
        // The owner rewrites the blob in place, keeping its size.
        fs::permissions(blob, fs::perms::owner_write, fs::perm_options::add);
        {
            std::fstream f(blob, std::ios::in | std::ios::out | std::ios::binary);
            f.seekp(100);
            f.put('\x7f');
        }
        ProcessResult changed = box.kh("load", "archived", endpoint, {"--offline"}, verify);
        check_error(changed, 4, {"changed since it was verified", "libvector_add.so"});
    }
    SECTION("loaded through the registry's file and called") {
        kernhub::Options o;
        o.endpoint = endpoint;
        o.cache_dir = box.cache.string();
        o.registries = {box.registry.string()};
        o.project_dir = box.dir.path().string();
        o.no_default_registry = true;
        o.offline = true;
        o.token = "";
        kernhub::Client client(o);
        kernhub::LoadResult loaded = client.load("archived");
        REQUIRE(loaded.address != nullptr);
        CHECK(fs::path(loaded.file).filename() == "libvector_add.so");
        auto* add = reinterpret_cast<void (*)(const float*, const float*, float*, std::size_t)>(loaded.address);
        float a[3] = {1, 2, 3}, b[3] = {10, 20, 30}, out[3] = {};
        add(a, b, out, 3);
        CHECK(out[2] == 33.0f);
    }
}
