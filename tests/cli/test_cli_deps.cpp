// Kernel dependencies ("kernel-depends" in a variant's metadata.json) and
// the kernels release a variant needs ("kernels-minver"), through the CLI:
// fetch, load, lock, prewarm, mirror and cache export take the tree along;
// a cycle, a deep chain and malformed metadata are exit 4; a dependency
// without the --target build fails as a kernel would; kernels-minver is
// exit 7 on this machine and a warning for another.
#include <dlfcn.h>

#include "cli_support.hpp"

using namespace kernhub::test;
using namespace kernhub::test::cli;

namespace {

const std::string k_cuda = "native-cu128-x86_64-linux";

fs::path fixture(const std::string& name) {
    return fs::path(KERNHUB_FIXTURE_DIR) / ("libkh_dep_" + name + ".so");
}

json depends_on(std::initializer_list<std::string> repos) {
    json list = json::array();
    for (const std::string& repo : repos) list.push_back({{"repo-id", repo}, {"version", 1}});
    return list;
}

// One kernel repo with v1 = main: the host's CPU variant holding `files`
// (relpath -> file spec), plus `extra` merged into each generated
// metadata.json.
json repo(const std::string& id, json files, const json& extra = json::object()) {
    json commit = {{"message", "v1"}, {"branches", {"main", "v1"}}, {"metadata", true}, {"files", std::move(files)}};
    if (!extra.empty()) commit["metadata_extra"] = extra;
    return {{"repo_id", id}, {"type", "kernel"}, {"commits", json::array({commit})}};
}

json so_file(const std::string& name) {
    return {{"path", fixture(name).string()}, {"lfs", true}};
}

// deptest/top -> mid, leaf; mid -> leaf (each a real .so from
// tests/fixtures/dep_chain.c); top and mid also have a CUDA variant that
// leaf lacks. Cycles, a chain of 17, kernels-minver and malformed metadata.
json deps_hub_spec() {
    const std::string cpu = "build/" + host_cpu_variant() + "/";
    const std::string cuda = "build/" + k_cuda + "/";
    json repos = json::array();
    repos.push_back(repo("deptest/leaf", {{cpu + "libkh_dep_leaf.so", so_file("leaf")}}));
    repos.push_back(repo("deptest/mid",
                         {{cpu + "libkh_dep_mid.so", so_file("mid")}, {cuda + "libkern.so", {{"text", "cuda mid"}}}},
                         {{"kernel-depends", depends_on({"deptest/leaf"})}}));
    repos.push_back(repo("deptest/top",
                         {{cpu + "libkh_dep_top.so", so_file("top")}, {cuda + "libkern.so", {{"text", "cuda top"}}}},
                         {{"kernel-depends", depends_on({"deptest/mid", "deptest/leaf"})}}));
    repos.push_back(repo("deptest/cyc-a", {{cpu + "NOTES.txt", {{"text", "a"}}}},
                         {{"kernel-depends", depends_on({"deptest/cyc-b"})}}));
    repos.push_back(repo("deptest/cyc-b", {{cpu + "NOTES.txt", {{"text", "b"}}}},
                         {{"kernel-depends", depends_on({"deptest/cyc-a"})}}));
    for (int i = 0; i <= 16; ++i) {
        json extra = json::object();
        if (i < 16) extra["kernel-depends"] = depends_on({"deptest/chain-" + std::to_string(i + 1)});
        repos.push_back(
            repo("deptest/chain-" + std::to_string(i), {{cpu + "NOTES.txt", {{"text", std::to_string(i)}}}}, extra));
    }
    repos.push_back(repo("deptest/newer", {{cpu + "libkh_good.so", {{"path", good_fixture_so().string()}}}},
                         {{"kernels-minver", "99.0.0"}}));
    repos.push_back(repo("deptest/needs-newer", {{cpu + "NOTES.txt", {{"text", "n"}}}},
                         {{"kernel-depends", depends_on({"deptest/newer"})}}));
    repos.push_back(repo("deptest/pyonly", {{"build/torch-universal/pyonly/__init__.py", {{"text", "X = 1\n"}}}}));
    repos.push_back(repo("deptest/needs-py", {{cpu + "libkh_good.so", {{"path", good_fixture_so().string()}}}},
                         {{"kernel-depends", depends_on({"deptest/pyonly"})}}));
    // Two versions of one repo in one tree (twin v1 and v2, each needed
    // by one side), and metadata over k_max_metadata_bytes.
    json twin = repo("deptest/twin", {{cpu + "NOTES.txt", {{"text", "twin v1"}}}});
    twin["commits"][0]["branches"] = {"v1"};
    twin["commits"].push_back({{"message", "v2"},
                               {"branches", {"main", "v2"}},
                               {"metadata", true},
                               {"files", {{cpu + "NOTES.txt", {{"text", "twin v2"}}}}}});
    repos.push_back(twin);
    repos.push_back(repo("deptest/wants-v1", {{cpu + "NOTES.txt", {{"text", "w1"}}}},
                         {{"kernel-depends", json::array({{{"repo-id", "deptest/twin"}, {"version", 1}}})}}));
    repos.push_back(repo("deptest/wants-v2", {{cpu + "NOTES.txt", {{"text", "w2"}}}},
                         {{"kernel-depends", json::array({{{"repo-id", "deptest/twin"}, {"version", 2}}})}}));
    repos.push_back(repo("deptest/both", {{cpu + "libkh_good.so", {{"path", good_fixture_so().string()}}}},
                         {{"kernel-depends", depends_on({"deptest/wants-v1", "deptest/wants-v2"})}}));
    // One commit reached under two names: leaf's main and v1 are one commit.
    repos.push_back(repo("deptest/via-main", {{cpu + "NOTES.txt", {{"text", "m"}}}},
                         {{"kernel-depends", json::array({{{"repo-id", "deptest/leaf"}, {"revision", "main"}}})}}));
    repos.push_back(repo("deptest/via-v1", {{cpu + "NOTES.txt", {{"text", "1"}}}},
                         {{"kernel-depends", depends_on({"deptest/leaf"})}}));
    repos.push_back(repo("deptest/two-names", {{cpu + "libkh_good.so", {{"path", good_fixture_so().string()}}}},
                         {{"kernel-depends", depends_on({"deptest/via-main", "deptest/via-v1"})}}));
    repos.push_back(repo("deptest/huge-metadata", {{cpu + "NOTES.txt", {{"text", "h"}}}},
                         {{"pad", std::string((4u << 20) + 1, 'x')}}));
    repos.push_back(repo("deptest/bad-depends", {{cpu + "NOTES.txt", {{"text", "x"}}}},
                         {{"kernel-depends", json::array({{{"repo-id", "deptest/leaf"}}})}}));
    return {{"repos", repos}};
}

struct DepsHub : SpecHub {
    DepsHub() : SpecHub(deps_hub_spec()) {}
    std::string file_endpoint() const { return "file://" + dir.string(); }
    ProcessResult kh(const std::string& command, const std::string& ref, std::vector<std::string> more = {},
                     const fs::path& cache = {}) const {
        std::vector<std::string> args{command,       ref,
                                      "--endpoint",  server->endpoint(),
                                      "--cache-dir", (cache.empty() ? box.cache : cache).string()};
        args.insert(args.end(), more.begin(), more.end());
        return box.run(args);
    }
};

fs::path snapshot(const fs::path& cache, const std::string& repo_id, const std::string& commit) {
    std::string folder = "kernels--" + repo_id;
    folder.replace(folder.find('/'), 1, "--");
    return cache / folder / "snapshots" / commit;
}

}  // namespace

TEST_CASE("fetch takes the kernel-depends tree along: each kernel once, every dependency before its dependents") {
    DepsHub hub;
    ProcessResult r = hub.kh("fetch", "deptest/top@v1", {"--json", "--quiet"});
    json out = parse_stdout(r);
    REQUIRE(r.exit_code == 0);
    CHECK(out["repo_id"] == "deptest/top");
    REQUIRE(out["dependencies"].size() == 2);
    // top names mid then leaf, and mid needs leaf: leaf comes first, once.
    CHECK(out["dependencies"][0]["repo_id"] == "deptest/leaf");
    CHECK(out["dependencies"][1]["repo_id"] == "deptest/mid");
    for (const json& dep : out["dependencies"]) {
        CHECK(dep["revision"] == "v1");
        CHECK(dep["variant"] == host_cpu_variant());
        CHECK(dep["commit"] == hub.commit_of(dep["repo_id"].get<std::string>()));
        CHECK(fs::is_directory(dep["path"].get<std::string>()));
        CHECK(fs::is_regular_file(snapshot(hub.box.cache, dep["repo_id"], dep["commit"]) / "build" /
                                  host_cpu_variant() / "metadata.json"));
    }
    // The variant of each kernel this host needs, and nothing else.
    CHECK_FALSE(tree_has_name(hub.box.cache, "libkern.so"));
    // The organisation's overview once (the repos are ad-hoc), then for each
    // of the three kernels: revision, listing, metadata.json and the .so
    // (the hub's 302, then the CDN).
    CHECK(out["requests"] == 1 + 3 * 5);
    CHECK(hub.server->count_requests("/overview") == 1);

    // Warm: each of the three kernels asks its revision again, nothing more.
    hub.server->reset();
    ProcessResult warm = hub.kh("fetch", "deptest/top@v1", {});
    INFO(describe(warm));
    REQUIRE(warm.exit_code == 0);
    CHECK(hub.server->count_requests("/resolve/") == 0);
    CHECK(hub.server->count_requests("/revision/v1") == 3);
    CHECK(warm.err.find("depends on deptest/leaf@v1") != std::string::npos);
    CHECK(warm.err.find("depends on deptest/mid@v1") != std::string::npos);
}

TEST_CASE("load opens each dependency's library first, so the symbols the kernel calls are there") {
    // The control: top alone does not load, its calls into mid and leaf unresolved.
    void* alone = ::dlopen(fixture("top").c_str(), RTLD_NOW | RTLD_LOCAL);
    const char* why = ::dlerror();
    REQUIRE(alone == nullptr);
    REQUIRE(why != nullptr);
    CHECK(std::string(why).find("kh_dep_") != std::string::npos);

    DepsHub hub;
    ProcessResult r = hub.kh("load", "deptest/top@v1", {"--symbol", "kh_dep_top", "--json", "--quiet"});
    json out = parse_stdout(r);
    REQUIRE(r.exit_code == 0);
    CHECK(out["kind"] == "function");
    REQUIRE(out["dependency_files"].size() == 2);
    CHECK(fs::path(out["dependency_files"][0].get<std::string>()).filename() == "libkh_dep_leaf.so");
    CHECK(fs::path(out["dependency_files"][1].get<std::string>()).filename() == "libkh_dep_mid.so");

    // The text output names what was opened first.
    ProcessResult text = hub.kh("load", "deptest/top@v1", {"--symbol", "kh_dep_top"});
    INFO(describe(text));
    REQUIRE(text.exit_code == 0);
    CHECK(text.err.find("opened first: ") != std::string::npos);
}

TEST_CASE("a dependency holding nothing kernhub loads (pure Python) is fetched and opens nothing") {
    DepsHub hub;
    ProcessResult r = hub.kh("load", "deptest/needs-py@v1", {"--symbol", "kh_fixture_id", "--json", "--quiet"});
    json out = parse_stdout(r);
    REQUIRE(r.exit_code == 0);
    REQUIRE(out["dependencies"].size() == 1);
    CHECK(out["dependencies"][0]["variant"] == "torch-universal");
    CHECK(out["dependency_files"] == json::array());
}

TEST_CASE("a tree holding one repo at two versions fetches, and its load is exit 7 naming both") {
    DepsHub hub;
    ProcessResult fetched = hub.kh("fetch", "deptest/both@v1", {"--json", "--quiet"});
    json out = parse_stdout(fetched);
    REQUIRE(fetched.exit_code == 0);
    CHECK(out["dependencies"].size() == 4);
    // Their libraries would share one process's symbols: refused before any is opened.
    check_error(hub.kh("load", "deptest/both@v1", {"--symbol", "kh_fixture_id", "--quiet"}), 7,
                {"deptest/twin twice, at v1 (", ") and at v2 (", "agree on one version"});
}

TEST_CASE("one commit reached under two revision names is one dependency, listed once with both names") {
    DepsHub hub;
    const ProcessResult fetched = hub.kh("fetch", "deptest/two-names@v1", {"--json", "--quiet"});
    INFO(describe(fetched));
    REQUIRE(fetched.exit_code == 0);
    const json deps = parse_stdout(fetched)["dependencies"];
    std::vector<std::string> repos;
    for (const json& dep : deps) repos.push_back(dep["repo_id"]);
    CHECK(repos == std::vector<std::string>{"deptest/leaf", "deptest/via-main", "deptest/via-v1"});
    CHECK(deps[0]["revision"] == "main");
    CHECK(deps[0]["revisions"] == json::array({"main", "v1"}));
    CHECK(deps[0]["commit"] == hub.commit_of("deptest/leaf"));
    CHECK(deps[1]["revisions"] == json::array({"v1"}));
    // Loaded once: leaf's library is opened before the rest, and only once.
    const ProcessResult loaded =
        hub.kh("load", "deptest/two-names@v1", {"--symbol", "kh_fixture_id", "--json", "--quiet"});
    INFO(describe(loaded));
    REQUIRE(loaded.exit_code == 0);
    const json files = parse_stdout(loaded)["dependency_files"];
    REQUIRE(files.size() == 1);
    CHECK(fs::path(files[0].get<std::string>()).filename() == "libkh_dep_leaf.so");
    // Two commits of one repo stay refused (wants-v1 and wants-v2 above).
    check_error(hub.kh("load", "deptest/both@v1", {"--symbol", "kh_fixture_id", "--quiet"}), 7,
                {"deptest/twin twice", "agree on one version"});
}

TEST_CASE("a metadata.json over k_max_metadata_bytes is exit 4 naming the limit, before the variant downloads") {
    DepsHub hub;
    check_error(hub.kh("fetch", "deptest/huge-metadata@v1", {"--quiet"}), 4,
                {"deptest/huge-metadata", "k_max_metadata_bytes (4194304 bytes)"});
    CHECK(hub.server->count_requests("NOTES.txt") == 0);
}

TEST_CASE("cache prune keeps a dependency pinned by commit id, which has no ref of its own") {
    DepsHub hub;
    // A second hub: the same repos and one more, pinning leaf by its commit.
    json spec = deps_hub_spec();
    spec["repos"].push_back(repo("deptest/pins-leaf", {{"build/" + host_cpu_variant() + "/NOTES.txt", {{"text", "p"}}}},
                                 {{"kernel-depends", json::array({{{"repo-id", "deptest/leaf"},
                                                                   {"revision", hub.commit_of("deptest/leaf")}}})}}));
    const fs::path dir = hub.box.dir.path() / "hub2";
    make_hub(spec, dir);
    const std::vector<std::string> where{"--endpoint", "file://" + dir.string(), "--cache-dir", hub.box.cache.string(),
                                         "--quiet"};
    auto run = [&](std::vector<std::string> args) {
        args.insert(args.end(), where.begin(), where.end());
        return hub.box.run(args);
    };
    REQUIRE(run({"fetch", "deptest/pins-leaf@v1"}).exit_code == 0);
    // Past prune's grace period.
    REQUIRE(run_process({"find", hub.box.cache.string(), "-exec", "touch", "-h", "-d", "3 hours ago", "{}", "+"})
                .exit_code == 0);
    ProcessResult pruned = hub.box.run({"cache", "prune", "--cache-dir", hub.box.cache.string(), "--quiet"});
    INFO(describe(pruned));
    REQUIRE(pruned.exit_code == 0);
    CHECK(fs::is_directory(snapshot(hub.box.cache, "deptest/leaf", hub.commit_of("deptest/leaf"))));
    ProcessResult offline = run({"fetch", "deptest/pins-leaf@v1", "--offline"});
    INFO(describe(offline));
    CHECK(offline.exit_code == 0);
}

TEST_CASE("a cycle in kernel-depends is exit 4 naming the chain") {
    DepsHub hub;
    check_error(hub.kh("fetch", "deptest/cyc-a@v1", {"--quiet"}), 4,
                {"cycle", "deptest/cyc-a@v1 -> deptest/cyc-b@v1 -> deptest/cyc-a@v1"});
}

TEST_CASE("a chain of kernel-depends deeper than k_max_dependency_depth is exit 4 naming the limit and the chain") {
    DepsHub hub;
    ProcessResult r = hub.box.run({"fetch", "deptest/chain-0@v1", "--endpoint", hub.file_endpoint(), "--cache-dir",
                                   hub.box.cache.string(), "--quiet"});
    check_error(r, 4,
                {"k_max_dependency_depth (16)", "deptest/chain-0@v1 -> deptest/chain-1@v1", "deptest/chain-16@v1"});
}

TEST_CASE("a malformed kernel-depends entry is exit 4 naming the repo, the entry and the field") {
    DepsHub hub;
    check_error(hub.kh("fetch", "deptest/bad-depends@v1", {"--quiet"}), 4,
                {"deptest/bad-depends", "\"kernel-depends\" entry 1", "exactly one of \"version\" and \"revision\""});
}

TEST_CASE("a described machine (--host) selects each dependency as it selects the kernel") {
    DepsHub hub;
    // A CUDA machine: top and mid have a native CUDA build, leaf only the CPU one.
    ProcessResult r =
        hub.kh("fetch", "deptest/top@v1", {"--host", "cpu=x86_64,os=linux,cuda=12.8", "--json", "--quiet"});
    json out = parse_stdout(r);
    REQUIRE(r.exit_code == 0);
    CHECK(out["variant"] == k_cuda);
    REQUIRE(out["dependencies"].size() == 2);
    CHECK(out["dependencies"][0]["variant"] == host_cpu_variant());  // leaf: the CPU build is what fits
    CHECK(out["dependencies"][1]["variant"] == k_cuda);
}

TEST_CASE("a dependency without the --target build fails as a kernel without it would, naming the dependency") {
    DepsHub hub;
    ProcessResult alone = hub.kh("fetch", "deptest/leaf@v1", {"--target", k_cuda});
    ProcessResult tree = hub.kh("fetch", "deptest/top@v1", {"--target", k_cuda, "--quiet"});
    INFO(describe(alone));
    CHECK(alone.exit_code == 3);
    check_error(tree, alone.exit_code, {"deptest/leaf", k_cuda});
}

TEST_CASE(
    "kernels-minver newer than the kernels kernhub follows: exit 7 here before the library is committed, a "
    "warning for --target") {
    DepsHub hub;
    check_error(hub.kh("fetch", "deptest/newer@v1", {"--quiet"}), 7,
                {"deptest/newer", "kernels>=99.0.0", "kernels 0.19.1"});
    // The library may have started beside metadata.json, once; it was
    // never committed, and the refusal removed its partial too.
    CHECK_FALSE(tree_has_name(hub.box.cache, "libkh_good.so"));
    CHECK(hub.server->count_requests("libkh_good.so") <= 1);
    CHECK_FALSE(tree_has_name(hub.box.cache, ".incomplete"));
    check_error(hub.kh("load", "deptest/newer@v1", {"--symbol", "kh_fixture_id", "--quiet"}), 7, {"kernels>=99.0.0"});
    // Through a dependency, the same.
    check_error(hub.kh("fetch", "deptest/needs-newer@v1", {"--quiet"}), 7, {"deptest/newer", "kernels>=99.0.0"});

    // For another machine: fetched, with one warning naming both versions.
    ProcessResult other = hub.kh("fetch", "deptest/newer@v1", {"--target", host_cpu_variant()});
    INFO(describe(other));
    CHECK(other.exit_code == 0);
    CHECK(other.err.find("warning: ") != std::string::npos);
    CHECK(other.err.find("kernels>=99.0.0") != std::string::npos);
    CHECK(other.err.find("0.19.1") != std::string::npos);
    CHECK(tree_has_name(hub.box.cache, "libkh_good.so"));
    ProcessResult described = hub.kh("fetch", "deptest/newer@v1", {"--host", "cpu=x86_64,os=linux"});
    INFO(describe(described));
    CHECK(described.exit_code == 0);
    CHECK(described.err.find("warning: ") != std::string::npos);
    CHECK(described.err.find("kernels>=99.0.0") != std::string::npos);
}

TEST_CASE(
    "prewarm from a lock refuses a kernels-minver newer than kernhub follows for this machine, warns for a "
    "target") {
    DepsHub hub;
    const fs::path project = hub.box.dir.path() / "project";
    fs::create_directories(project);
    write_text(
        project / "kernhub.json",
        json({{"format", 1},
              {"kernels", {{"newer", {{"repo_id", "deptest/newer"}, {"version", 1}, {"symbol", "kh_fixture_id"}}}}}})
            .dump());
    auto run = [&](const std::string& command, std::vector<std::string> more) {
        std::vector<std::string> args{command,          "--endpoint", hub.server->endpoint(), "--project",
                                      project.string(), "--quiet",    "--cache-dir"};
        args.insert(args.end(), more.begin(), more.end());
        return hub.box.run(args);
    };
    // Locking is for any machine: it pins the variant.
    ProcessResult locked = run("lock", {hub.box.cache.string()});
    INFO(describe(locked));
    REQUIRE(locked.exit_code == 0);
    const fs::path image = hub.box.dir.path() / "image";
    check_error(run("prewarm", {image.string()}), 7, {"deptest/newer", "kernels>=99.0.0", "0.19.1"});
    CHECK_FALSE(tree_has_name(image, "libkh_good.so"));
    ProcessResult target = run("prewarm", {image.string(), "--target", host_cpu_variant()});
    INFO(describe(target));
    CHECK(target.exit_code == 0);
    CHECK(tree_has_name(image, "libkh_good.so"));
}

TEST_CASE("lock records the tree as entries of their own, lock --check checks it, and prewarm fetches all of it") {
    DepsHub hub;
    const fs::path project = hub.box.dir.path() / "project";
    fs::create_directories(project);
    write_text(project / "kernhub.json",
               json({{"format", 1},
                     {"kernels", {{"top", {{"repo_id", "deptest/top"}, {"version", 1}, {"symbol", "kh_dep_top"}}}}}})
                   .dump());
    const std::vector<std::string> common{"--endpoint", hub.server->endpoint(), "--project", project.string(),
                                          "--quiet"};
    auto run = [&](const std::string& command, std::vector<std::string> more, const fs::path& cache) {
        std::vector<std::string> args{command, "--cache-dir", cache.string()};
        args.insert(args.end(), common.begin(), common.end());
        args.insert(args.end(), more.begin(), more.end());
        return hub.box.run(args);
    };
    ProcessResult locked = run("lock", {}, hub.box.cache);
    INFO(describe(locked));
    REQUIRE(locked.exit_code == 0);
    const json lock = json::parse(read_text(project / "kernhub.lock"));
    CHECK(keys_of(lock["kernels"]) == std::vector<std::string>{"deptest/leaf@v1", "deptest/mid@v1", "top"});
    CHECK(lock["kernels"]["top"]["kernel_depends"] == json({"deptest/leaf@v1", "deptest/mid@v1"}));
    CHECK(lock["kernels"]["deptest/mid@v1"]["kernel_depends"] == json({"deptest/leaf@v1"}));
    CHECK_FALSE(lock["kernels"]["deptest/leaf@v1"].contains("kernel_depends"));
    CHECK(lock["kernels"]["deptest/leaf@v1"]["commit"] == hub.commit_of("deptest/leaf"));
    CHECK(lock["kernels"]["deptest/leaf@v1"]["revision"] == "v1");
    CHECK(lock["kernels"]["deptest/leaf@v1"]["variants"].contains(host_cpu_variant()));

    // Locked for the CUDA target too: leaf has no such build, which its
    // entry records as a kernel's would.
    ProcessResult targets =
        run("lock", {"--update", "--target", host_cpu_variant(), "--target", k_cuda}, hub.box.cache);
    INFO(describe(targets));
    REQUIRE(targets.exit_code == 0);
    const json both = json::parse(read_text(project / "kernhub.lock"));
    CHECK(both["kernels"]["deptest/leaf@v1"]["missing_targets"] == json({k_cuda}));
    CHECK(keys_of(both["kernels"]["deptest/mid@v1"]["variants"]).size() == 2);
    write_text(project / "kernhub.lock", lock.dump(2) + "\n");

    // --check in a fresh cache (kept pins, no metadata.json cached yet).
    ProcessResult check = run("lock", {"--check"}, hub.box.dir.path() / "fresh");
    INFO(describe(check));
    CHECK(check.exit_code == 0);

    // A lock that lost a dependency's entry is out of date (and its
    // kernel_depends no longer names one of its entries: refused as such).
    json trimmed = lock;
    trimmed["kernels"].erase("deptest/leaf@v1");
    trimmed["kernels"]["top"]["kernel_depends"] = json({"deptest/mid@v1"});
    trimmed["kernels"]["deptest/mid@v1"].erase("kernel_depends");
    write_text(project / "kernhub.lock", trimmed.dump(2) + "\n");
    ProcessResult stale = run("lock", {"--check"}, hub.box.cache);
    INFO(describe(stale));
    CHECK(stale.exit_code == 8);
    trimmed["kernels"]["deptest/mid@v1"]["kernel_depends"] = json({"deptest/leaf@v1"});
    write_text(project / "kernhub.lock", trimmed.dump(2) + "\n");
    check_error(run("lock", {"--check"}, hub.box.cache), 2, {"\"deptest/leaf@v1\"", "not a kernel of this lock"});
    write_text(project / "kernhub.lock", lock.dump(2) + "\n");

    // Prewarm an image's cache from the lock, then load offline from it.
    const fs::path image = hub.box.dir.path() / "image";
    ProcessResult prewarm = run("prewarm", {}, image);
    INFO(describe(prewarm));
    REQUIRE(prewarm.exit_code == 0);
    for (const std::string repo_id : {"deptest/top", "deptest/mid", "deptest/leaf"}) {
        CHECK(fs::is_directory(snapshot(image, repo_id, hub.commit_of(repo_id)) / "build" / host_cpu_variant()));
    }
    ProcessResult offline = hub.box.run({"load", "top", "--registry", (project / "kernhub.json").string(),
                                         "--cache-dir", image.string(), "--offline", "--json", "--quiet"});
    json loaded = parse_stdout(offline);
    CHECK(offline.exit_code == 0);
    CHECK(loaded["dependency_files"].size() == 2);
}

TEST_CASE("mirror and cache export take the tree along: a cache filled from either loads the kernel offline") {
    DepsHub hub;
    const fs::path tree = hub.box.dir.path() / "mirror";
    ProcessResult mirrored =
        hub.box.run({"mirror", "deptest/top@v1", "--to", tree.string(), "--target", host_cpu_variant(), "--endpoint",
                     hub.server->endpoint(), "--cache-dir", hub.box.cache.string(), "--json", "--quiet"});
    json report = parse_stdout(mirrored);
    REQUIRE(mirrored.exit_code == 0);
    std::vector<std::string> repos;
    for (const json& kernel : report["kernels"]) repos.push_back(kernel["repo_id"]);
    std::sort(repos.begin(), repos.end());
    CHECK(repos == std::vector<std::string>{"deptest/leaf", "deptest/mid", "deptest/top"});

    // A cache filled from the mirror alone.
    const fs::path from_mirror = hub.box.dir.path() / "from-mirror";
    ProcessResult fetched = hub.box.run({"load", "deptest/top@v1", "--symbol", "kh_dep_top", "--endpoint",
                                         "file://" + tree.string(), "--cache-dir", from_mirror.string(), "--quiet"});
    INFO(describe(fetched));
    CHECK(fetched.exit_code == 0);

    // Export names only top; the archive holds the tree.
    const fs::path archive = hub.box.dir.path() / "tree.tar";
    ProcessResult exported = hub.box.run({"cache", "export", "deptest/top@v1", "--to", archive.string(), "--cache-dir",
                                          from_mirror.string(), "--quiet"});
    INFO(describe(exported));
    REQUIRE(exported.exit_code == 0);
    const fs::path imported = hub.box.dir.path() / "imported";
    ProcessResult in = hub.box.run({"cache", "import", archive.string(), "--cache-dir", imported.string(), "--quiet"});
    INFO(describe(in));
    REQUIRE(in.exit_code == 0);
    ProcessResult offline = hub.box.run(
        {"load", "deptest/top@v1", "--symbol", "kh_dep_top", "--cache-dir", imported.string(), "--offline", "--quiet"});
    INFO(describe(offline));
    CHECK(offline.exit_code == 0);
}
