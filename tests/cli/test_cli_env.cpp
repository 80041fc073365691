// Environment variables: endpoint, cache root, token, and the numeric
// variables (KERNHUB_RETRIES, KERNHUB_MAX_WAIT) that must parse strictly.
#include "cli/cli_support.hpp"

using namespace kernhub::test;
using namespace kernhub::test::cli;

namespace {

// `fetch vector-add --json --quiet` with neither --endpoint nor --cache-dir unless given in `more`.
ProcessResult fetch_env(const Sandbox& box, const EnvChanges& extra, const std::vector<std::string>& more = {},
                        const std::string& ref = "vector-add") {
    std::vector<std::string> args{"fetch", ref, "--json", "--quiet", "--registry", box.registry.string()};
    args.insert(args.end(), more.begin(), more.end());
    return box.run(args, extra);
}

// The cache root a successful fetch --json used, from its "path".
fs::path root_of(const ProcessResult& r, const std::string& folder = k_vector_add_folder) {
    INFO(describe(r));
    REQUIRE(r.exit_code == 0);
    const std::string path = parse_stdout(r)["path"];
    const auto at = path.find("/" + folder + "/");
    REQUIRE(at != std::string::npos);
    return path.substr(0, at);
}

}  // namespace

TEST_CASE("the endpoint comes from --endpoint then KERNHUB_ENDPOINT then HF_ENDPOINT", "[cli]") {
    KernelHub hub;
    Sandbox box;
    const std::string ep = hub.server().endpoint();
    const std::vector<std::string> cache{"--cache-dir", box.cache.string()};

    CHECK(fetch_env(box, {{"KERNHUB_ENDPOINT", ep}}, cache).exit_code == 0);
    CHECK(hub.server().count_requests("/api/kernels/kernhub-test/vector-add/revision/main") == 1);

    hub.server().reset();
    CHECK(fetch_env(box, {{"HF_ENDPOINT", ep}}, cache).exit_code == 0);
    CHECK(hub.server().count_requests("/revision/main") == 1);

    // KERNHUB_ENDPOINT beats HF_ENDPOINT, both ways round.
    hub.server().reset();
    CHECK(fetch_env(box, {{"KERNHUB_ENDPOINT", ep}, {"HF_ENDPOINT", k_dead_endpoint}}, cache).exit_code == 0);
    CHECK(hub.server().count_requests("/revision/main") == 1);
    ProcessResult r = fetch_env(box, {{"KERNHUB_ENDPOINT", k_dead_endpoint}, {"HF_ENDPOINT", ep}}, cache);
    INFO(describe(r));
    CHECK(r.exit_code == 5);
    CHECK(r.err.find("127.0.0.1:9") != std::string::npos);

    // An empty KERNHUB_ENDPOINT counts as unset.
    hub.server().reset();
    CHECK(fetch_env(box, {{"KERNHUB_ENDPOINT", ""}, {"HF_ENDPOINT", ep}}, cache).exit_code == 0);
    CHECK(hub.server().count_requests("/revision/main") == 1);

    // --endpoint beats both; a trailing slash is fine.
    hub.server().reset();
    std::vector<std::string> more = cache;
    more.insert(more.end(), {"--endpoint", ep + "/"});
    CHECK(fetch_env(box, {{"KERNHUB_ENDPOINT", k_dead_endpoint}, {"HF_ENDPOINT", k_dead_endpoint}}, more).exit_code ==
          0);
    CHECK(hub.server().count_requests("/revision/main") == 1);
}

TEST_CASE(
    "the cache root comes from --cache-dir then KERNHUB_CACHE then KERNELS_CACHE then HF_HUB_CACHE then HF_HOME/hub",
    "[cli]") {
    KernelHub hub;
    Sandbox box;
    const fs::path d = box.dir.path();
    const std::string ep = hub.server().endpoint();
    const EnvChanges endpoint{{"KERNHUB_ENDPOINT", ep}};
    auto with = [&](EnvChanges extra) {
        extra["KERNHUB_ENDPOINT"] = ep;
        return extra;
    };

    CHECK(root_of(fetch_env(box, endpoint)) == box.home / "hub");
    CHECK(fs::is_regular_file(box.home / "hub" / k_vector_add_folder / "refs" / "main"));
    CHECK(root_of(fetch_env(box, with({{"HF_HUB_CACHE", (d / "hf-hub").string()}}))) == d / "hf-hub");
    CHECK(fs::is_regular_file(d / "hf-hub" / k_vector_add_folder / "refs" / "main"));
    CHECK(root_of(fetch_env(box, with({{"KERNELS_CACHE", (d / "kernels").string()},
                                       {"HF_HUB_CACHE", (d / "hf-hub2").string()}}))) == d / "kernels");
    CHECK(root_of(fetch_env(box, with({{"KERNHUB_CACHE", (d / "kh").string()},
                                       {"KERNELS_CACHE", (d / "kernels2").string()},
                                       {"HF_HUB_CACHE", (d / "hf-hub3").string()}}))) == d / "kh");
    CHECK(fs::is_regular_file(d / "kh" / k_vector_add_folder / "refs" / "main"));
    CHECK(root_of(fetch_env(box, with({{"KERNHUB_CACHE", (d / "kh2").string()}}),
                            {"--cache-dir", (d / "flag").string()})) == d / "flag");
    // Where a variable lost, nothing was written.
    for (const char* loser : {"hf-hub2", "kernels2", "hf-hub3", "kh2"}) {
        INFO(loser);
        CHECK_FALSE(fs::exists(d / loser));
    }
    // The blob landed in the chosen root: a fresh root made a full download.
    ProcessResult r = fetch_env(box, with({{"KERNHUB_CACHE", (d / "kh3").string()}}));
    REQUIRE(r.exit_code == 0);
    CHECK(parse_stdout(r)["bytes_downloaded"].get<std::uint64_t>() > 10000);
    CHECK(fs::is_directory(d / "kh3" / k_vector_add_folder / "blobs"));
}

TEST_CASE("HF_TOKEN or the HF_HOME token file opens a private repo and no run prints the token", "[cli]") {
    KernelHub hub({k_test_token, 1000});
    Sandbox box;
    const std::string ep = hub.server().endpoint();
    const std::string wrong = "hf_wrong_token_for_kernhub_7f3a";
    std::vector<ProcessResult> runs;
    auto fetch = [&](const EnvChanges& extra, const std::vector<std::string>& more = {}) {
        runs.push_back(box.kh("fetch", "private", ep, more, extra));
        return runs.back();
    };

    ProcessResult r = fetch({});
    check_error(r, 3, {"kernhub-test/private", "HF_TOKEN"});

    r = fetch({{"HF_TOKEN", wrong}});
    check_error(r, 3, {"kernhub-test/private"});
    r = fetch({{"HF_TOKEN", wrong}}, {"--json"});
    CHECK(r.exit_code == 3);

    hub.server().reset();
    r = fetch({{"HF_TOKEN", k_test_token}});
    INFO(describe(r));
    REQUIRE(r.exit_code == 0);
    CHECK(r.err.find("fetched private (kernhub-test/private@main") != std::string::npos);
    // Authorization went to the hub only, never to the CDN it redirected to.
    bool saw_cdn = false;
    const json stats = hub.server().stats();
    for (const auto& request : stats["requests"]) {
        saw_cdn = saw_cdn || request["host"] == "cdn";
        CHECK(request["auth"] == (request["host"] != "cdn"));
    }
    CHECK(saw_cdn);

    // The token file under HF_HOME, with a trailing newline as `hf auth login` writes it.
    fs::remove_all(box.cache);
    write_text(box.home / "token", std::string(k_test_token) + "\n");
    r = fetch({}, {"--json"});
    INFO(describe(r));
    CHECK(r.exit_code == 0);
    CHECK(parse_stdout(r)["bytes_downloaded"].get<std::uint64_t>() > 10000);
    // HF_TOKEN beats the file.
    write_text(box.home / "token", wrong + "\n");
    CHECK(fetch({{"HF_TOKEN", k_test_token}}).exit_code == 0);
    CHECK(fetch({}).exit_code == 3);
    fs::remove(box.home / "token");

    // Failing runs with the right token: 503 forever, with and without --json/--quiet.
    hub.server().add_faults(
        {{{"match", "/revision/"}, {"action", "status"}, {"status", 503}, {"retry_after", "0"}, {"count", -1}}});
    CHECK(fetch({{"HF_TOKEN", k_test_token}}).exit_code == 5);
    CHECK(fetch({{"HF_TOKEN", k_test_token}}, {"--json", "--quiet"}).exit_code == 5);
    CHECK(fetch({{"HF_TOKEN", k_test_token}}, {"--offline", "--json"}).exit_code == 0);  // cached now

    // A dead endpoint and a token: the message names the URL, not the token.
    runs.push_back(box.kh("fetch", "private", k_dead_endpoint, {}, {{"HF_TOKEN", k_test_token}}));
    CHECK(runs.back().exit_code == 5);

    REQUIRE(runs.size() == 11);
    for (const auto& run : runs) {
        INFO(describe(run));
        CHECK(run.out.find(k_test_token) == std::string::npos);
        CHECK(run.err.find(k_test_token) == std::string::npos);
        CHECK(run.out.find(wrong) == std::string::npos);
        CHECK(run.err.find(wrong) == std::string::npos);
    }
}

TEST_CASE("credentials inside the endpoint URL are not printed", "[cli]") {
    Sandbox box;
    const std::string secret = "kh_url_password_93b1";
    ProcessResult r = box.kh("fetch", "vector-add", "http://someone:" + secret + "@127.0.0.1:9", {"--json"});
    INFO(describe(r));
    CHECK(r.exit_code == 5);
    CHECK(r.err.find("127.0.0.1:9") != std::string::npos);
    CHECK(r.err.find(secret) == std::string::npos);
    CHECK(r.out.find(secret) == std::string::npos);
}

TEST_CASE("a malformed numeric variable stops fetch, load, info and list with a usage error", "[cli]") {
    Sandbox box;
    struct Case {
        const char* variable;
        const char* range;
        std::vector<const char*> values;
    };
    const std::vector<Case> cases = {
        {"KERNHUB_RETRIES", "from 0 to 10", {"3abc", " 3", "-1", "99999999999", "", "11"}},
        {"KERNHUB_MAX_WAIT", "from 0 to 86400", {"abc", "86401", "-5", "", "60s"}},
        // A switch that weakens a check when off: a typo is not "off".
        {"KERNHUB_VERIFY_ON_LOAD", "must be 1, true, yes or on", {"2", " 1", "enable", "y"}},
    };
    // The endpoint is dead: fetch, load or info ignoring the variable would
    // fail with exit 5, and list would succeed; only a usage error is 2.
    auto run = [&](const std::string& command, const EnvChanges& env, const std::vector<std::string>& more = {}) {
        if (command == "list") {
            std::vector<std::string> args{"list", "--registry", box.registry.string()};
            args.insert(args.end(), more.begin(), more.end());
            return box.run(args, env);
        }
        return box.kh(command, "vector-add", k_dead_endpoint, more, env);
    };
    for (const auto& c : cases) {
        for (const char* value : c.values) {
            for (const char* command : {"fetch", "load", "info", "list"}) {
                INFO(command << " with " << c.variable << "='" << value << "'");
                check_error(run(command, {{c.variable, value}}), 2, {c.variable, c.range});
            }
        }
    }
    ProcessResult r = run("fetch", {{"KERNHUB_RETRIES", "3abc"}}, {"--json"});
    INFO(describe(r));
    CHECK(r.exit_code == 2);
    json error = parse_stdout(r)["error"];
    CHECK(error["code"] == 2);
    CHECK(error["message"].get<std::string>().find("KERNHUB_RETRIES") != std::string::npos);
}

TEST_CASE("KERNHUB_MAX_WAIT bounds how long the hub may make fetch wait", "[cli]") {
    KernelHub hub;
    Sandbox box;
    const std::string ep = hub.server().endpoint();
    hub.server().add_faults(
        {{{"match", "/revision/"}, {"action", "status"}, {"status", 429}, {"retry_after", "5"}, {"count", -1}}});
    ProcessResult r = box.kh("fetch", "vector-add", ep, {}, {{"KERNHUB_MAX_WAIT", "1"}, {"KERNHUB_RETRIES", "3"}});
    check_error(r, 5, {"asked to wait 5 s", "maximum of 1 s", "KERNHUB_MAX_WAIT"});
    CHECK(hub.server().count_requests("/revision/") == 1);  // failed at once, no retry

    // Within the maximum the hub's wait is honoured and the fetch succeeds.
    hub.server().reset();
    hub.server().add_faults(
        {{{"match", "/revision/"}, {"action", "status"}, {"status", 429}, {"retry_after", "1"}, {"count", 1}}});
    r = box.kh("fetch", "vector-add", ep, {"--json", "--quiet"}, {{"KERNHUB_MAX_WAIT", "2"}});
    INFO(describe(r));
    CHECK(r.exit_code == 0);
    CHECK(hub.server().count_requests("/revision/") == 2);
}

TEST_CASE("KERNHUB_ALLOWED_ORGS refuses other organisations before any request or cached file", "[cli]") {
    KernelHub hub;
    Sandbox box;
    const std::string ep = hub.server().endpoint();
    auto requests = [&] { return hub.server().stats()["requests"].size(); };

    // Not on the list: exit 4 naming the repo, the organisation and the variable; nothing sent.
    for (const char* command : {"fetch", "load", "info"}) {
        ProcessResult r =
            box.kh(command, "vector-add", ep, {"--quiet"}, {{"KERNHUB_ALLOWED_ORGS", "kernels-community"}});
        check_error(r, 4, {"'kernhub-test/vector-add'", "'kernhub-test'", "KERNHUB_ALLOWED_ORGS"});
    }
    CHECK(requests() == 0);
    CHECK_FALSE(fs::exists(box.cache / k_vector_add_folder));

    // On the list (any case, white space around names ignored): fetched and loaded.
    ProcessResult r =
        box.kh("load", "vector-add", ep, {"--quiet"}, {{"KERNHUB_ALLOWED_ORGS", "kernels-community , KernHub-Test"}});
    INFO(describe(r));
    CHECK(r.exit_code == 0);
    CHECK(requests() > 0);

    // The cache does not get around it: an offline load of the cached kernel is refused too.
    r = box.kh("load", "vector-add", ep, {"--quiet", "--offline"}, {{"KERNHUB_ALLOWED_ORGS", "kernels-community"}});
    check_error(r, 4, {"KERNHUB_ALLOWED_ORGS"});
    CHECK(box.kh("load", "vector-add", ep, {"--quiet", "--offline"}).exit_code == 0);  // unset: any organisation

    // A direct ORG/REPO reference is held to the same list.
    r = box.kh("fetch", "kernhub-test/vector-add@main", ep, {"--quiet"}, {{"KERNHUB_ALLOWED_ORGS", "other"}});
    check_error(r, 4, {"'kernhub-test'"});

    // A name the hub could not hold is a usage error, not a silent miss.
    r = box.kh("fetch", "vector-add", ep, {"--quiet"}, {{"KERNHUB_ALLOWED_ORGS", "kernhub-test,bad org"}});
    check_error(r, 2, {"KERNHUB_ALLOWED_ORGS", "'bad org'"});
    // Only white space is a slip, not "every organisation".
    r = box.kh("fetch", "vector-add", ep, {"--quiet"}, {{"KERNHUB_ALLOWED_ORGS", "  "}});
    check_error(r, 2, {"KERNHUB_ALLOWED_ORGS", "only white space"});
}
