// A variant a load holds in part (docs/cache-format.md, "Partial variants"),
// through the real CLI against the loopback hub: what cache ls and cache
// verify say of it, what cache prune removes, and the races and kills a
// partial area must survive: a load beside a fetch that completes the
// variant, beside cache prune, beside another load, and a load killed at
// each step. Steps are hit with the test hooks KERNHUB_TEST_CRASH_AT and
// KERNHUB_TEST_PAUSE_AT (src/common/crash_point.hpp); waits are polls of
// what a command has done, never fixed sleeps.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <thread>

#include "cacheadmin/cache_fixture.hpp"
#include "cli/cli_support.hpp"

using namespace kernhub::test;
using namespace kernhub::test::cli;

namespace {

// [needs:test-hooks] (registered in test_cli_crash_points.cpp): the
// pause points come with the crash points, in a build with
// -DKERNHUB_TEST_HOOKS=ON only.

// vector-add-v2 is metadata.json, libvector_add.so and NOTES.txt; a load
// reads the first two.
const std::string k_part_ref = "vector-add-v2";

fs::path repo_folder_of(const Sandbox& box) {
    return box.cache / k_vector_add_folder;
}

fs::path partial_root(const Sandbox& box) {
    return repo_folder_of(box) / ".kernhub" / "partial";
}

std::string v2_commit(const Sandbox& box) {
    return read_text(repo_folder_of(box) / "refs" / "v2");
}

fs::path part_links(const Sandbox& box) {
    return partial_root(box) / v2_commit(box) / "build" / host_cpu_variant();
}

fs::path complete_record(const Sandbox& box) {
    return repo_folder_of(box) / ".kernhub" / "variants" / v2_commit(box) / (host_cpu_variant() + ".json");
}

bool entry_exists_now(const fs::path& path) {
    struct stat st {};
    return ::lstat(path.c_str(), &st) == 0;
}

// Polls `done` every millisecond for at most 30 s.
bool poll_until(const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!done()) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
}

// The arguments of `kernhub COMMAND vector-add-v2` on `endpoint`.
std::vector<std::string> part_args(const Sandbox& box, const std::string& command, const std::string& endpoint,
                                   const std::vector<std::string>& more = {}) {
    std::vector<std::string> args{command,      k_part_ref, "--registry",  box.registry.string(),
                                  "--endpoint", endpoint,   "--cache-dir", box.cache.string()};
    args.insert(args.end(), more.begin(), more.end());
    return args;
}

ProcessResult run_cache(const Sandbox& box, const std::string& sub, const std::vector<std::string>& more = {}) {
    std::vector<std::string> args{"cache", sub, "--cache-dir", box.cache.string()};
    args.insert(args.end(), more.begin(), more.end());
    return box.run(args, {{"KERNHUB_ENDPOINT", k_dead_endpoint}});
}

void require_ok(const ProcessResult& r, const std::string& what) {
    INFO(what << ": " << describe(r));
    REQUIRE(r.exit_code == 0);
}

// The pause point KERNHUB_TEST_PAUSE_AT=POINT=FILE: the command creates FILE
// when it gets there and goes on once the test removes it.
struct Pause {
    fs::path file;
    EnvChanges env(const std::string& point) const { return {{"KERNHUB_TEST_PAUSE_AT", point + "=" + file.string()}}; }
    bool reached() const {
        return poll_until([&] { return entry_exists_now(file); });
    }
    void release() const { fs::remove(file); }
};

// `cache verify` finds no damage: exit 0, nothing on stdout.
void check_verify_clean(const Sandbox& box, const std::string& context) {
    ProcessResult r = run_cache(box, "verify");
    INFO(context << ": " << describe(r));
    CHECK(r.exit_code == 0);
    CHECK(r.out.empty());
}

// The end of a race that a fetch was part of: the variant whole in the
// snapshot and recorded, no partial area (not even an empty folder), no
// damage, and an offline load from the snapshot.
void check_completed(const Sandbox& box, const std::string& endpoint, const std::string& context) {
    INFO(context);
    CHECK(entry_exists_now(complete_record(box)));
    CHECK_FALSE(entry_exists_now(partial_root(box)));
    check_verify_clean(box, context);
    ProcessResult offline = box.run(part_args(box, "load", endpoint, {"--offline", "--json"}));
    INFO(describe(offline));
    REQUIRE(offline.exit_code == 0);
    CHECK(parse_stdout(offline)["path"] ==
          (repo_folder_of(box) / "snapshots" / v2_commit(box) / "build" / host_cpu_variant()).string());
}

// Blobs and links as another reader finds them: every blob is verified
// content under its name and every partial link leads to one; the
// partial record names only linked files with their recorded bytes.
void check_part_consistent(const Sandbox& box, const std::string& context) {
    INFO(context);
    std::error_code ec;
    if (!fs::exists(partial_root(box), ec)) return;
    for (fs::recursive_directory_iterator it(partial_root(box)), end; it != end; ++it) {
        if (it->is_symlink()) {
            INFO("partial link " << it->path());
            CHECK(fs::exists(it->path()));
        }
        if (!it->is_regular_file() || it->is_symlink() || it->path().extension() != ".json") continue;
        const json record = json::parse(read_text(it->path()), nullptr, false);
        if (record.is_discarded()) continue;  // a record cut short reads as absent
        for (const auto& file : record["files"]) {
            const fs::path link = it->path().parent_path() / "build" / record["variant"].get<std::string>() /
                                  file["path"].get<std::string>();
            INFO("recorded " << link);
            REQUIRE(fs::exists(link));
            CHECK(sha256_of(link) == file["sha256"].get<std::string>());
        }
    }
}

}  // namespace

TEST_CASE("cache ls and cache verify say that a variant is held in part, and after a fetch that it is whole",
          "[cli][cache][partial]") {
    KernelHub hub;
    Sandbox box;
    const std::string ep = hub.server().endpoint();
    require_ok(box.run(part_args(box, "load", ep, {"--quiet"})), "the load");
    const std::string variant = host_cpu_variant();

    ProcessResult ls = run_cache(box, "ls");
    INFO(describe(ls));
    REQUIRE(ls.exit_code == 0);
    CHECK(ls.out.find("  commit " + v2_commit(box) + " (v2)  no snapshot, only variants held in part\n") !=
          std::string::npos);
    CHECK(ls.out.find("    " + variant + "  held in part: 2 of 3 files (libvector_add.so, metadata.json), ") !=
          std::string::npos);
    CHECK(ls.out.find(", verified by kernhub; kernhub fetch completes it\n") != std::string::npos);
    const json listing = parse_stdout(run_cache(box, "ls", {"--json"}));
    const json& commit = listing["repos"][0]["commits"][0];
    CHECK(commit["snapshot"] == false);
    const json& part = commit["variants"][0]["part"];
    CHECK(keys_of(part) == std::vector<std::string>{"files", "folder", "listed", "recorded", "size", "stale"});
    CHECK(part["files"] == json::array({"libvector_add.so", "metadata.json"}));
    CHECK(part["listed"] == 3);
    CHECK(part["recorded"] == true);
    CHECK(part["stale"] == false);
    CHECK(part["folder"] == part_links(box).string());

    ProcessResult verify = run_cache(box, "verify");
    INFO(describe(verify));
    CHECK(verify.exit_code == 0);
    CHECK(verify.out.empty());
    CHECK(verify.err.find("kernhub-test/vector-add@" + v2_commit(box).substr(0, 12) + " variant " + variant +
                          ": held in part: 2 of 3 files (libvector_add.so, metadata.json)") != std::string::npos);
    CHECK(verify.err.find("the files it lacks are no damage") != std::string::npos);
    CHECK(verify.err.find("checked 2 blobs, 2 links and 1 variant records") != std::string::npos);
    const json verified = parse_stdout(run_cache(box, "verify", {"--json"}));
    CHECK(verified["ok"] == true);
    REQUIRE(verified["parts"].size() == 1);
    CHECK(verified["parts"][0]["variant"] == variant);
    CHECK(verified["parts"][0]["commit"] == v2_commit(box));
    CHECK(verified["parts"][0]["files"] == json::array({"libvector_add.so", "metadata.json"}));

    // The fetch completes the variant and leaves no partial folder at all.
    require_ok(box.run(part_args(box, "fetch", ep, {"--quiet"})), "the fetch");
    CHECK_FALSE(entry_exists_now(partial_root(box)));
    const json after = parse_stdout(run_cache(box, "ls", {"--json"}));
    CHECK(after["repos"][0]["commits"][0]["snapshot"] == true);
    CHECK(after["repos"][0]["commits"][0]["variants"][0]["part"].is_null());
    CHECK(after["repos"][0]["commits"][0]["variants"][0]["recorded"] == true);
    CHECK(parse_stdout(run_cache(box, "verify", {"--json"}))["parts"].empty());
}

TEST_CASE("cache verify reports a wrong byte behind a partial link as damage, and a load after the repair heals it",
          "[cli][cache][partial]") {
    KernelHub hub;
    Sandbox box;
    const std::string ep = hub.server().endpoint();
    require_ok(box.run(part_args(box, "load", ep, {"--quiet"})), "the load");
    const fs::path link = part_links(box) / "libvector_add.so";
    const fs::path blob = (link.parent_path() / fs::read_symlink(link)).lexically_normal();
    kernhub::test::cacheadmin::flip_first_byte(blob);

    ProcessResult damaged = run_cache(box, "verify");
    check_error(damaged, 4, {"3 damaged files", blob.string()});
    CHECK(damaged.out.find(link.string() + ": links the damaged blob") != std::string::npos);
    CHECK(damaged.out.find((part_links(box).parent_path().parent_path() / (host_cpu_variant() + ".json")).string() +
                           ": names libvector_add.so") != std::string::npos);
    require_ok(run_cache(box, "verify", {"--repair", "--quiet"}), "the repair");
    check_verify_clean(box, "after the repair");
    require_ok(box.run(part_args(box, "load", ep, {"--quiet"})), "the load after the repair");
    check_verify_clean(box, "after the load");
    CHECK(sha256_of(link) == sha256_of(vector_add_so()));
}

TEST_CASE("a load paused before it opens its partial files makes a completing fetch wait, and both succeed",
          "[cli][partial][race][needs:test-hooks]") {
    KernelHub hub;
    Sandbox box;
    const std::string ep = hub.server().endpoint();
    require_ok(box.run(part_args(box, "load", ep, {"--quiet"})), "the first load");
    // The load has resolved its files in the partial area and is about to
    // open them when the fetch completes the variant: the fetch must not
    // remove them under it (the bug: the load then failed, exit 3, naming a
    // shared object that does not exist).
    const Pause pause{box.dir.path() / "pause"};
    Background load(box, part_args(box, "load", ep, {"--json"}), pause.env("opening"));
    REQUIRE(pause.reached());
    Background fetch(box, part_args(box, "fetch", ep));
    const auto waiting = [&] { return fetch.err_so_far().find("waiting for the loads reading") != std::string::npos; };
    REQUIRE(poll_until([&] { return waiting() || fetch.ended(); }));
    CHECK(waiting());
    CHECK(entry_exists_now(complete_record(box)));
    CHECK(entry_exists_now(part_links(box) / "libvector_add.so"));
    pause.release();
    const ProcessResult loaded = load.finish();
    INFO(describe(loaded));
    REQUIRE(loaded.exit_code == 0);
    CHECK(parse_stdout(loaded)["path"] == part_links(box).string());
    require_ok(fetch.finish(), "the fetch");
    check_completed(box, ep, "after the paused load and the fetch");
}

TEST_CASE("kernhub load racing kernhub fetch of one variant: both succeed and the variant ends whole",
          "[cli][partial][race]") {
    KernelHub hub;
    const std::string ep = hub.server().endpoint();
    for (int round = 0; round < 9; ++round) {
        INFO("round " << round);
        Sandbox box;
        require_ok(box.run(part_args(box, "load", ep, {"--quiet"})), "the first load");
        const std::string notes_blob = kernhub::test::cacheadmin::git_blob_id("v2\n");
        // The load starts with the fetch, once the fetch holds the missing
        // file, or once it has recorded the variant complete: each lands
        // nearer the fetch's removal of the partial area.
        Background fetch(box, part_args(box, "fetch", ep, {"--quiet"}));
        if (round % 3 == 1) {
            REQUIRE(poll_until([&] { return entry_exists_now(repo_folder_of(box) / "blobs" / notes_blob); }));
        } else if (round % 3 == 2) {
            REQUIRE(poll_until([&] { return entry_exists_now(complete_record(box)); }));
        }
        ProcessResult loaded = box.run(part_args(box, "load", ep, {"--quiet"}));
        require_ok(loaded, "the racing load");
        require_ok(fetch.finish(), "the racing fetch");
        check_completed(box, ep, "after the race");
    }
}

TEST_CASE("kernhub load racing kernhub cache prune keeps every blob it links",
          "[cli][partial][race][needs:test-hooks]") {
    KernelHub hub;
    const std::string ep = hub.server().endpoint();
    // The blobs are in the cache, old and linked by nothing (a load killed
    // after its downloads), so prune would remove them: a load must get
    // them back or keep them, and never end with a link to nothing.
    const auto prepare = [&](Sandbox& box) {
        require_ok(box.run(part_args(box, "load", ep, {"--quiet"})), "the first load");
        fs::remove_all(partial_root(box));
        kernhub::test::cacheadmin::age(repo_folder_of(box) / "blobs", 2);
    };
    const auto check_loaded = [&](const Sandbox& box, const std::string& context) {
        INFO(context);
        check_part_consistent(box, context);
        check_verify_clean(box, context);
        ProcessResult offline = box.run(part_args(box, "load", ep, {"--offline", "--quiet"}));
        INFO(describe(offline));
        CHECK(offline.exit_code == 0);
    };
    {
        // Paused right after it linked its first file (holding that blob's
        // lock): prune keeps that blob and may take the other, which the
        // load then downloads again.
        Sandbox box;
        prepare(box);
        const Pause pause{box.dir.path() / "pause"};
        Background load(box, part_args(box, "load", ep, {"--quiet"}), pause.env("linked:1"));
        REQUIRE(pause.reached());
        require_ok(run_cache(box, "prune", {"--quiet"}), "prune beside the paused load");
        pause.release();
        require_ok(load.finish(), "the load prune ran beside");
        check_loaded(box, "prune while the load linked");
    }
    {
        // Paused after its record, before it opens the files: nothing of them goes.
        Sandbox box;
        prepare(box);
        const Pause pause{box.dir.path() / "pause"};
        Background load(box, part_args(box, "load", ep, {"--quiet"}), pause.env("opening"));
        REQUIRE(pause.reached());
        ProcessResult pruned = run_cache(box, "prune", {"--json"});
        require_ok(pruned, "prune beside the opening load");
        const json report = parse_stdout(pruned);
        for (const auto& path : report["removed"]) {
            CHECK(path.get<std::string>().find("/blobs/") == std::string::npos);
        }
        pause.release();
        require_ok(load.finish(), "the opening load");
        check_loaded(box, "prune while the load opened");
    }
    for (int round = 0; round < 6; ++round) {
        Sandbox box;
        prepare(box);
        Background prune(box, {"cache", "prune", "--quiet", "--cache-dir", box.cache.string()});
        require_ok(box.run(part_args(box, "load", ep, {"--quiet"})), "the load racing prune");
        require_ok(prune.finish(), "prune racing the load");
        check_loaded(box, "round " + std::to_string(round));
    }
}

TEST_CASE("two kernhub loads of one variant racing both succeed and leave one recorded part",
          "[cli][partial][race][needs:test-hooks]") {
    KernelHub hub;
    const std::string ep = hub.server().endpoint();
    const auto check_part = [&](const Sandbox& box, const std::string& context) {
        INFO(context);
        const json listing = parse_stdout(run_cache(box, "ls", {"--json"}));
        const json& part = listing["repos"][0]["commits"][0]["variants"][0]["part"];
        CHECK(part["files"] == json::array({"libvector_add.so", "metadata.json"}));
        CHECK(part["recorded"] == true);
        check_part_consistent(box, context);
        check_verify_clean(box, context);
        CHECK(fs::is_empty(repo_folder_of(box) / ".kernhub" / "tmp"));
    };
    {
        // One paused with every file linked, before its record: the other
        // runs to the end meanwhile.
        Sandbox box;
        const Pause pause{box.dir.path() / "pause"};
        Background first(box, part_args(box, "load", ep, {"--quiet"}), pause.env("synced"));
        REQUIRE(pause.reached());
        require_ok(box.run(part_args(box, "load", ep, {"--quiet"})), "the second load");
        pause.release();
        require_ok(first.finish(), "the paused load");
        check_part(box, "the paused load and the other");
    }
    for (int round = 0; round < 6; ++round) {
        Sandbox box;
        Background first(box, part_args(box, "load", ep, {"--quiet"}));
        require_ok(box.run(part_args(box, "load", ep, {"--quiet"})), "the second load");
        require_ok(first.finish(), "the first load");
        check_part(box, "round " + std::to_string(round));
    }
}

TEST_CASE("a load whose empty partial folders are removed under it makes them again",
          "[cli][partial][needs:test-hooks]") {
    KernelHub hub;
    Sandbox box;
    const std::string ep = hub.server().endpoint();
    const Pause pause{box.dir.path() / "pause"};
    // Paused between making the folders of its first link and renaming the
    // link into them, as where a removal runs without working locks: the
    // folders it made, still empty, are removed as a removal would, by rmdir
    // from the deepest up. One connection: no other file is linked meanwhile.
    EnvChanges env = pause.env("folder-made:1");
    env["KERNHUB_MAX_CONNECTIONS"] = "1";
    Background load(box, part_args(box, "load", ep, {"--quiet"}), env);
    REQUIRE(pause.reached());
    const fs::path area = partial_root(box);
    std::vector<fs::path> folders;
    for (fs::recursive_directory_iterator it(area), end; it != end; ++it) folders.push_back(it->path());
    std::sort(folders.rbegin(), folders.rend());
    for (const fs::path& folder : folders) REQUIRE(::rmdir(folder.c_str()) == 0);
    REQUIRE(::rmdir(area.c_str()) == 0);
    pause.release();
    require_ok(load.finish(), "the load");
    check_part_consistent(box, "after the load");
    CHECK(fs::exists(part_links(box) / "libvector_add.so"));
    CHECK(fs::exists(part_links(box) / "metadata.json"));
    check_verify_clean(box, "after the load");
}

TEST_CASE("a load killed at any step leaves a consistent cache that verify finds undamaged, and runs again",
          "[cli][partial][crash][durability][needs:test-hooks]") {
    KernelHub hub;
    const std::string ep = hub.server().endpoint();
    int kills = 0;
    for (const char* point : {"verified", "committed", "folder-made", "linked", "synced", "part-recorded", "opening"}) {
        for (int hit = 1; hit <= 3; ++hit) {
            Sandbox box;
            const std::string plan = std::string(point) + ":" + std::to_string(hit);
            INFO(plan);
            ProcessResult crashed = box.run(part_args(box, "load", ep, {"--quiet"}), {{"KERNHUB_TEST_CRASH_AT", plan}});
            if (crashed.exit_code == 0) {
                CHECK(hit > 1);  // reached fewer than `hit` times in one load
                break;
            }
            INFO(describe(crashed));
            REQUIRE(crashed.exit_code == 128 + SIGKILL);
            ++kills;
            check_part_consistent(box, "after the kill");
            check_verify_clean(box, "after the kill");
            require_ok(box.run(part_args(box, "load", ep, {"--quiet"})), "the load after the kill");
            check_part_consistent(box, "after the load that followed");
            require_ok(box.run(part_args(box, "fetch", ep, {"--quiet"})), "the fetch after it");
            check_completed(box, ep, "after the fetch that followed " + plan);
        }
    }
    // Per file (metadata.json and the library): verified, committed, made a
    // folder for and linked twice each; the others once.
    CHECK(kills == 4 * 2 + 3);
}

TEST_CASE("a fetch killed after its complete record leaves a stale part that ls names and prune removes",
          "[cli][partial][crash][needs:test-hooks]") {
    KernelHub hub;
    Sandbox box;
    const std::string ep = hub.server().endpoint();
    require_ok(box.run(part_args(box, "load", ep, {"--quiet"})), "the load");
    ProcessResult crashed = box.run(part_args(box, "fetch", ep, {"--quiet"}), {{"KERNHUB_TEST_CRASH_AT", "recorded"}});
    INFO(describe(crashed));
    REQUIRE(crashed.exit_code == 128 + SIGKILL);
    const json listing = parse_stdout(run_cache(box, "ls", {"--json"}));
    CHECK(listing["repos"][0]["commits"][0]["variants"][0]["part"]["stale"] == true);
    CHECK(run_cache(box, "ls").out.find("a stale part of 2 of 3 files (libvector_add.so, metadata.json)") !=
          std::string::npos);
    check_verify_clean(box, "with the stale part");
    ProcessResult pruned = run_cache(box, "prune", {"--json"});
    require_ok(pruned, "prune");
    std::set<std::string> removed;
    const json report = parse_stdout(pruned);
    for (const auto& path : report["removed"]) removed.insert(path.get<std::string>());
    CHECK(removed.count(part_links(box).string()) == 1);
    CHECK(removed.count((part_links(box).parent_path().parent_path() / (host_cpu_variant() + ".json")).string()) == 1);
    check_completed(box, ep, "after prune");

    // Without prune, the next fetch (warm) removes it.
    Sandbox other;
    require_ok(other.run(part_args(other, "load", ep, {"--quiet"})), "the load");
    REQUIRE(other.run(part_args(other, "fetch", ep, {"--quiet"}), {{"KERNHUB_TEST_CRASH_AT", "recorded"}}).exit_code ==
            128 + SIGKILL);
    REQUIRE(entry_exists_now(partial_root(other)));
    require_ok(other.run(part_args(other, "fetch", ep, {"--quiet"})), "the warm fetch");
    check_completed(other, ep, "after the warm fetch");
}

TEST_CASE("cache verify --repair beside a load paused in its partial area judges nothing there and removes nothing",
          "[cli][partial][race][needs:test-hooks]") {
    KernelHub hub;
    Sandbox box;
    const std::string ep = hub.server().endpoint();
    // A load holding the partial area: its links and record are made, its
    // library not yet opened.
    const Pause pause{box.dir.path() / "pause"};
    Background load(box, part_args(box, "load", ep, {"--json"}), pause.env("opening"));
    REQUIRE(pause.reached());
    const ProcessResult verify = run_cache(box, "verify", {"--repair"});
    INFO(describe(verify));
    CHECK(verify.exit_code == 0);
    CHECK(entry_exists_now(part_links(box) / "libvector_add.so"));
    pause.release();
    const ProcessResult loaded = load.finish();
    INFO(describe(loaded));
    CHECK(loaded.exit_code == 0);
    check_verify_clean(box, "after the load");
}

TEST_CASE("cache verify finds no damage in what a load and a fetch made after it listed blobs/",
          "[cli][partial][race][needs:test-hooks]") {
    KernelHub hub;
    Sandbox box;
    const std::string ep = hub.server().endpoint();
    // An earlier kernel, so that the repo's folders exist when verify scans.
    require_ok(box.run(part_args(box, "load", ep, {"--quiet"})), "the first load");
    fs::remove_all(repo_folder_of(box) / "blobs");
    fs::create_directories(repo_folder_of(box) / "blobs");
    fs::remove_all(partial_root(box));
    // verify lists blobs/ (empty), then waits; a load and a fetch then
    // commit blobs, link them and write their records.
    const Pause pause{box.dir.path() / "pause"};
    Background verify(box, {"cache", "verify", "--cache-dir", box.cache.string()}, [&] {
        EnvChanges env = pause.env("blobs-listed");
        env["KERNHUB_ENDPOINT"] = k_dead_endpoint;
        return env;
    }());
    REQUIRE(pause.reached());
    require_ok(box.run(part_args(box, "load", ep, {"--quiet"})), "the load");
    require_ok(box.run(part_args(box, "fetch", ep, {"--quiet"})), "the fetch");
    pause.release();
    const ProcessResult verified = verify.finish();
    INFO(describe(verified));
    CHECK(verified.exit_code == 0);
    CHECK(verified.out.empty());
}
