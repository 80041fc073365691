// UNSTABLE_KERNELS_ALL_LATEST, as kernels 0.19.1 reads it: 1, on, yes or
// true in any case make fetch, load and info take every kernel (its
// dependencies too) at its highest vN branch, whatever version or revision
// was asked for, with one warning per kernel; a repo without numbered
// versions is an error; lock and prewarm refuse to run, lock --check does
// not. The variable is set for the child process only.
#include "cli_support.hpp"

using namespace kernhub::test;
using namespace kernhub::test::cli;

namespace {

const char* const k_variable = "UNSTABLE_KERNELS_ALL_LATEST";

json latest_commit(const std::string& message, const json& branches, json files, const json& extra = json::object()) {
    json commit = {{"message", message}, {"branches", branches}, {"metadata", true}, {"files", std::move(files)}};
    if (!extra.empty()) commit["metadata_extra"] = extra;
    return commit;
}

// latest/kern: v1, v2, v3 on three commits, then main on a fourth that no
// version names; latest/top (v1 = main) depends on latest/kern version 1;
// latest/unnumbered has main only.
json latest_hub_spec() {
    const std::string cpu = "build/" + host_cpu_variant() + "/";
    const json so = {{"path", vector_add_so().string()}, {"lfs", true}};
    json kern = json::array();
    for (const char* name : {"v1", "v2", "v3"}) {
        kern.push_back(latest_commit(name, {name}, {{cpu + "libvector_add.so", so}, {cpu + "NOTES.txt", {{"text", name}}}}));
    }
    kern.push_back(latest_commit("main", {"main"}, {{cpu + "libvector_add.so", so}, {cpu + "NOTES.txt", {{"text", "m"}}}}));
    const json depends = {{"kernel-depends", json::array({{{"repo-id", "latest/kern"}, {"version", 1}}})}};
    return {{"repos",
             json::array({{{"repo_id", "latest/kern"}, {"type", "kernel"}, {"commits", kern}},
                          {{"repo_id", "latest/top"},
                           {"type", "kernel"},
                           {"commits", json::array({latest_commit("v1", {"main", "v1"},
                                                                  {{cpu + "libvector_add.so", so}}, depends)})}},
                          {{"repo_id", "latest/unnumbered"},
                           {"type", "kernel"},
                           {"commits", json::array({latest_commit("m", {"main"}, {{cpu + "libvector_add.so", so}})})}}})}};
}

struct LatestHub : SpecHub {
    fs::path registry = box.dir.path() / "latest-registry.json";
    LatestHub() : SpecHub(latest_hub_spec()) {
        write_text(registry,
                   json({{"format", 1},
                         {"kernels", {{"kern", {{"repo_id", "latest/kern"}, {"version", 1}, {"symbol", "kh_vector_add"}}},
                                      {"kern-main",
                                       {{"repo_id", "latest/kern"}, {"revision", "main"}, {"symbol", "kh_vector_add"}}},
                                      {"top", {{"repo_id", "latest/top"}, {"version", 1}, {"symbol", "kh_vector_add"}}},
                                      {"unnumbered",
                                       {{"repo_id", "latest/unnumbered"}, {"version", 1}, {"symbol", "kh_vector_add"}}}}}})
                       .dump());
    }
    // `kernhub COMMAND REF --json --registry R --cache-dir C [--endpoint E]`,
    // with the variable set to `value` (unset: nullopt).
    ProcessResult kh(const std::string& command, const std::string& ref, const std::optional<std::string>& value,
                     std::vector<std::string> more = {}, const fs::path& cache = {}) const {
        std::vector<std::string> args{command, ref, "--json", "--registry", registry.string(), "--cache-dir",
                                      (cache.empty() ? box.cache : cache).string()};
        if (std::find(more.begin(), more.end(), "--offline") == more.end()) {
            args.insert(args.end(), {"--endpoint", server->endpoint()});
        }
        args.insert(args.end(), more.begin(), more.end());
        return box.run(args, {{k_variable, value}, {"HF_TOKEN", k_test_token}});
    }
};

// The stderr lines that name the variable.
std::vector<std::string> variable_lines(const ProcessResult& r) {
    std::vector<std::string> lines;
    std::size_t begin = 0;
    while (begin < r.err.size()) {
        std::size_t end = r.err.find('\n', begin);
        if (end == std::string::npos) end = r.err.size();
        std::string line = r.err.substr(begin, end - begin);
        if (line.find(k_variable) != std::string::npos) lines.push_back(line);
        begin = end + 1;
    }
    return lines;
}

json ok_json(const ProcessResult& r) {
    INFO(describe(r));
    REQUIRE(r.exit_code == 0);
    CHECK(r.err.find(k_test_token) == std::string::npos);  // no secret reaches the output
    CHECK(r.out.find(k_test_token) == std::string::npos);
    return parse_stdout(r);
}

}  // namespace

TEST_CASE("UNSTABLE_KERNELS_ALL_LATEST is on for 1, on, yes, true in any case and off for anything else",
          "[cli][latest]") {
    LatestHub hub;
    const std::string v1 = hub.commit_of("latest/kern", "v1");
    const std::string v3 = hub.commit_of("latest/kern", "v3");
    for (const char* on : {"1", "on", "YES", "true", "True", "oN"}) {
        CAPTURE(on);
        const ProcessResult r = hub.kh("fetch", "kern", std::string(on));
        const json out = ok_json(r);
        CHECK(out["commit"] == v3);
        CHECK(out["revision"] == "v3");
        const std::vector<std::string> lines = variable_lines(r);
        INFO(describe(r));
        REQUIRE(lines.size() == 1);
        CHECK(lines[0] == "warning: UNSTABLE_KERNELS_ALL_LATEST is enabled: overriding the requested version 1 and "
                          "any lock pin of 'latest/kern' with v3 (" +
                              v3 + "); kernel API changes may break your code");
    }
    for (const std::optional<std::string>& off :
         {std::optional<std::string>(), std::optional<std::string>(""), std::optional<std::string>("0"),
          std::optional<std::string>("false"), std::optional<std::string>("off"), std::optional<std::string>("no"),
          std::optional<std::string>("2"), std::optional<std::string>("enabled"), std::optional<std::string>(" 1")}) {
        CAPTURE(off.value_or("(unset)"));
        const ProcessResult r = hub.kh("fetch", "kern", off);
        CHECK(ok_json(r)["commit"] == v1);
        CHECK(variable_lines(r).empty());
        CHECK(r.err.find("warning") == std::string::npos);  // no warning of any other kind either
    }
}

TEST_CASE("with UNSTABLE_KERNELS_ALL_LATEST fetch, load and info take the highest vN over a revision or a commit",
          "[cli][latest]") {
    LatestHub hub;
    const std::string v1 = hub.commit_of("latest/kern", "v1");
    const std::string v3 = hub.commit_of("latest/kern", "v3");
    const std::string main = hub.commit_of("latest/kern", "main");
    const std::optional<std::string> on("1");

    // main is newer than v3 but names no version: v3 all the same.
    ProcessResult fetched = hub.kh("fetch", "kern-main", on);
    CHECK(ok_json(fetched)["commit"] == v3);
    REQUIRE(variable_lines(fetched).size() == 1);
    CHECK_THAT(variable_lines(fetched)[0], Catch::Contains("requested revision 'main'"));
    CHECK(read_text(hub.box.cache / "kernels--latest--kern" / "refs" / "v3") == v3);
    ProcessResult by_commit = hub.kh("fetch", "latest/kern@" + v1, on);
    CHECK(ok_json(by_commit)["commit"] == v3);
    CHECK_THAT(variable_lines(by_commit).at(0), Catch::Contains("requested revision '" + v1 + "'"));
    CHECK(ok_json(hub.kh("fetch", "kern-main", std::nullopt))["commit"] == main);

    ProcessResult loaded = hub.kh("load", "kern", on);
    const json load = ok_json(loaded);
    CHECK(load["commit"] == v3);
    CHECK(load["symbol"] == "kh_vector_add");
    CHECK(variable_lines(loaded).size() == 1);
    ProcessResult info = hub.kh("info", "kern", on);
    const json shown = ok_json(info);
    CHECK(shown["commit"] == v3);
    CHECK(shown["revision"] == "v3");
    CHECK(variable_lines(info).size() == 1);

    // --quiet hides progress, not this warning.
    ProcessResult quiet = hub.kh("fetch", "kern", on, {"--quiet"});
    CHECK(ok_json(quiet)["commit"] == v3);
    CHECK(variable_lines(quiet).size() == 1);
}

TEST_CASE("UNSTABLE_KERNELS_ALL_LATEST applies to every kernel of a dependency tree, one warning each",
          "[cli][latest]") {
    LatestHub hub;
    ProcessResult r = hub.kh("fetch", "top", std::string("yes"));
    const json out = ok_json(r);
    CHECK(out["commit"] == hub.commit_of("latest/top", "v1"));
    REQUIRE(out["dependencies"].size() == 1);
    CHECK(out["dependencies"][0]["commit"] == hub.commit_of("latest/kern", "v3"));
    CHECK(out["dependencies"][0]["revision"] == "v3");
    const std::vector<std::string> lines = variable_lines(r);
    INFO(describe(r));
    REQUIRE(lines.size() == 2);
    CHECK_THAT(lines[0], Catch::Contains("'latest/top' with v1"));
    CHECK_THAT(lines[1], Catch::Contains("requested version 1 and any lock pin of 'latest/kern' with v3"));
}

TEST_CASE("offline, UNSTABLE_KERNELS_ALL_LATEST takes the highest version the cache has recorded", "[cli][latest]") {
    LatestHub hub;
    const std::optional<std::string> on("TRUE");
    // Only v1 and v2 were fetched: offline the latest is v2, which the hub no longer is.
    ok_json(hub.kh("fetch", "kern", std::nullopt));
    ok_json(hub.kh("fetch", "latest/kern@v2", std::nullopt));
    ProcessResult r = hub.kh("load", "kern", on, {"--offline"});
    CHECK(ok_json(r)["commit"] == hub.commit_of("latest/kern", "v2"));
    CHECK_THAT(variable_lines(r).at(0), Catch::Contains("with v2 ("));

    // A cache with no version of the repo: exit 6, naming the variable.
    ProcessResult none = hub.kh("fetch", "kern", on, {"--offline"}, hub.box.dir.path() / "empty-cache");
    check_error(none, 6, {k_variable, "requires a numbered version", "'latest/kern'", "offline"});
}

TEST_CASE("a repo without numbered versions is exit 3 under UNSTABLE_KERNELS_ALL_LATEST", "[cli][latest]") {
    LatestHub hub;
    ProcessResult r = hub.kh("fetch", "latest/unnumbered", std::string("1"));
    check_error(r, 3, {k_variable, "requires a numbered version", "'latest/unnumbered'", "on the hub"});
    CHECK(hub.kh("info", "latest/unnumbered", std::string("1")).exit_code == 3);
    CHECK(hub.kh("fetch", "latest/unnumbered", std::nullopt).exit_code == 0);
}

TEST_CASE("lock and prewarm refuse to run under UNSTABLE_KERNELS_ALL_LATEST (exit 2), lock --check still checks",
          "[cli][latest]") {
    LatestHub hub;
    const fs::path project = hub.box.dir.path() / "project";
    fs::create_directories(project);
    write_text(project / "kernhub.json",
               json({{"format", 1},
                     {"kernels", {{"kern", {{"repo_id", "latest/kern"}, {"version", 1}, {"symbol", "kh_vector_add"}}}}}})
                   .dump());
    const auto run = [&](std::vector<std::string> args, const std::optional<std::string>& value) {
        args.insert(args.end(), {"--project", project.string(), "--endpoint", hub.server->endpoint(), "--cache-dir",
                                 hub.box.cache.string()});
        return hub.box.run(args, {{k_variable, value}});
    };
    check_error(run({"lock"}, std::string("on")), 2, {k_variable, "lock"});
    CHECK_FALSE(fs::exists(project / "kernhub.lock"));
    ProcessResult locked = run({"lock", "--quiet"}, std::nullopt);
    INFO(describe(locked));
    REQUIRE(locked.exit_code == 0);
    const std::string lock_text = read_text(project / "kernhub.lock");
    CHECK(json::parse(lock_text)["kernels"]["kern"]["commit"] == hub.commit_of("latest/kern", "v1"));

    // --check compares the pins with the hub, v1's commit, not the latest.
    ProcessResult check = run({"lock", "--check"}, std::string("1"));
    INFO(describe(check));
    CHECK(check.exit_code == 0);
    CHECK(variable_lines(check).empty());
    check_error(run({"lock", "--update"}, std::string("1")), 2, {k_variable});
    check_error(run({"prewarm"}, std::string("1")), 2, {k_variable, "prewarm"});
    CHECK(run({"prewarm", "--json"}, std::string("yes")).exit_code == 2);
    CHECK(read_text(project / "kernhub.lock") == lock_text);
    CHECK_FALSE(fs::exists(hub.box.cache / "kernels--latest--kern" / "refs" / "v3"));
}
