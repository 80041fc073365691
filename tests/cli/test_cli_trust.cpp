// The trusted-publisher check (the Python kernels library's default) through
// the CLI: an ad-hoc ORG/REPO from an http(s) hub is fetched only when the
// hub's overview of ORG marks it a trusted kernel publisher; the opt-ins
// (KERNHUB_TRUST_REMOTE_CODE, KERNHUB_ALLOWED_ORGS, a registry entry); the
// answer kept in the cache (a warm fetch asks nothing, an old answer is
// asked again, prune and verify handle it); offline, one notice; mirror
// writes the overview.
#include <chrono>
#include <thread>

#include "cli_support.hpp"

using namespace kernhub::test;
using namespace kernhub::test::cli;

namespace {

json kernel(const std::string& id, const json& extra = json::object()) {
    json commit = {
        {"message", "v1"},
        {"branches", {"main", "v1"}},
        {"metadata", true},
        {"files", {{"build/" + host_cpu_variant() + "/libkh_good.so", {{"path", good_fixture_so().string()}}}}}};
    if (!extra.empty()) commit["metadata_extra"] = extra;
    return {{"repo_id", id}, {"type", "kernel"}, {"commits", json::array({commit})}};
}

// trusted/* and untrusted/* with overviews saying so; unlisted/* with no
// overview (404); trusted/top depends on trusted/leaf, trusted/mixed on
// untrusted/good.
json trust_hub_spec() {
    const json leaf_dep = {{"kernel-depends", {{{"repo-id", "trusted/leaf"}, {"version", 1}}}}};
    const json untrusted_dep = {{"kernel-depends", {{{"repo-id", "untrusted/good"}, {"version", 1}}}}};
    return {{"organizations",
             {{"trusted", {{"trusted_kernel_publisher", true}}}, {"untrusted", {{"trusted_kernel_publisher", false}}}}},
            {"repos",
             json::array({kernel("trusted/good"), kernel("trusted/leaf"), kernel("trusted/top", leaf_dep),
                          kernel("trusted/mixed", untrusted_dep), kernel("untrusted/good"), kernel("unlisted/good")})}};
}

struct TrustHub : SpecHub {
    TrustHub() : SpecHub(trust_hub_spec()) {}
    ProcessResult fetch(const std::string& ref, const EnvChanges& extra = {}, std::vector<std::string> more = {}) {
        std::vector<std::string> args{"fetch",           ref, "--endpoint", server->endpoint(), "--cache-dir",
                                      box.cache.string()};
        args.insert(args.end(), more.begin(), more.end());
        return box.run(args, extra);
    }
    fs::path publisher_record(const std::string& org, const std::string& name) const {
        return box.cache / ("kernels--" + org + "--" + name) / ".kernhub" / "publisher.json";
    }
};

}  // namespace

namespace {

// Requests other than the overview, the revision and the listing: the
// overview goes out beside those two, and no file may go before its answer.
std::size_t file_requests(const TrustHub& hub) {
    std::size_t files = 0;
    const nlohmann::json stats = hub.server->stats();
    for (const auto& request : stats["requests"]) {
        const std::string path = request["path"].get<std::string>();
        const bool api = path.find("/api/organizations/") != std::string::npos ||
                         path.find("/revision/") != std::string::npos || path.find("/tree/") != std::string::npos;
        if (!api) ++files;
    }
    return files;
}

}  // namespace

TEST_CASE("an ad-hoc repo of an organisation the hub does not mark trusted is exit 4 before any file is asked") {
    TrustHub hub;
    check_error(hub.fetch("untrusted/good@v1", {}, {"--quiet"}), 4,
                {"'untrusted/good' is not from a trusted kernel publisher", "does not mark it trustedKernelPublisher",
                 "KERNHUB_TRUST_REMOTE_CODE=untrusted/good", "KERNHUB_ALLOWED_ORGS"});
    CHECK(hub.server->count_requests("/api/organizations/untrusted/overview") == 1);
    // At most the revision and the listing went beside it.
    CHECK(hub.server->stats()["requests"].size() <= 3);
    CHECK(file_requests(hub) == 0);
    CHECK_FALSE(fs::exists(hub.box.cache / "kernels--untrusted--good" / "blobs"));

    hub.server->reset();
    check_error(hub.fetch("unlisted/good@v1", {}, {"--quiet"}), 4,
                {"'unlisted/good' is not from a trusted kernel publisher", "no overview of the organisation"});
    CHECK(hub.server->stats()["requests"].size() <= 3);
    CHECK(file_requests(hub) == 0);

    // An overview that is not a JSON object: the hub cannot say.
    fs::create_directories(hub.dir / "api/organizations/unlisted");
    write_text(hub.dir / "api/organizations/unlisted/overview", "[1, 2]");
    check_error(hub.fetch("unlisted/good@v1", {}, {"--quiet"}), 4, {"the hub cannot say", "not a JSON object"});
    // One over k_max_overview_bytes is a hub answer over its cap: exit 5, as
    // for every hub answer (docs/trust.md, "Trusted publishers").
    write_text(hub.dir / "api/organizations/unlisted/overview",
               "{\"trustedKernelPublisher\": true, \"pad\": \"" + std::string(1u << 20, 'x') + "\"}");
    check_error(hub.fetch("unlisted/good@v1", {}, {"--quiet"}), 5, {"k_max_overview_bytes"});

    // load and info check the same, and so does a dependency (below).
    check_error(hub.box.run({"info", "untrusted/good@v1", "--endpoint", hub.server->endpoint(), "--cache-dir",
                             hub.box.cache.string(), "--quiet"}),
                4, {"not from a trusted kernel publisher"});
}

TEST_CASE("the opt-ins: KERNHUB_TRUST_REMOTE_CODE (1 or the repo), KERNHUB_ALLOWED_ORGS, a registry entry") {
    TrustHub hub;
    // None of them asks for the overview.
    const std::vector<EnvChanges> opt_ins = {{{"KERNHUB_TRUST_REMOTE_CODE", "1"}},
                                             {{"KERNHUB_TRUST_REMOTE_CODE", "true"}},
                                             {{"KERNHUB_TRUST_REMOTE_CODE", "other/x, untrusted/good"}},
                                             {{"KERNHUB_ALLOWED_ORGS", "Untrusted,other"}}};
    for (const EnvChanges& env : opt_ins) {
        INFO(env.begin()->first << "=" << env.begin()->second.value_or(""));
        hub.server->reset();
        ProcessResult r = hub.fetch("untrusted/good@v1", env, {"--quiet"});
        INFO(describe(r));
        CHECK(r.exit_code == 0);
        CHECK(hub.server->count_requests("/overview") == 0);
    }
    // A list naming another repo opts nothing in; "0" is no opt-in.
    check_error(hub.fetch("untrusted/good@v1", {{"KERNHUB_TRUST_REMOTE_CODE", "untrusted/other"}}, {"--quiet"}), 4,
                {"not from a trusted kernel publisher"});
    check_error(hub.fetch("untrusted/good@v1", {{"KERNHUB_TRUST_REMOTE_CODE", "0"}}, {"--quiet"}), 4,
                {"not from a trusted kernel publisher"});
    check_error(hub.fetch("untrusted/good@v1", {{"KERNHUB_TRUST_REMOTE_CODE", "not a repo"}}, {"--quiet"}), 2,
                {"KERNHUB_TRUST_REMOTE_CODE names 'not a repo'"});

    // A registry entry naming the repo is the user's choice.
    const fs::path registry = hub.box.dir.path() / "mine.json";
    write_text(
        registry,
        json({{"format", 1}, {"kernels", {{"mine", {{"repo_id", "untrusted/good"}, {"version", 1}, {"symbol", "x"}}}}}})
            .dump());
    hub.server->reset();
    for (const std::string ref : {"mine", "untrusted/good@v1"}) {
        ProcessResult r = hub.fetch(ref, {}, {"--registry", registry.string(), "--quiet"});
        INFO(describe(r));
        CHECK(r.exit_code == 0);
    }
    CHECK(hub.server->count_requests("/overview") == 0);

    // A file:// endpoint is the user's own tree: no check.
    ProcessResult file = hub.box.run({"fetch", "untrusted/good@v1", "--endpoint", "file://" + hub.dir.string(),
                                      "--cache-dir", (hub.box.dir.path() / "file-cache").string(), "--quiet"});
    INFO(describe(file));
    CHECK(file.exit_code == 0);
}

TEST_CASE("a trusted organisation: one overview request cold, none warm, again once the kept answer is a day old") {
    TrustHub hub;
    ProcessResult cold = hub.fetch("trusted/good@v1", {}, {"--json", "--quiet"});
    json out = parse_stdout(cold);
    REQUIRE(cold.exit_code == 0);
    CHECK(hub.server->count_requests("/api/organizations/trusted/overview") == 1);
    // overview, revision, listing, metadata.json, the .so (302 + CDN).
    CHECK(out["requests"] == 6);
    const fs::path record = hub.publisher_record("trusted", "good");
    REQUIRE(fs::is_regular_file(record));
    json kept = json::parse(read_text(record));
    CHECK(kept["organization"] == "trusted");
    CHECK(kept["endpoint"] == hub.server->endpoint());
    CHECK(kept["trusted_kernel_publisher"] == true);

    hub.server->reset();
    json warm = parse_stdout(hub.fetch("trusted/good@v1", {}, {"--json", "--quiet"}));
    CHECK(warm["requests"] == 1);  // the revision only
    CHECK(hub.server->count_requests("/overview") == 0);

    // A day-old answer is asked again; prune removes one before that.
    kept["checked_at"] = kept["checked_at"].get<std::int64_t>() - 24 * 60 * 60;
    write_text(record, kept.dump());
    ProcessResult pruned = hub.box.run({"cache", "prune", "--cache-dir", hub.box.cache.string(), "--json"});
    json report = parse_stdout(pruned);
    CHECK(pruned.exit_code == 0);
    CHECK(std::count(report["removed"].begin(), report["removed"].end(), json(record.string())) == 1);
    CHECK_FALSE(fs::exists(record));
    write_text(record, kept.dump());
    hub.server->reset();
    REQUIRE(hub.fetch("trusted/good@v1", {}, {"--quiet"}).exit_code == 0);
    CHECK(hub.server->count_requests("/overview") == 1);
    CHECK(json::parse(read_text(record))["checked_at"].get<std::int64_t>() > kept["checked_at"].get<std::int64_t>());

    // A .kernhub that is a link to another folder (another user's, with an
    // answer of their own) is not read through: it goes, and the hub is asked.
    const fs::path elsewhere = hub.box.dir.path() / "elsewhere";
    fs::create_directories(elsewhere);
    write_text(elsewhere / "publisher.json", read_text(record));
    const fs::path side = record.parent_path();
    fs::rename(side, hub.box.dir.path() / "side-data");
    fs::create_directory_symlink(elsewhere, side);
    hub.server->reset();
    REQUIRE(hub.fetch("trusted/good@v1", {}, {"--quiet"}).exit_code == 0);
    CHECK(hub.server->count_requests("/overview") == 1);
    CHECK_FALSE(fs::is_symlink(side));
    CHECK(fs::is_regular_file(elsewhere / "publisher.json"));

    // cache export leaves the answer out, and import refuses an archive
    // that carries one: each machine asks its own hub.
    const fs::path archive = hub.box.dir.path() / "cache.tar";
    ProcessResult exported = hub.box.run({"cache", "export", "trusted/good@v1", "--to", archive.string(), "--cache-dir",
                                          hub.box.cache.string(), "--quiet"});
    INFO(describe(exported));
    REQUIRE(exported.exit_code == 0);
    const fs::path imported = hub.box.dir.path() / "imported";
    REQUIRE(hub.box.run({"cache", "import", archive.string(), "--cache-dir", imported.string(), "--quiet"}).exit_code ==
            0);
    CHECK(fs::is_directory(imported / "kernels--trusted--good" / "snapshots"));
    CHECK_FALSE(fs::exists(imported / "kernels--trusted--good" / ".kernhub" / "publisher.json"));
    const fs::path planted = hub.box.dir.path() / "planted.tar";
    ProcessResult tar = run_process({"tar", "-cf", planted.string(), "-C", hub.box.cache.string(),
                                     "kernels--trusted--good/.kernhub/publisher.json"});
    REQUIRE(tar.exit_code == 0);
    check_error(hub.box.run({"cache", "import", planted.string(), "--cache-dir",
                             (hub.box.dir.path() / "planted").string(), "--quiet"}),
                4, {"publisher.json"});
    CHECK_FALSE(fs::exists(hub.box.dir.path() / "planted" / "kernels--trusted--good" / ".kernhub" / "publisher.json"));

    // verify reports a record that is not one kernhub wrote; repair removes it.
    write_text(record, "{\"organization\": 1}");
    ProcessResult verified = hub.box.run({"cache", "verify", "--cache-dir", hub.box.cache.string(), "--quiet"});
    CHECK(verified.exit_code == 4);
    CHECK(verified.err.find("publisher.json") != std::string::npos);
    ProcessResult repaired =
        hub.box.run({"cache", "verify", "--repair", "--cache-dir", hub.box.cache.string(), "--quiet"});
    INFO(describe(repaired));
    CHECK_FALSE(fs::exists(record));
}

TEST_CASE("dependencies get the check too, and offline it is skipped with one notice for the whole tree") {
    TrustHub hub;
    // A trusted kernel whose dependency is not: refused, naming the dependency.
    check_error(hub.fetch("trusted/mixed@v1", {}, {"--quiet"}), 4,
                {"'untrusted/good' is not from a trusted kernel publisher"});
    CHECK(hub.server->count_requests("/api/organizations/untrusted/overview") == 1);
    REQUIRE(hub.fetch("trusted/mixed@v1", {{"KERNHUB_TRUST_REMOTE_CODE", "untrusted/good"}}, {"--quiet"}).exit_code ==
            0);
    hub.server->reset();
    REQUIRE(hub.fetch("trusted/top@v1", {}, {"--quiet"}).exit_code == 0);
    // One command asks once per organisation, top and leaf alike.
    CHECK(hub.server->count_requests("/api/organizations/trusted/overview") == 1);

    ProcessResult offline = hub.fetch("trusted/top@v1", {{"KERNHUB_OFFLINE", "1"}});
    INFO(describe(offline));
    CHECK(offline.exit_code == 0);
    std::size_t notices = 0;
    for (std::size_t at = offline.err.find("trusted-publisher check is skipped offline"); at != std::string::npos;
         at = offline.err.find("trusted-publisher check is skipped offline", at + 1)) {
        ++notices;
    }
    CHECK(notices == 1);
    // --quiet keeps it off stderr, as any status line.
    CHECK(hub.fetch("trusted/top@v1", {{"KERNHUB_OFFLINE", "1"}}, {"--quiet"}).err.empty());
}

TEST_CASE("mirror checks ad-hoc repos and writes each mirrored organisation's overview as the hub answered it") {
    TrustHub hub;
    const fs::path tree = hub.box.dir.path() / "mirror";
    auto mirror = [&](const std::string& ref, const EnvChanges& env = {}) {
        return hub.box.run({"mirror", ref, "--to", tree.string(), "--endpoint", hub.server->endpoint(), "--cache-dir",
                            hub.box.cache.string(), "--quiet"},
                           env);
    };
    check_error(mirror("untrusted/good@v1"), 4, {"not from a trusted kernel publisher"});
    REQUIRE(mirror("trusted/good@v1").exit_code == 0);
    CHECK(read_text(tree / "api/organizations/trusted/overview") ==
          read_text(hub.dir / "api/organizations/trusted/overview"));
    REQUIRE(mirror("untrusted/good@v1", {{"KERNHUB_TRUST_REMOTE_CODE", "1"}}).exit_code == 0);
    CHECK(read_text(tree / "api/organizations/untrusted/overview") ==
          read_text(hub.dir / "api/organizations/untrusted/overview"));
    // Offline nothing can be asked, and the command says so.
    ProcessResult offline = hub.box.run({"mirror", "trusted/good@v1", "--to", (hub.box.dir.path() / "m2").string(),
                                         "--cache-dir", hub.box.cache.string(), "--offline"});
    INFO(describe(offline));
    CHECK(offline.exit_code == 0);
    CHECK(offline.err.find("the mirror gets no organisation overview (trusted)") != std::string::npos);
    CHECK_FALSE(fs::exists(hub.box.dir.path() / "m2" / "api" / "organizations"));
    // The nginx server block serves them.
    const fs::path conf = hub.box.dir.path() / "mirror.conf";
    REQUIRE(hub.box.run({"mirror", "--to", tree.string(), "--nginx-conf", conf.string(), "--quiet"}).exit_code == 0);
    CHECK(read_text(conf).find("/api/organizations/") != std::string::npos);
}

TEST_CASE("the overview goes out beside the revision and the listing, and no file before its answer") {
    TrustHub hub;
    hub.server->add_faults(nlohmann::json::array(
        {{{"match", "/api/organizations/untrusted/overview"}, {"action", "hold"}, {"gate", "overview"}},
         {{"match", "/tree/"}, {"action", "hold"}, {"gate", "listing"}}}));
    ProcessResult result;
    std::thread fetch([&] { result = hub.fetch("untrusted/good@v1", {}, {"--quiet"}); });
    struct Join {
        std::thread& thread;
        ~Join() {
            if (thread.joinable()) thread.join();
        }
    } join{fetch};
    // Both wait at their gates at once: the listing did not wait for the overview.
    const bool overview_held = hub.server->wait_held("overview");
    const bool listing_held = hub.server->wait_held("listing");
    hub.server->release("listing");
    // The listing is answered while the overview still waits (polled, bounded):
    // a fetch that did not wait for the overview would ask for files now.
    bool answered = false;
    for (int i = 0; i < 4000 && !(answered = body_sent(*hub.server, "/tree/")); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    hub.server->release("overview");
    fetch.join();
    CHECK(overview_held);
    CHECK(listing_held);
    CHECK(answered);
    check_error(result, 4, {"'untrusted/good' is not from a trusted kernel publisher"});
    CHECK(file_requests(hub) == 0);
    CHECK_FALSE(fs::exists(hub.box.cache / "kernels--untrusted--good" / "blobs"));
    // Nothing of the refused repo is kept, its listing neither.
    CHECK_FALSE(fs::exists(hub.box.cache / "kernels--untrusted--good" / ".kernhub" / "trees"));
}
