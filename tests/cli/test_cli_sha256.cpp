// A repo whose commit ids are SHA-256 (64 hex), as a git repository in the
// SHA-256 object format has and kernels 0.19.1's Oid takes: fetched by its
// commit and by a branch, loaded offline, listed, verified, exported and
// imported, locked and prewarmed, each keeping the 64-hex snapshot name.
#include "cli_support.hpp"

using namespace kernhub::test;
using namespace kernhub::test::cli;

namespace {

const std::string k_sha_repo = "shatest/vector-add";
const std::string k_sha_folder = "kernels--shatest--vector-add";

// v1 on the first commit, main and v2 on the second; each the host's CPU
// variant with the real libvector_add.so and a metadata.json.
json sha256_hub_spec() {
    const std::string so = "build/" + host_cpu_variant() + "/libvector_add.so";
    json commits = json::array();
    for (const auto& [message, branches] :
         {std::pair<std::string, json>{"v1", {"v1"}}, std::pair<std::string, json>{"v2", {"main", "v2"}}}) {
        commits.push_back({{"message", message},
                           {"branches", branches},
                           {"metadata", true},
                           {"files",
                            {{so, {{"path", vector_add_so().string()}, {"lfs", true}}},
                             {"build/" + host_cpu_variant() + "/NOTES.txt", {{"text", message}}}}}});
    }
    return {{"repos", json::array({{{"repo_id", k_sha_repo},
                                    {"type", "kernel"},
                                    {"object_format", "sha256"},
                                    {"commits", commits}}})}};
}

struct Sha256Hub : SpecHub {
    Sha256Hub() : SpecHub(sha256_hub_spec()) {}
    // `kernhub ARGS --cache-dir CACHE [--endpoint E]`, quiet.
    ProcessResult kh(std::vector<std::string> args, const fs::path& cache, bool online = true) const {
        args.insert(args.end(), {"--cache-dir", cache.string(), "--quiet"});
        if (online) args.insert(args.end(), {"--endpoint", server->endpoint()});
        return box.run(args);
    }
};

json ok_json(const ProcessResult& r) {
    INFO(describe(r));
    REQUIRE(r.exit_code == 0);
    return parse_stdout(r);
}

// The commits `cache ls --json` lists for the repo.
std::vector<std::string> listed_commits(const Sha256Hub& hub, const fs::path& cache) {
    const json ls = ok_json(hub.kh({"cache", "ls", "--json"}, cache, false));
    std::vector<std::string> out;
    for (const json& repo : ls["repos"]) {
        if (repo["repo_id"] != k_sha_repo) continue;
        for (const json& commit : repo["commits"]) out.push_back(commit["commit"]);
    }
    std::sort(out.begin(), out.end());
    return out;
}

}  // namespace

TEST_CASE("a 64-hex commit is fetched from the hub, loaded offline, listed, verified, exported and imported",
          "[cli][sha256]") {
    Sha256Hub hub;
    const std::string v1 = hub.commit_of(k_sha_repo, "v1");
    const std::string main = hub.commit_of(k_sha_repo, "main");
    REQUIRE(v1.size() == 64);
    REQUIRE(main.size() == 64);
    const fs::path& cache = hub.box.cache;

    // By its commit: no revision request, no ref written.
    json by_commit = ok_json(hub.kh({"fetch", k_sha_repo + "@" + v1, "--json"}, cache));
    CHECK(by_commit["commit"] == v1);
    CHECK(by_commit["revision"] == v1);
    CHECK(hub.server->count_requests("/revision/") == 0);
    const fs::path snapshot = cache / k_sha_folder / "snapshots" / v1 / "build" / host_cpu_variant();
    CHECK(fs::is_regular_file(snapshot / "libvector_add.so"));
    CHECK_FALSE(fs::exists(cache / k_sha_folder / "refs" / v1));

    // By a branch: the hub's 64-hex answer is the snapshot and the ref.
    json by_branch = ok_json(hub.kh({"fetch", k_sha_repo, "--json"}, cache));
    CHECK(by_branch["commit"] == main);
    CHECK(read_text(cache / k_sha_folder / "refs" / "main") == main);

    // Offline, by the commit and by the branch.
    json loaded = ok_json(hub.kh({"load", k_sha_repo + "@" + v1, "--symbol", "kh_vector_add", "--offline", "--json"},
                                 cache, false));
    CHECK(loaded["commit"] == v1);
    CHECK(loaded["symbol"] == "kh_vector_add");
    CHECK(ok_json(hub.kh({"load", k_sha_repo, "--symbol", "kh_vector_add", "--offline", "--json"}, cache,
                         false))["commit"] == main);
    // An abbreviation of it is no commit but a branch name, which the cache
    // does not have; its first 40 characters are some SHA-1 commit, not it.
    for (std::size_t length : {12u, 40u, 63u}) {
        CAPTURE(length);
        ProcessResult short_id =
            hub.kh({"fetch", k_sha_repo + "@" + v1.substr(0, length), "--offline"}, cache, false);
        CHECK(short_id.exit_code == 6);
    }

    std::vector<std::string> both{v1, main};
    std::sort(both.begin(), both.end());
    CHECK(listed_commits(hub, cache) == both);
    ProcessResult verify = hub.kh({"cache", "verify"}, cache, false);
    INFO(describe(verify));
    CHECK(verify.exit_code == 0);

    // Exported and imported into an empty cache, where it loads offline.
    const fs::path archive = hub.box.dir.path() / "sha256.tar";
    const fs::path other = hub.box.dir.path() / "other-cache";
    ok_json(hub.kh({"cache", "export", "--to", archive.string(), k_sha_repo + "@" + v1, "--json"}, cache, false));
    ok_json(hub.kh({"cache", "import", archive.string(), "--json"}, other, false));
    CHECK(listed_commits(hub, other) == std::vector<std::string>{v1});
    CHECK(ok_json(hub.kh({"load", k_sha_repo + "@" + v1, "--symbol", "kh_vector_add", "--offline", "--json"}, other,
                         false))["commit"] == v1);
    ProcessResult verify_other = hub.kh({"cache", "verify"}, other, false);
    INFO(describe(verify_other));
    CHECK(verify_other.exit_code == 0);
}

TEST_CASE("lock pins a 64-hex commit, lock --check agrees and prewarm fills a cache from it", "[cli][sha256]") {
    Sha256Hub hub;
    const std::string v2 = hub.commit_of(k_sha_repo, "v2");
    const fs::path project = hub.box.dir.path() / "project";
    fs::create_directories(project);
    write_text(project / "kernhub.json",
               json({{"format", 1},
                     {"kernels", {{"kern", {{"repo_id", k_sha_repo}, {"version", 2}, {"symbol", "kh_vector_add"}}}}}})
                   .dump(2));
    json locked = ok_json(hub.kh({"lock", "--project", project.string(), "--json"}, hub.box.cache));
    REQUIRE(locked["kernels"].size() == 1);
    CHECK(locked["kernels"][0]["commit"] == v2);
    const json lock = json::parse(read_text(project / "kernhub.lock"));
    CHECK(lock["kernels"]["kern"]["commit"] == v2);
    ProcessResult check = hub.kh({"lock", "--check", "--project", project.string()}, hub.box.cache);
    INFO(describe(check));
    CHECK(check.exit_code == 0);

    const fs::path image = hub.box.dir.path() / "image-cache";
    json prewarmed = ok_json(hub.kh({"prewarm", "--project", project.string(), "--json"}, image));
    REQUIRE(prewarmed["kernels"].size() == 1);
    CHECK(prewarmed["kernels"][0]["commit"] == v2);
    CHECK(fs::is_directory(image / k_sha_folder / "snapshots" / v2));
    CHECK(read_text(image / k_sha_folder / "refs" / "v2") == v2);
}
