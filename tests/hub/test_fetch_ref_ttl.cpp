// KERNHUB_REF_TTL (Options::ref_ttl_seconds): a branch resolved on the hub
// within the TTL is taken from the cache; the time lives in
// .kernhub/refs/<revision>.json and counts only while it is sound.
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cache/cache.hpp"
#include "fetch/fetcher.hpp"
#include "hub/hub_client.hpp"
#include "hub/hub_env.hpp"
#include "hub/transport.hpp"
#include "kernhub/kernhub.hpp"
#include "select/variant.hpp"
#include "support/kernel_hub.hpp"
#include "support/manual_clock.hpp"
#include "support/slurp.hpp"

using namespace kernhub;
using namespace kernhub::test;
using namespace kernhub::test::hub_env;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::int64_t now_seconds() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

Options with_ttl(const Env& env, const std::string& endpoint, int ttl) {
    Options o = env.options(endpoint);
    o.ref_ttl_seconds = ttl;
    return o;
}

fs::path side_file(const Env& env, const std::string& name = "main.json") {
    return env.folder() / ".kernhub" / "refs" / name;
}

json read_json(const fs::path& path) {
    std::ifstream in(path);
    return json::parse(in, nullptr, false);
}

void write_text(const fs::path& path, const std::string& text) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

// A hub of its own (a copy of the standard tree) whose main branch a test
// may move to the v2 commit, as a push would.
struct MovableHub {
    TempDir dir;
    fs::path root = dir.path() / "hub";
    std::unique_ptr<HubServer> server;

    explicit MovableHub(const fs::path& standard) {
        fs::copy(standard, root, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
        server = std::make_unique<HubServer>(root);
    }

    // main -> v2's commit, in the index and in the revision answer.
    std::string move_main_to_v2() {
        const fs::path index_path = root / "_hub.json";
        json index = read_json(index_path);
        json& repo = index["repos"]["kernhub-test/vector-add"];
        const std::string v2 = repo["branches"]["v2"].get<std::string>();
        repo["branches"]["main"] = v2;
        const fs::path revisions = root / "api" / "kernels" / "kernhub-test" / "vector-add" / "revision";
        fs::copy_file(revisions / "v2", revisions / "main", fs::copy_options::overwrite_existing);
        // A new inode: the server reloads its index when _hub.json changes.
        write_text(root / "_hub.json.new", index.dump());
        fs::rename(root / "_hub.json.new", index_path);
        return v2;
    }
};

}  // namespace

TEST_CASE("ref TTL 0: a warm branch fetch asks the hub once and records no time", "[hub]") {
    KernelHub hub;
    Env env;
    Client(with_ttl(env, hub.server().endpoint(), 0)).fetch("vector-add");
    hub.server().reset();
    FetchResult warm = Client(with_ttl(env, hub.server().endpoint(), 0)).fetch("vector-add");
    CHECK(warm.requests == 1);
    CHECK(hub.server().count_requests("/revision/main") == 1);
    CHECK_FALSE(fs::exists(side_file(env)));
}

TEST_CASE("ref TTL: a fresh resolution in the cache is used without asking the hub", "[hub]") {
    KernelHub hub;
    Env env;
    const std::int64_t before = now_seconds();
    FetchResult cold = Client(with_ttl(env, hub.server().endpoint(), 60)).fetch("vector-add");
    const std::int64_t after = now_seconds();

    // The side file: the commit and when it was asked for; refs/ stays a bare commit id.
    json side = read_json(side_file(env));
    REQUIRE(side.is_object());
    CHECK(side["commit"] == cold.commit);
    REQUIRE(side["resolved_at"].is_number_integer());
    CHECK(side["resolved_at"].get<std::int64_t>() >= before);
    CHECK(side["resolved_at"].get<std::int64_t>() <= after);
    CHECK(slurp(env.folder() / "refs" / "main") == cold.commit);

    hub.server().reset();
    FetchResult warm = Client(with_ttl(env, hub.server().endpoint(), 60)).fetch("vector-add");
    CHECK(warm.requests == 0);
    CHECK(warm.commit == cold.commit);
    CHECK(warm.bytes_downloaded == 0);
    CHECK(hub.server().stats()["requests"].empty());
    // Using the record writes nothing: it keeps the time of the question.
    CHECK(read_json(side_file(env)) == side);

    SECTION("offline is unchanged") {
        Options o = with_ttl(env, hub.server().endpoint(), 60);
        o.offline = true;
        CHECK(Client(o).fetch("vector-add").commit == cold.commit);
        CHECK(hub.server().stats()["requests"].empty());
    }
    SECTION("without a TTL the same cache asks the hub again") {
        CHECK(Client(with_ttl(env, hub.server().endpoint(), 0)).fetch("vector-add").requests == 1);
        CHECK(hub.server().count_requests("/revision/main") == 1);
    }
}

TEST_CASE("ref TTL: once the TTL has passed, a moved branch is followed", "[hub]") {
    KernelHub standard;
    MovableHub hub(standard.root());
    Env env;
    const std::string endpoint = hub.server->endpoint();
    FetchResult first = Client(with_ttl(env, endpoint, 1)).fetch("vector-add");
    const std::string v2 = hub.move_main_to_v2();
    REQUIRE(v2 != first.commit);

    SECTION("once the first fetch's own record is older than a TTL of 1 s") {
        // Time passes by moving the record's time back, not by sleeping.
        json record = read_json(side_file(env));
        REQUIRE(record["commit"] == first.commit);
        REQUIRE(record["resolved_at"].get<std::int64_t>() <= now_seconds());
        record["resolved_at"] = record["resolved_at"].get<std::int64_t>() - 2;
        write_text(side_file(env), record.dump());
        hub.server->reset();
        FetchResult moved = Client(with_ttl(env, endpoint, 1)).fetch("vector-add");
        CHECK(moved.commit == v2);
        CHECK(hub.server->count_requests("/revision/main") == 1);
        CHECK(slurp(env.folder() / "refs" / "main") == v2);
        CHECK(read_json(side_file(env))["commit"] == v2);
    }
    SECTION("a record written 61 s ago, with a TTL of 60 s") {
        write_text(side_file(env), json{{"commit", first.commit}, {"resolved_at", now_seconds() - 61}}.dump());
        hub.server->reset();
        FetchResult moved = Client(with_ttl(env, endpoint, 60)).fetch("vector-add");
        CHECK(moved.commit == v2);
        CHECK(hub.server->count_requests("/revision/main") == 1);
        // The new answer's time replaces the old one.
        CHECK(read_json(side_file(env))["resolved_at"].get<std::int64_t>() >= now_seconds() - 5);
    }
    SECTION("within the TTL the cached commit is still used, as promised") {
        hub.server->reset();
        write_text(side_file(env), json{{"commit", first.commit}, {"resolved_at", now_seconds()}}.dump());
        FetchResult kept = Client(with_ttl(env, endpoint, 60)).fetch("vector-add");
        CHECK(kept.commit == first.commit);
        CHECK(hub.server->stats()["requests"].empty());
    }
}

TEST_CASE("ref TTL: a side file from the future, malformed or naming another commit is ignored", "[hub]") {
    KernelHub hub;
    Env env;
    FetchResult first = Client(with_ttl(env, hub.server().endpoint(), 300)).fetch("vector-add");
    const fs::path side = side_file(env);
    REQUIRE(fs::is_regular_file(side));
    const std::string other_commit(40, 'a');

    auto fetch_once = [&](const std::string& content) {
        INFO("side file: " << content);
        write_text(side, content);
        hub.server().reset();
        FetchResult again = Client(with_ttl(env, hub.server().endpoint(), 300)).fetch("vector-add");
        CHECK(again.commit == first.commit);
        CHECK(again.requests == 1);
        CHECK(hub.server().count_requests("/revision/main") == 1);
        // The hub's answer replaced the file with a sound one.
        json rewritten = read_json(side);
        CHECK(rewritten["commit"] == first.commit);
        CHECK(rewritten["resolved_at"].get<std::int64_t>() <= now_seconds());
    };
    const std::int64_t now = now_seconds();
    SECTION("a time in the future") {
        fetch_once(json{{"commit", first.commit}, {"resolved_at", now + 3600}}.dump());
    }
    SECTION("a time that would be trusted for ever") {
        fetch_once(R"({"commit": ")" + first.commit + R"(", "resolved_at": 18446744073709551615})");
    }
    SECTION("malformed") {
        for (const std::string& content :
             {std::string("{"), std::string("[]"), std::string(""), json{{"commit", first.commit}}.dump(),
              json{{"commit", first.commit}, {"resolved_at", "now"}}.dump(),
              json{{"commit", first.commit}, {"resolved_at", -5}}.dump(),
              json{{"commit", first.commit}, {"resolved_at", 1.5}}.dump(),
              json{{"commit", "HEAD"}, {"resolved_at", now}}.dump(), std::string(2048, ' ') + "{}"}) {
            fetch_once(content);
        }
    }
    SECTION("a commit other than refs/ holds (another tool moved the ref)") {
        fetch_once(json{{"commit", other_commit}, {"resolved_at", now}}.dump());
    }
    SECTION("a ref another tool moved, with the side file left as it was") {
        write_text(env.folder() / "refs" / "main", other_commit);
        hub.server().reset();
        FetchResult again = Client(with_ttl(env, hub.server().endpoint(), 300)).fetch("vector-add");
        CHECK(again.commit == first.commit);
        CHECK(hub.server().count_requests("/revision/main") == 1);
        CHECK(slurp(env.folder() / "refs" / "main") == first.commit);
    }
    SECTION("a symbolic link is not followed") {
        const fs::path elsewhere = env.dir.path() / "elsewhere.json";
        write_text(elsewhere, json{{"commit", first.commit}, {"resolved_at", now}}.dump());
        fs::remove(side);
        fs::create_symlink(elsewhere, side);
        hub.server().reset();
        CHECK(Client(with_ttl(env, hub.server().endpoint(), 300)).fetch("vector-add").requests == 1);
        CHECK(fs::is_regular_file(fs::symlink_status(side)));  // replaced by the hub's answer
    }
}

TEST_CASE("ref resolution files: names are encoded into .kernhub/refs/, nothing escapes it", "[hub]") {
    TempDir dir;
    cache::RepoCache cache(dir.path(), RepoType::kernel, "org/name");
    const std::string commit(40, 'b');
    CHECK(cache::ref_resolution_name("main") == "main.json");
    CHECK(cache::ref_resolution_name("release/v1") == "release%2Fv1.json");
    CHECK(cache::ref_resolution_name("a%2Fb") == "a%252Fb.json");
    CHECK(cache::ref_resolution_name("..x") == "..x.json");
    CHECK(cache::ref_resolution_name("caf\xc3\xa9") == "caf%C3%A9.json");
    CHECK(cache::ref_resolution_name(std::string(251, 'x')) == std::nullopt);  // over NAME_MAX with .json

    for (const std::string revision : {"release/v1", "a%2Fb", "v1.0", "..x", "x/y/z"}) {
        INFO(revision);
        cache.write_ref_resolution(revision, cache::RefResolution{commit, 1234});
        const fs::path expected = cache.folder() / ".kernhub" / "refs" / *cache::ref_resolution_name(revision);
        CHECK(fs::is_regular_file(expected));
        auto back = cache.read_ref_resolution(revision);
        REQUIRE(back);
        CHECK(back->commit == commit);
        CHECK(back->resolved_at == 1234);
    }
    // Everything written is directly in .kernhub/refs/, no folder below it, and no temp is left.
    std::size_t files = 0;
    for (const auto& entry : fs::recursive_directory_iterator(cache.folder())) {
        if (entry.is_directory()) continue;
        CHECK(entry.path().parent_path() == cache.folder() / ".kernhub" / "refs");
        ++files;
    }
    CHECK(files == 5);
    CHECK(fs::is_empty(cache.staging_dir()));
    // An unsafe revision is refused as refs/ refuses it.
    for (const std::string revision : {"../x", "a/../b", "", "/abs"}) {
        INFO(revision);
        CHECK(code_of([&] { cache.read_ref_resolution(revision); }) == ErrorCode::usage);
        CHECK(code_of([&] {
                  cache.write_ref_resolution(revision, cache::RefResolution{commit, 1});
              }) == ErrorCode::usage);
    }
    // A revision too long to name a file is simply not recorded.
    cache.write_ref_resolution(std::string(251, 'x'), cache::RefResolution{commit, 1});
    CHECK_FALSE(cache.read_ref_resolution(std::string(251, 'x')));
}

TEST_CASE("Options::ref_ttl_seconds wins over KERNHUB_REF_TTL and is range-checked", "[hub]") {
    KernelHub hub;
    Env env;
    Client(with_ttl(env, hub.server().endpoint(), 300)).fetch("vector-add");
    hub.server().reset();
    // The option set to 0 turns the TTL off for this client whatever the cache holds.
    CHECK(Client(with_ttl(env, hub.server().endpoint(), 0)).fetch("vector-add").requests == 1);
    CHECK(Client(with_ttl(env, hub.server().endpoint(), 300)).fetch("vector-add").requests == 0);
    for (int bad : {-1, 31'536'001}) {
        INFO(bad);
        std::string message;
        CHECK(code_of([&] { Client(with_ttl(env, hub.server().endpoint(), bad)); }, &message) == ErrorCode::usage);
        CHECK(message.find("ref_ttl_seconds") != std::string::npos);
    }
    CHECK(code_of([&] { Client(with_ttl(env, hub.server().endpoint(), 31'536'000)); }) == ErrorCode::ok);
}

TEST_CASE("ref TTL: lock asks the hub for the branch whatever the TTL", "[hub]") {
    KernelHub hub;
    Env env;
    // The project names one kernel on a branch; a fetch records a fresh time.
    json project = {{"format", 1},
                    {"kernels",
                     {{"vector-add",
                       {{"repo_id", "kernhub-test/vector-add"},
                        {"revision", "main"},
                        {"symbol", "kh_vector_add"},
                        {"file", "libvector_add.so"}}}}}};
    std::ofstream(env.dir.path() / "kernhub.json") << project.dump(2);
    Options options = with_ttl(env, hub.server().endpoint(), 300);
    options.registries.clear();
    const FetchResult fetched = Client(options).fetch("vector-add");
    REQUIRE(read_json(side_file(env)).is_object());

    // Within the TTL a fetch asks nothing, but a lock pins what the hub
    // serves now: it asks.
    hub.server().reset();
    CHECK(Client(options).fetch("vector-add").requests == 0);
    LockReport report = Client(options).lock(LockOptions{});
    CHECK(hub.server().count_requests("/revision/main") == 1);
    REQUIRE(report.kernels.size() == 1);
    CHECK(report.kernels[0].commit == fetched.commit);
}

TEST_CASE("ref TTL: a resolution's age is read on the hub client's clock", "[hub]") {
    KernelHub standard;
    MovableHub hub(standard.root());
    Env env;
    const std::string endpoint = hub.server->endpoint();
    // The clock starts before the resolution is recorded (in whole seconds
    // of real time), so the clock's reading is never ahead of it: 59 s on
    // the clock is at most 59 s of age.
    auto clock = std::make_shared<ManualClock>();
    const FetchResult first = Client(with_ttl(env, endpoint, 60)).fetch("vector-add");
    const std::string v2 = hub.move_main_to_v2();

    // The same cache through a Fetcher whose HTTP policy has the clock the
    // test moves: the record says "just now" until the clock passes 60 s.
    hub::TransportConfig config;
    config.endpoint = endpoint;
    config.policy.clock = clock;
    hub::HubClient client(endpoint, hub::make_transport(config), false);
    fetch::Fetcher fetcher(env.cache, &client, nullptr);
    fetch::FetchRequest request;
    request.repo = {RepoType::kernel, "kernhub-test/vector-add"};
    request.revision = "main";
    request.host = select::detect_host();
    request.ref_ttl_seconds = 60;

    hub.server->reset();
    CHECK(fetcher.choose(request).commit == first.commit);
    CHECK(hub.server->count_requests("/revision/main") == 0);
    clock->advance(std::chrono::seconds(59));
    CHECK(fetcher.choose(request).commit == first.commit);
    CHECK(hub.server->count_requests("/revision/main") == 0);
    // Well past the TTL, whatever real time the first fetch took.
    clock->advance(std::chrono::seconds(30));
    CHECK(fetcher.choose(request).commit == v2);
    CHECK(hub.server->count_requests("/revision/main") == 1);
}
