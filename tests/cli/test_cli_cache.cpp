// kernhub cache ls | verify [--repair] | prune | path over caches that
// kernhub fetch filled from the loopback hub.
#include <fcntl.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <set>
#include <thread>

#include "cacheadmin/cache_fixture.hpp"
#include "cli/cli_support.hpp"

using namespace kernhub::test;
using namespace kernhub::test::cli;
using kernhub::test::cacheadmin::age;
using kernhub::test::cacheadmin::flip_first_byte;
using kernhub::test::cacheadmin::tree_of;

namespace {

const std::string k_repo = "kernhub-test/vector-add";

json fetch_json(const Sandbox& box, const std::string& ref, const std::string& endpoint) {
    ProcessResult r = box.kh("fetch", ref, endpoint, {"--json"});
    INFO(describe(r));
    REQUIRE(r.exit_code == 0);
    return parse_stdout(r);
}

// `kernhub cache SUB --cache-dir C ARGS...`, never with a usable endpoint.
ProcessResult cache_cmd(const Sandbox& box, const std::string& sub, const std::vector<std::string>& more = {},
                        const EnvChanges& extra = {}) {
    std::vector<std::string> args{"cache", sub, "--cache-dir", box.cache.string()};
    args.insert(args.end(), more.begin(), more.end());
    EnvChanges env{{"KERNHUB_ENDPOINT", k_dead_endpoint}};
    for (const auto& [k, v] : extra) env[k] = v;
    return box.run(args, env);
}

fs::path blob_behind(const fs::path& link) {
    return (link.parent_path() / fs::read_symlink(link)).lexically_normal();
}

// `count` repos named kernels--org--rNNNNN, each holding one blob named
// aaaa… (64 a) with `content`; returns that blob's path in repo `i`.
std::function<fs::path(int)> fill_repos(const Sandbox& box, int count, const std::string& content) {
    auto blob_of = [root = box.cache](int i) {
        char name[32];
        std::snprintf(name, sizeof name, "kernels--org--r%05d", i);
        return root / name / "blobs" / std::string(64, 'a');
    };
    for (int i = 0; i < count; ++i) {
        fs::create_directories(blob_of(i).parent_path());
        write_text(blob_of(i), content);
    }
    return blob_of;
}

}  // namespace

TEST_CASE("cache ls lists what fetch cached: repos, refs, commits, variants and sizes", "[cli][cache]") {
    KernelHub hub;
    Sandbox box;
    const std::string ep = hub.server().endpoint();
    json main = fetch_json(box, "vector-add", ep);
    json v2 = fetch_json(box, "vector-add-v2", ep);
    fetch_json(box, "model-kernel", ep);

    ProcessResult r = cache_cmd(box, "ls", {"--json"});
    INFO(describe(r));
    REQUIRE(r.exit_code == 0);
    json ls = parse_stdout(r);
    CHECK(keys_of(ls) == std::vector<std::string>{"leftover_bytes", "leftovers", "repos", "root", "size"});
    CHECK(ls["leftovers"] == 0);
    CHECK(ls["root"] == box.cache.string());
    REQUIRE(ls["repos"].size() == 2);
    json kernel = ls["repos"][0];  // kernels--... sorts before models--...
    json model = ls["repos"][1];
    CHECK(kernel["repo_id"] == k_repo);
    CHECK(kernel["folder"] == (box.cache / k_vector_add_folder).string());
    CHECK(kernel["refs"] == json({{"main", main["commit"]}, {"v2", v2["commit"]}}));
    CHECK(kernel["partials"] == 0);
    REQUIRE(kernel["commits"].size() == 2);
    std::uint64_t variant_bytes = 0;
    for (const json& commit : kernel["commits"]) {
        const bool is_main = commit["commit"] == main["commit"];
        CHECK(commit["refs"] == json::array({is_main ? "main" : "v2"}));
        REQUIRE(commit["variants"].size() == 1);
        const json& variant = commit["variants"][0];
        CHECK(keys_of(variant) == std::vector<std::string>{"files", "name", "part", "recorded", "size"});
        CHECK(variant["name"] == host_cpu_variant());
        CHECK(variant["recorded"] == true);
        CHECK(variant["part"].is_null());  // a fetch holds no variant in part
        CHECK(commit["snapshot"] == true);
        const json& fetched = is_main ? main : v2;
        CHECK(variant["files"] == fetched["files"].size());
        std::uint64_t expected = 0;
        for (const auto& f : fetched["files"]) expected += f["size"].get<std::uint64_t>();
        CHECK(variant["size"] == expected);
        variant_bytes += expected;
    }
    // Blobs shared by both commits are stored once.
    CHECK(kernel["size"].get<std::uint64_t>() <= variant_bytes);
    CHECK(kernel["blobs"].get<std::size_t>() >= 2);
    CHECK(model["repo_type"] == "model");
    CHECK(model["repo_id"] == "kernhub-test/model-kernel");
    CHECK(ls["size"] == kernel["size"].get<std::uint64_t>() + model["size"].get<std::uint64_t>());

    ProcessResult text = cache_cmd(box, "ls");
    INFO(describe(text));
    CHECK(text.exit_code == 0);
    CHECK(text.out.find("kernel " + k_repo) != std::string::npos);
    CHECK(text.out.find("ref main -> " + main["commit"].get<std::string>().substr(0, 12)) != std::string::npos);
    CHECK(text.out.find(host_cpu_variant()) != std::string::npos);
    CHECK(text.out.find("model kernhub-test/model-kernel") != std::string::npos);
}

TEST_CASE("cache path prints the root, or offline the variant directory fetch chose, and exits 6 when not cached",
          "[cli][cache]") {
    KernelHub hub;
    Sandbox box;
    ProcessResult root = cache_cmd(box, "path");
    CHECK(root.exit_code == 0);
    CHECK(root.out == box.cache.string() + "\n");

    json main = fetch_json(box, "vector-add", hub.server().endpoint());
    const auto before = tree_of(box.cache);
    hub.server().reset();
    const std::vector<std::string> reg{"--registry", box.registry.string()};
    auto with_reg = [&](std::vector<std::string> more) {
        more.insert(more.end(), reg.begin(), reg.end());
        return more;
    };
    ProcessResult path = cache_cmd(box, "path", with_reg({"vector-add"}));
    INFO(describe(path));
    CHECK(path.exit_code == 0);
    CHECK(path.out == main["path"].get<std::string>() + "\n");
    ProcessResult by_repo = cache_cmd(box, "path", with_reg({k_repo + "@main", "--json"}));
    CHECK(parse_stdout(by_repo) == json({{"path", main["path"]}, {"name", k_repo + "@main"}}));

    check_error(cache_cmd(box, "path", with_reg({"vector-add", "--target", "native-cu128-x86_64-linux"})), 6,
                {"native-cu128-x86_64-linux", "not complete"});
    check_error(cache_cmd(box, "path", with_reg({"vector-add-v2"})), 6, {k_repo + "@v2", "not in the cache"});
    check_error(cache_cmd(box, "path", with_reg({"kernhub-test/never-fetched"})), 6, {"kernhub-test/never-fetched"});
    CHECK(hub.server().stats()["requests"].empty());
    CHECK(tree_of(box.cache) == before);
}

TEST_CASE("cache verify exits 4 naming each damaged file, and --repair then a fetch restore the cache",
          "[cli][cache]") {
    KernelHub hub;
    Sandbox box;
    const std::string ep = hub.server().endpoint();
    json fetched = fetch_json(box, "vector-add", ep);
    ProcessResult clean = cache_cmd(box, "verify");
    INFO(describe(clean));
    CHECK(clean.exit_code == 0);
    CHECK(clean.out.empty());
    CHECK(clean.err.find("no damage") != std::string::npos);

    const fs::path variant = fetched["path"].get<std::string>();
    const fs::path so_blob = blob_behind(variant / "libvector_add.so");
    const fs::path meta_blob = blob_behind(variant / "metadata.json");
    flip_first_byte(so_blob);
    const fs::path copy = box.dir.path() / "metadata-copy.json";
    fs::copy_file(meta_blob, copy);
    fs::remove(meta_blob);
    fs::create_symlink(copy, meta_blob);
    fs::create_symlink("../../../../blobs/" + std::string(64, '0'), variant / "dangling.so");
    fs::create_symlink(copy, variant / "outside.json");
    const std::vector<fs::path> damaged = {so_blob, meta_blob, variant / "dangling.so", variant / "outside.json"};

    ProcessResult bad = cache_cmd(box, "verify");
    check_error(bad, 4, {"damaged files", "--repair", (variant / "dangling.so").string()});
    for (const auto& path : damaged) {
        INFO("expected on stdout: " << path);
        CHECK(bad.out.find(path.string() + ": ") != std::string::npos);
    }
    CHECK(bad.out.find("does not match its name") != std::string::npos);
    CHECK(bad.out.find("is a symbolic link where a blob belongs") != std::string::npos);
    CHECK(bad.out.find("is dangling") != std::string::npos);
    CHECK(bad.out.find("not the relative link into this repo's blobs/") != std::string::npos);

    ProcessResult as_json = cache_cmd(box, "verify", {"--json"});
    CHECK(as_json.exit_code == 4);
    json report = parse_stdout(as_json);
    CHECK(report["ok"] == false);
    CHECK(report["error"]["code"] == 4);
    CHECK(report["error"]["kind"] == "verification failed");
    CHECK(as_json.err.rfind("kernhub: error: ", 0) == 0);
    std::set<std::string> named;
    for (const auto& p : report["problems"]) named.insert(p["path"].get<std::string>());
    CHECK(named.count((variant / "dangling.so").string()) == 1);
    CHECK(named.count((variant / "outside.json").string()) == 1);
    CHECK(named.count((variant / "libvector_add.so").string()) == 1);  // links the damaged blob
    CHECK(named.count((variant / "metadata.json").string()) == 1);

    ProcessResult repair = cache_cmd(box, "verify", {"--repair"});
    INFO(describe(repair));
    CHECK(repair.exit_code == 0);
    CHECK(repair.out.find("(removed)") != std::string::npos);
    CHECK(fs::exists(copy));  // a link's target outside the cache is never touched
    CHECK(cache_cmd(box, "verify").exit_code == 0);

    json again = fetch_json(box, "vector-add", ep);
    CHECK(again["bytes_downloaded"].get<std::uint64_t>() > 0);
    CHECK(cache_cmd(box, "verify").exit_code == 0);
    for (const auto& f : again["files"]) {
        CHECK(sha256_of(variant / f["path"].get<std::string>()) == f["sha256"].get<std::string>());
    }
}

TEST_CASE("cache prune keeps fresh and referenced snapshots and removes the rest, and --dry-run removes nothing",
          "[cli][cache]") {
    KernelHub hub;
    Sandbox box;
    const std::string ep = hub.server().endpoint();
    json main = fetch_json(box, "vector-add", ep);
    json v2 = fetch_json(box, "vector-add-v2", ep);
    const fs::path folder = box.cache / k_vector_add_folder;
    fs::remove(folder / "refs" / "v2");  // commit B is now named by nothing

    ProcessResult fresh = cache_cmd(box, "prune", {"--json"});
    INFO(describe(fresh));
    REQUIRE(fresh.exit_code == 0);
    json kept = parse_stdout(fresh);
    CHECK(kept["removed"].empty());
    CHECK(kept["kept"].size() >= 1);  // B's snapshot: fetched just now

    age(box.cache, 2);
    // A kernels.lock pinning B keeps it.
    const fs::path lock = box.dir.path() / "kernels.lock";
    write_text(lock, R"([{"dependency": {"repo-id": ")" + k_repo + R"(", "version": 2}, "lock": {"commit": ")" +
                         v2["commit"].get<std::string>() + R"("}}])");
    ProcessResult locked = cache_cmd(box, "prune", {"--keep-lock", lock.string(), "--json"});
    INFO(describe(locked));
    CHECK(locked.exit_code == 0);
    CHECK(parse_stdout(locked)["removed"].empty());
    check_error(cache_cmd(box, "prune", {"--keep-lock", (box.dir.path() / "none.lock").string()}), 3, {"none.lock"});

    const auto before = tree_of(box.cache);
    ProcessResult dry = cache_cmd(box, "prune", {"--dry-run"});
    INFO(describe(dry));
    CHECK(dry.exit_code == 0);
    CHECK(tree_of(box.cache) == before);
    const fs::path snapshot_b = folder / "snapshots" / v2["commit"].get<std::string>();
    CHECK(dry.out.find("would remove " + snapshot_b.string() + "\n") != std::string::npos);

    ProcessResult real = cache_cmd(box, "prune", {"--json"});
    INFO(describe(real));
    CHECK(real.exit_code == 0);
    json removed = parse_stdout(real);
    CHECK(removed["dry_run"] == false);
    CHECK(removed["bytes"].get<std::uint64_t>() > 0);
    std::size_t would = 0;
    for (char c : dry.out) would += c == '\n' ? 1 : 0;
    CHECK(removed["removed"].size() == would);
    CHECK_FALSE(fs::exists(snapshot_b));
    CHECK(fs::exists(main["path"].get<std::string>()));
    CHECK(cache_cmd(box, "verify").exit_code == 0);
    ProcessResult offline = box.kh("fetch", "vector-add", k_dead_endpoint, {"--offline", "--json"});
    INFO(describe(offline));
    CHECK(offline.exit_code == 0);
}

TEST_CASE("cache prune removes a stale partial but keeps one whose blob lock another process holds", "[cli][cache]") {
    Sandbox box;
    kernhub::cache::RepoCache repo(box.cache, kernhub::RepoType::kernel, k_repo);
    const std::string free_etag(64, '1');
    const std::string busy_etag(64, '2');
    const fs::path blobs = repo.folder() / "blobs";
    fs::create_directories(blobs);
    write_text(blobs / (free_etag + ".aaaa.incomplete"), "abandoned");
    write_text(blobs / (busy_etag + ".bbbb.incomplete"), "in flight");
    age(box.cache, 2);
    auto lock = repo.lock_blob(busy_etag);  // this test process is the live download

    ProcessResult r = cache_cmd(box, "prune");
    INFO(describe(r));
    CHECK(r.exit_code == 0);
    CHECK(r.out == "removed " + (blobs / (free_etag + ".aaaa.incomplete")).string() + "\n");
    CHECK(fs::exists(blobs / (busy_etag + ".bbbb.incomplete")));
    CHECK(r.err.find("lock is held") != std::string::npos);
}

TEST_CASE("cache prune stops at SIGINT or SIGTERM with 130 or 143 and one line that fits, keeping the rest",
          "[cli][cache]") {
    for (int signo : {SIGINT, SIGTERM}) {
        INFO("signal " << signo);
        Sandbox box;
        // Many repos, each holding one unreferenced blob two hours old: a
        // prune that removes them one repo after another for seconds.
        constexpr int k_repos = 2000;
        const auto blob_of = fill_repos(box, k_repos, "unreferenced");
        age(box.cache, 2);
        // The signal comes once prune is under way: the first repo's blob is gone.
        const Interrupted r = interrupt_when(box, {"cache", "prune", "--cache-dir", box.cache.string()}, signo,
                                             [&] { return !fs::exists(blob_of(0)); });
        REQUIRE(r.started);
        INFO(r.err);
        CHECK(r.exit_code == 128 + signo);
        CHECK_THAT(r.err,
                   Catch::Contains(std::string("kernhub: interrupted by ") + (signo == SIGINT ? "SIGINT" : "SIGTERM") +
                                   "; what was removed is gone (listed above) and everything else is kept"));
        CHECK(r.err.find("partial downloads") == std::string::npos);
        // What went before the stop is listed: at least the first repo's blob.
        CHECK(r.out.find("removed " + blob_of(0).string() + "\n") != std::string::npos);
        // It stopped: the last repos were never reached.
        CHECK(fs::exists(blob_of(k_repos - 1)));

        // A prune run again finishes the job.
        ProcessResult again = cache_cmd(box, "prune", {"--quiet"});
        INFO(describe(again));
        CHECK(again.exit_code == 0);
        CHECK_FALSE(fs::exists(blob_of(k_repos - 1)));
    }
}

TEST_CASE("cache verify --repair stops at SIGINT, lists what it removed and says what is true of a repair",
          "[cli][cache]") {
    Sandbox box;
    // Many repos, each holding one blob whose content does not match its name.
    constexpr int k_repos = 2000;
    const auto blob_of = fill_repos(box, k_repos, "damaged");
    const Interrupted r = interrupt_when(box, {"cache", "verify", "--repair", "--cache-dir", box.cache.string()},
                                         SIGINT, [&] { return !fs::exists(blob_of(0)); });
    REQUIRE(r.started);
    INFO(r.err);
    CHECK(r.exit_code == 130);
    CHECK_THAT(r.err, Catch::Contains("kernhub: interrupted by SIGINT; what was removed is listed above"));
    CHECK_THAT(r.err, Catch::Contains("run kernhub cache verify --repair again to finish"));
    CHECK(r.err.find("partial downloads") == std::string::npos);
    CHECK_THAT(r.out, Catch::Contains(blob_of(0).string() + ": content does not match its name"));
    CHECK_THAT(r.out, Catch::Contains("(removed)"));
    CHECK(fs::exists(blob_of(k_repos - 1)));

    // Run again, the repair finishes.
    ProcessResult again = cache_cmd(box, "verify", {"--repair", "--quiet"});
    INFO(describe(again));
    CHECK(again.exit_code == 0);
    CHECK_FALSE(fs::exists(blob_of(k_repos - 1)));
}

TEST_CASE("a warm fetch marks its snapshot in use, so that a prune keeps it for the grace period", "[cli][cache]") {
    KernelHub hub;
    Sandbox box;
    fetch_json(box, "vector-add", hub.server().endpoint());
    age(box.cache, 2);
    const fs::path snapshots = box.cache / k_vector_add_folder / "snapshots";
    REQUIRE(fs::is_directory(snapshots));
    const fs::path commit = fs::directory_iterator(snapshots)->path();
    const auto before = fs::last_write_time(commit);

    // The warm fetch only reads the snapshot; it marks it in use all the same.
    json warm = fetch_json(box, "vector-add", hub.server().endpoint());
    CHECK(warm["bytes_downloaded"] == 0);
    CHECK(fs::last_write_time(commit) > before + std::chrono::hours(1));
    // Nothing names it now (its ref removed), yet prune keeps it: in use
    // within the last hour.
    fs::remove(box.cache / k_vector_add_folder / "refs" / "main");
    ProcessResult r = cache_cmd(box, "prune");
    INFO(describe(r));
    CHECK(r.exit_code == 0);
    CHECK(fs::is_directory(commit));
    CHECK(r.err.find("last hour") != std::string::npos);
}

TEST_CASE("a .locks that is a file does not stop a warm load", "[cli][cache]") {
    KernelHub hub;
    Sandbox box;
    fetch_json(box, "vector-add", hub.server().endpoint());
    fs::remove_all(box.cache / ".locks");
    write_text(box.cache / ".locks", "not a folder");
    ProcessResult r = box.kh("load", "vector-add", hub.server().endpoint(), {"--offline"});
    INFO(describe(r));
    CHECK(r.exit_code == 0);
}

TEST_CASE("an error about a 4,080-byte cache path keeps its reason: the path is cut, never the errno text",
          "[cli][cache]") {
    Sandbox box;
    // Below a regular file, so creating the cache fails with ENOTDIR; folder
    // names of 200 bytes, each under NAME_MAX, to 4,080 bytes in all.
    const fs::path file = box.dir.path() / "a-file";
    write_text(file, "not a folder");
    std::string path = file.string();
    while (path.size() + 201 <= 4080) path += "/" + std::string(200, 'd');
    path += "/" + std::string(4080 - path.size() - 1, 'e');
    REQUIRE(path.size() == 4080);
    ProcessResult r = box.run({"cache", "import", (box.dir.path() / "missing.tar").string(), "--cache-dir", path});
    INFO(describe(r));
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Catch::Contains("bytes cut)"));
    CHECK_THAT(r.err, Catch::EndsWith("eee: Not a directory; check permissions\n"));
    CHECK(r.err.size() < 4400);
}

TEST_CASE("cache prune --partials removes fresh partial downloads at once, but never one a live download holds",
          "[cli][cache]") {
    Sandbox box;
    kernhub::cache::RepoCache repo(box.cache, kernhub::RepoType::kernel, k_repo);
    const std::string free_etag(64, '3');
    const std::string busy_etag(64, '4');
    const fs::path blobs = repo.folder() / "blobs";
    fs::create_directories(blobs);
    // Fresh: what a fetch that hit a full disk a minute ago left.
    write_text(blobs / (free_etag + ".aaaa.incomplete"), std::string(1 << 20, 'x'));
    write_text(blobs / (busy_etag + ".bbbb.incomplete"), "in flight");
    auto lock = repo.lock_blob(busy_etag);  // this test process is the live download

    ProcessResult plain = cache_cmd(box, "prune");
    CHECK(plain.exit_code == 0);
    CHECK(fs::exists(blobs / (free_etag + ".aaaa.incomplete")));  // within the grace period
    ProcessResult r = cache_cmd(box, "prune", {"--partials"});
    INFO(describe(r));
    CHECK(r.exit_code == 0);
    CHECK(r.out == "removed " + (blobs / (free_etag + ".aaaa.incomplete")).string() + "\n");
    CHECK(fs::exists(blobs / (busy_etag + ".bbbb.incomplete")));
    CHECK(r.err.find("lock is held") != std::string::npos);
}
