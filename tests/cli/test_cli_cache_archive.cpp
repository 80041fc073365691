// `kernhub cache export` and `kernhub cache import` end to end: a cache
// filled from the loopback hub travels through an archive into an empty
// cache that then works offline; hostile archives exit 4 and change nothing
// (docs/ci-images.md, "Cache archives").
#include <sys/file.h>
#include <chrono>
#include <random>
#include <thread>

#include "archive/tar_builder.hpp"
#include "cacheadmin/cache_fixture.hpp"
#include "cli/cli_support.hpp"
#include "support/hub_builder.hpp"
#include "support/hub_server.hpp"

using namespace kernhub::test;
using namespace kernhub::test::cli;

namespace {

// Every path under `dir` with what it holds: link targets, file bytes.
std::map<std::string, std::string> tree_state(const fs::path& dir) {
    std::map<std::string, std::string> state;
    std::error_code ec;
    for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string rel = it->path().lexically_relative(dir).generic_string();
        if (it->is_symlink()) {
            state[rel] = "-> " + fs::read_symlink(it->path()).string();
        } else if (it->is_regular_file()) {
            state[rel] = read_text(it->path());
        } else {
            state[rel] = "dir";
        }
    }
    return state;
}

// `more` comes first: names given after --registry would be taken as more registries.
ProcessResult export_cache(const Sandbox& box, const fs::path& to, const std::vector<std::string>& more = {}) {
    std::vector<std::string> args{"cache", "export"};
    args.insert(args.end(), more.begin(), more.end());
    for (const std::string& arg : {std::string("--to"), to.string(), std::string("--cache-dir"), box.cache.string(),
                                   std::string("--registry"), box.registry.string()}) {
        args.push_back(arg);
    }
    return box.run(args);
}

ProcessResult import_cache(const Sandbox& box, const fs::path& file, const fs::path& cache,
                           const EnvChanges& extra = {}) {
    return box.run({"cache", "import", file.string(), "--cache-dir", cache.string(), "--json"}, extra);
}

// A sandbox whose cache holds vector-add (main, commit A) from the hub.
struct FilledCache {
    KernelHub hub;
    Sandbox box;
    FilledCache() {
        ProcessResult r = box.kh("fetch", "vector-add", hub.server().endpoint());
        INFO(describe(r));
        REQUIRE(r.exit_code == 0);
    }
};

}  // namespace

TEST_CASE("export, then import into an empty cache: fetch --offline works and the snapshot is identical", "[cli]") {
    FilledCache filled;
    const Sandbox& box = filled.box;
    const fs::path archive = box.dir.path() / "cache.tar.zst";
    ProcessResult r = export_cache(box, archive, {"--json"});
    json out = parse_stdout(r);
    REQUIRE(r.exit_code == 0);
    CHECK(keys_of(out) == std::vector<std::string>{"bytes", "compression", "entries", "file", "repos"});
    CHECK(out["compression"] == "zstd");
    CHECK(out["repos"] == json::array({k_vector_add_folder}));
    CHECK(out["entries"].get<int>() > 5);
    CHECK(out["bytes"].get<std::uint64_t>() > 10000);  // the .so is in it

    // Reproducible: a second export is the same bytes.
    const fs::path again = box.dir.path() / "again.tar.zst";
    REQUIRE(export_cache(box, again).exit_code == 0);
    CHECK(read_text(archive) == read_text(again));

    Sandbox target;
    TempDir tmp;
    r = import_cache(target, archive, target.cache, {{"TMPDIR", tmp.path().string()}});
    json imported = parse_stdout(r);
    REQUIRE(r.exit_code == 0);
    CHECK(keys_of(imported) ==
          std::vector<std::string>{"blobs", "entries", "file", "links", "refs", "repos", "side_files", "skipped"});
    CHECK(imported["blobs"] == 2);
    CHECK(imported["links"] == 2);
    CHECK(imported["refs"] == 1);
    CHECK(imported["skipped"] == 0);
    CHECK(fs::is_empty(tmp.path()));

    // The imported snapshot, refs and blobs are the source cache's, byte for byte.
    const fs::path from = box.cache / k_vector_add_folder;
    const fs::path to = target.cache / k_vector_add_folder;
    for (const char* part : {"snapshots", "refs", "blobs"}) {
        INFO(part);
        CHECK(tree_state(to / part) == tree_state(from / part));
    }
    // kernhub's listing copy and variant records are never carried: trust
    // in them is earned in this cache.
    CHECK_FALSE(fs::exists(to / ".kernhub/trees"));
    CHECK_FALSE(fs::exists(to / ".kernhub/variants"));

    r = target.kh("fetch", "vector-add", k_dead_endpoint, {"--offline", "--json"});
    json fetched = parse_stdout(r);
    REQUIRE(r.exit_code == 0);
    CHECK(fetched["requests"] == 0);
    CHECK(fetched["bytes_downloaded"] == 0);
    CHECK(fetched["variant"] == host_cpu_variant());

    // Online, a commit-pinned fetch asks the hub for the listing only (the
    // archive's blobs are then hashed against it, nothing is downloaded);
    // after that the variant is recorded and the next fetch asks nothing.
    filled.hub.server().reset();
    const std::string pinned = "kernhub-test/vector-add@" + fetched["commit"].get<std::string>();
    r = target.kh("fetch", pinned, filled.hub.server().endpoint(), {"--json"});
    REQUIRE(r.exit_code == 0);
    CHECK(parse_stdout(r)["requests"] == 1);
    CHECK(parse_stdout(r)["bytes_downloaded"] == 0);
    CHECK(filled.hub.server().count_requests("/tree/") == 1);
    r = target.kh("fetch", pinned, filled.hub.server().endpoint(), {"--json"});
    REQUIRE(r.exit_code == 0);
    CHECK(parse_stdout(r)["requests"] == 0);
}

TEST_CASE("the exported archive gets 0666 less the umask, so an export is no more readable than other new files",
          "[cli]") {
    FilledCache filled;
    const Sandbox& box = filled.box;
    const std::vector<std::pair<std::string, int>> cases{{"077", 0600}, {"027", 0640}, {"022", 0644}, {"002", 0664}};
    for (const auto& [umask, mode] : cases) {
        INFO("umask " << umask);
        const fs::path archive = box.dir.path() / ("umask-" + umask + ".tar");
        // The shell sets the umask of the kernhub it becomes, not this process's.
        const std::vector<std::string> argv{"/bin/sh",
                                            "-c",
                                            "umask " + umask + " && exec \"$@\"",
                                            "sh",
                                            KERNHUB_CLI_PATH,
                                            "cache",
                                            "export",
                                            "--to",
                                            archive.string(),
                                            "--cache-dir",
                                            box.cache.string()};
        ProcessResult r = run_process(argv, box.env(), box.dir.path().string());
        INFO(describe(r));
        REQUIRE(r.exit_code == 0);
        CHECK(static_cast<int>(fs::status(archive).permissions() & fs::perms::all) == mode);
    }
}

TEST_CASE("plain, gzip, xz and zstd cache archives import, recognised by content", "[cli]") {
    FilledCache filled;
    const Sandbox& box = filled.box;
    int n = 0;
    for (const char* name : {"c.tar", "c.tar.gz", "c.tar.xz", "c.tar.zst"}) {
        INFO(name);
        const fs::path archive = box.dir.path() / name;
        ProcessResult r = export_cache(box, archive, {"--json"});
        REQUIRE(r.exit_code == 0);
        // The name says nothing about the content: import reads the bytes.
        const fs::path renamed = box.dir.path() / ("bundle-" + std::to_string(n) + ".data");
        fs::rename(archive, renamed);
        const fs::path cache = box.dir.path() / ("imported-" + std::to_string(n++));
        r = import_cache(box, renamed, cache);
        REQUIRE(r.exit_code == 0);
        CHECK(parse_stdout(r)["blobs"] == 2);
        r = box.run({"fetch", "vector-add", "--registry", box.registry.string(), "--cache-dir", cache.string(),
                     "--offline", "--json"});
        CHECK(r.exit_code == 0);
    }
}

TEST_CASE("importing what the cache already holds succeeds and changes nothing", "[cli]") {
    FilledCache filled;
    const Sandbox& box = filled.box;
    const fs::path archive = box.dir.path() / "cache.tar.gz";
    REQUIRE(export_cache(box, archive).exit_code == 0);
    const auto before = tree_state(box.cache / k_vector_add_folder);
    ProcessResult r = import_cache(box, archive, box.cache);
    json out = parse_stdout(r);
    REQUIRE(r.exit_code == 0);
    CHECK(out["blobs"] == 0);
    CHECK(out["links"] == 0);
    CHECK(out["refs"] == 0);
    CHECK(out["side_files"] == 0);
    CHECK(out["skipped"].get<int>() >= 5);
    CHECK(tree_state(box.cache / k_vector_add_folder) == before);

    // Human output goes to stderr.
    r = box.run({"cache", "import", archive.string(), "--cache-dir", box.cache.string()});
    CHECK(r.exit_code == 0);
    CHECK(r.out.empty());
    CHECK(r.err.find("imported " + archive.string() + ": 0 blobs") != std::string::npos);
}

TEST_CASE("export NAME carries the commit the name resolves to in the cache", "[cli]") {
    FilledCache filled;
    const Sandbox& box = filled.box;
    REQUIRE(box.kh("fetch", "vector-add-v2", filled.hub.server().endpoint()).exit_code == 0);
    const fs::path snapshots = box.cache / k_vector_add_folder / "snapshots";
    const std::string commit_a = read_text(box.cache / k_vector_add_folder / "refs/main");
    const std::string commit_b = read_text(box.cache / k_vector_add_folder / "refs/v2");
    REQUIRE(commit_a != commit_b);

    const fs::path archive = box.dir.path() / "v2.tar";
    ProcessResult r = export_cache(box, archive, {"vector-add-v2"});
    INFO(describe(r));
    REQUIRE(r.exit_code == 0);
    CHECK(r.err.find("exported 1 repos to " + archive.string() + " (none)") != std::string::npos);
    const fs::path cache = box.dir.path() / "only-v2";
    REQUIRE(import_cache(box, archive, cache).exit_code == 0);
    const fs::path repo = cache / k_vector_add_folder;
    CHECK(fs::exists(repo / "snapshots" / commit_b));
    CHECK(!fs::exists(repo / "snapshots" / commit_a));
    CHECK(read_text(repo / "refs/v2") == commit_b);
    CHECK(!fs::exists(repo / "refs/main"));
    r = box.run(
        {"fetch", "vector-add-v2", "--registry", box.registry.string(), "--cache-dir", cache.string(), "--offline"});
    CHECK(r.exit_code == 0);
    r = box.run(
        {"fetch", "vector-add", "--registry", box.registry.string(), "--cache-dir", cache.string(), "--offline"});
    CHECK(r.exit_code == 6);

    // The whole cache carries both commits.
    REQUIRE(export_cache(box, box.dir.path() / "all.tar").exit_code == 0);
    const fs::path all = box.dir.path() / "all";
    REQUIRE(import_cache(box, box.dir.path() / "all.tar", all).exit_code == 0);
    CHECK(tree_state(all / k_vector_add_folder / "snapshots") == tree_state(snapshots));

    // A name whose revision this cache never saw, and a name that is not known.
    r = export_cache(box, box.dir.path() / "x.tar", {"vector-add-v7"});
    check_error(r, 6, {"vector-add-v7", "refs/v7", "fetch or prewarm"});
    r = export_cache(box, box.dir.path() / "x.tar", {"no-such-kernel"});
    check_error(r, 3, {"no-such-kernel"});
    r = export_cache(box, box.dir.path() / "x.zip");
    check_error(r, 2, {"x.zip", ".tar.zst"});
    CHECK(!fs::exists(box.dir.path() / "x.tar"));
}

TEST_CASE("import refuses a hostile archive with exit 4 and leaves the cache and TMPDIR untouched", "[cli]") {
    FilledCache filled;
    const Sandbox& box = filled.box;
    TempDir tmp;
    const std::string folder = k_vector_add_folder;
    const std::string commit = read_text(box.cache / folder / "refs/main");
    const std::string fake_etag = std::string(64, 'a');
    struct Case {
        const char* what;
        std::function<void(TarBuilder&)> add;
        std::vector<std::string> names;
    };
    const std::vector<Case> cases = {
        {"absolute path", [](TarBuilder& t) { t.file("/tmp/kernhub-evil", "x"); }, {"/tmp/kernhub-evil", "absolute"}},
        {"'..'", [&](TarBuilder& t) { t.file(folder + "/../escape", "x"); }, {"escape", "'..'"}},
        {"symlink to /etc/passwd",
         [&](TarBuilder& t) { t.symlink(folder + "/snapshots/" + commit + "/passwd", "/etc/passwd"); },
         {"passwd", "/etc/passwd"}},
        {"blob that does not match its name",
         [&](TarBuilder& t) { t.file(folder + "/blobs/" + fake_etag, "bytes"); },
         {fake_etag, "does not match its name"}},
        {"fifo", [&](TarBuilder& t) { t.special(folder + "/refs/fifo", AE_IFIFO); }, {"refs/fifo", "FIFO"}},
    };
    const auto before = tree_state(box.cache);
    // One loop, not sections: a refused import changes nothing, so every case
    // can start from the same cache.
    for (const auto& c : cases) {
        INFO(c.what);
        {
            const fs::path bad = box.dir.path() / "bad.tar";
            {
                TarBuilder tar(bad);
                tar.file(folder + "/refs/v9", commit);  // something valid first, to show it is not kept
                c.add(tar);
            }
            ProcessResult r = import_cache(box, bad, box.cache, {{"TMPDIR", tmp.path().string()}});
            std::vector<std::string> names = c.names;
            names.push_back("refusing archive " + bad.string());
            check_error(r, 4, names);
            json error = parse_stdout(r);
            CHECK(error["error"]["code"] == 4);
            CHECK(tree_state(box.cache) == before);
            CHECK(fs::is_empty(tmp.path()));
        }
    }
}

TEST_CASE("an import whose links are already there marks their snapshot in use, so a prune keeps it", "[cli]") {
    FilledCache filled;
    const Sandbox& box = filled.box;
    const fs::path archive = box.dir.path() / "cache.tar.gz";
    REQUIRE(export_cache(box, archive).exit_code == 0);
    kernhub::test::cacheadmin::age(box.cache, 2);
    const fs::path snapshots = box.cache / k_vector_add_folder / "snapshots";
    const fs::path commit = fs::directory_iterator(snapshots)->path();
    const auto before = fs::last_write_time(commit);

    ProcessResult r = import_cache(box, archive, box.cache);
    REQUIRE(r.exit_code == 0);
    CHECK(parse_stdout(r)["links"] == 0);  // every link was already there
    CHECK(fs::last_write_time(commit) > before + std::chrono::hours(1));
    fs::remove(box.cache / k_vector_add_folder / "refs" / "main");
    r = box.run({"cache", "prune", "--cache-dir", box.cache.string()});
    INFO(describe(r));
    CHECK(r.exit_code == 0);
    CHECK(fs::is_directory(commit));
}

TEST_CASE("export and import stopped by SIGINT each say what is true of them and leave nothing behind", "[cli]") {
    // A kernel with a 48 MiB file of random bytes: an xz export of it, and
    // the unpacking of its archive, run long enough to be stopped halfway.
    TempDir dir;
    std::string bytes(48u << 20, '\0');
    std::mt19937 random(7);
    for (auto& c : bytes) c = static_cast<char>(random());
    write_text(dir.path() / "big.bin", bytes);
    const std::string variant = "build/" + host_cpu_variant() + "/";
    json spec = {
        {"repos",
         {{{"repo_id", "kernhub-test/big"},
           {"type", "kernel"},
           {"commits",
            {{{"message", "big"},
              {"branches", {"main"}},
              {"metadata", true},
              {"files", {{variant + "big.bin", {{"path", (dir.path() / "big.bin").string()}, {"lfs", true}}}}}}}}}}}};
    make_hub(spec, dir.path() / "hub");
    HubServer server(dir.path() / "hub");
    Sandbox box;
    REQUIRE(box.kh("fetch", "kernhub-test/big", server.endpoint(), {"--quiet"}).exit_code == 0);

    const fs::path out = box.dir.path() / "out";
    fs::create_directories(out);
    const auto has_entry = [](const fs::path& folder, const std::string& prefix) {
        std::error_code ec;
        for (const auto& entry : fs::directory_iterator(folder, ec)) {
            if (entry.path().filename().string().rfind(prefix, 0) == 0) return true;
        }
        return false;
    };
    const Interrupted exported = interrupt_when(
        box, {"cache", "export", "--to", (out / "cache.tar.xz").string(), "--cache-dir", box.cache.string()}, SIGINT,
        [&] { return has_entry(out, ".cache.tar.xz."); });
    REQUIRE(exported.started);
    INFO(exported.err);
    CHECK(exported.exit_code == 130);
    CHECK_THAT(exported.err,
               Catch::Contains("interrupted by SIGINT; no archive was written and the target is as it was"));
    CHECK(fs::is_empty(out));

    // A plain tar, quick to write, imported into an empty cache.
    REQUIRE(export_cache(box, out / "cache.tar").exit_code == 0);
    Sandbox target;
    fs::create_directories(target.cache);
    const Interrupted imported =
        interrupt_when(target, {"cache", "import", (out / "cache.tar").string(), "--cache-dir", target.cache.string()},
                       SIGINT, [&] { return has_entry(target.cache, ".kernhub-extract-"); });
    REQUIRE(imported.started);
    INFO(imported.err);
    CHECK(imported.exit_code == 130);
    CHECK_THAT(imported.err, Catch::Contains("interrupted by SIGINT; nothing unverified entered the cache"));
    CHECK(imported.err.find("partial downloads") == std::string::npos);
    CHECK_FALSE(has_entry(target.cache, ".kernhub-extract-"));
}

TEST_CASE("the next export to a target removes what a killed export left beside it, never a live one's", "[cli]") {
    FilledCache filled;
    const Sandbox& box = filled.box;
    const fs::path out = box.dir.path() / "out";
    fs::create_directories(out);
    // What an export killed halfway leaves, and what a running one holds.
    const fs::path abandoned = out / ".cache.tar.zst.Ab12Cd";
    const fs::path live = out / ".cache.tar.zst.Ef34Gh";
    write_text(abandoned, std::string(1 << 16, 'x'));
    write_text(live, "being written");
    UniqueFd held(::open(live.c_str(), O_RDONLY | O_CLOEXEC));
    REQUIRE(::flock(held.get(), LOCK_EX) == 0);  // this test process is the running export
    // Another target's temporary is not this export's business.
    const fs::path other = out / ".other.tar.zst.Ij56Kl";
    write_text(other, "another target");

    ProcessResult r = export_cache(box, out / "cache.tar.zst");
    INFO(describe(r));
    REQUIRE(r.exit_code == 0);
    CHECK_FALSE(fs::exists(abandoned));
    CHECK(fs::exists(live));
    CHECK(fs::exists(other));
    CHECK(fs::exists(out / "cache.tar.zst"));
}

TEST_CASE("an import killed while unpacking leaves a folder that cache ls counts and prune --partials removes",
          "[cli]") {
    // A 48 MiB file of random bytes, so the unpacking can be caught halfway.
    TempDir dir;
    std::string bytes(48u << 20, '\0');
    std::mt19937 random(11);
    for (auto& c : bytes) c = static_cast<char>(random());
    write_text(dir.path() / "big.bin", bytes);
    json files = json::object();
    files["build/" + host_cpu_variant() + "/big.bin"] = {{"path", (dir.path() / "big.bin").string()}, {"lfs", true}};
    json commit = {{"message", "big"}, {"branches", {"main"}}, {"metadata", true}, {"files", files}};
    make_hub({{"repos", json::array({{{"repo_id", "kernhub-test/big"}, {"type", "kernel"}, {"commits", {commit}}}})}},
             dir.path() / "hub");
    HubServer server(dir.path() / "hub");
    Sandbox box;
    REQUIRE(box.kh("fetch", "kernhub-test/big", server.endpoint(), {"--quiet"}).exit_code == 0);
    const fs::path archive = box.dir.path() / "cache.tar";
    REQUIRE(export_cache(box, archive).exit_code == 0);

    Sandbox target;
    fs::create_directories(target.cache);
    const auto unpack_folder = [&]() -> fs::path {
        std::error_code ec;
        for (const auto& entry : fs::directory_iterator(target.cache, ec)) {
            if (entry.path().filename().string().rfind(".kernhub-extract-", 0) == 0) return entry.path();
        }
        return {};
    };
    const auto prune = [&](const std::vector<std::string>& more) {
        std::vector<std::string> args{"cache", "prune", "--cache-dir", target.cache.string()};
        args.insert(args.end(), more.begin(), more.end());
        return target.run(args);
    };
    // A running import holds its unpack folder: --partials keeps it.
    {
        std::vector<std::string> argv{KERNHUB_CLI_PATH, "cache",       "import",
                                      archive.string(), "--cache-dir", target.cache.string()};
        UniqueFd in(::open("/dev/null", O_RDONLY | O_CLOEXEC));
        UniqueFd sink(::open("/dev/null", O_WRONLY | O_CLOEXEC));
        const pid_t pid =
            spawn_process(argv, target.env(), target.dir.path().string(), in.get(), sink.get(), sink.get());
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        // Stopped once it has written some of the file.
        const auto unpacked_bytes = [&] {
            std::uintmax_t written = 0;
            std::error_code ec;
            const fs::path folder = unpack_folder();
            if (folder.empty()) return written;
            for (fs::recursive_directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
                if (it->is_regular_file(ec)) written += it->file_size(ec);
            }
            return written;
        };
        while (unpacked_bytes() == 0 && std::chrono::steady_clock::now() < deadline) {
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        ::kill(pid, SIGSTOP);  // held mid-unpack, its lock with it
        const fs::path folder = unpack_folder();
        REQUIRE_FALSE(folder.empty());
        ProcessResult busy = prune({"--partials"});
        INFO(describe(busy));
        CHECK(busy.exit_code == 0);
        CHECK(fs::exists(folder));
        CHECK_THAT(busy.err, Catch::Contains("a running process is unpacking into it"));
        ::kill(pid, SIGKILL);
        ::kill(pid, SIGCONT);
        CHECK(wait_process(pid) == 128 + SIGKILL);
    }
    const fs::path left = unpack_folder();
    REQUIRE_FALSE(left.empty());

    ProcessResult ls = target.run({"cache", "ls", "--cache-dir", target.cache.string(), "--json"});
    INFO(describe(ls));
    REQUIRE(ls.exit_code == 0);
    json listing = parse_stdout(ls);
    CHECK(listing["leftovers"] == 1);
    CHECK(listing["leftover_bytes"].get<std::uint64_t>() > 0);
    ProcessResult plain = target.run({"cache", "ls", "--cache-dir", target.cache.string()});
    CHECK_THAT(plain.out, Catch::Contains("1 temporaries of killed or running commands"));

    // Fresh, so a plain prune keeps it for 24 hours; --partials removes it now.
    ProcessResult kept = prune({});
    CHECK(kept.exit_code == 0);
    CHECK(fs::exists(left));
    CHECK_THAT(kept.err, Catch::Contains("24 hours"));
    ProcessResult removed = prune({"--partials", "--json"});
    INFO(describe(removed));
    CHECK(removed.exit_code == 0);
    CHECK(parse_stdout(removed)["removed"] == json::array({left.string()}));
    CHECK_FALSE(fs::exists(left));
    CHECK(parse_stdout(target.run({"cache", "ls", "--cache-dir", target.cache.string(), "--json"}))["leftovers"] == 0);
}
