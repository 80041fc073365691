// `kernhub lock` and `kernhub prewarm`: a lock for several targets made on
// this CPU-only machine, pins kept and updated, --check, prewarm from
// kernhub.lock and both kernels.lock formats, refs, offline, and a hub that
// changed what was locked.
#include "cli_support.hpp"
#include "support/hub_builder.hpp"

using namespace kernhub::test;
using namespace kernhub::test::cli;

namespace {

const std::string k_lock_repo = "locktest/kern";
const std::string k_lock_folder = "kernels--locktest--kern";
const std::string k_lock_cuda = "native-cu128-x86_64-linux";

// One repo with the host's CPU variant (a real .so and a plain file), a
// CUDA variant and a fatbin-only variant; main and v1 on the first commit.
// `fatbin_text` lets a test publish different bytes; `second_commit` adds
// a later commit on main only.
json lock_hub_spec(const std::string& fatbin_text = "fatbin bytes v1", bool second_commit = false) {
    const std::string cpu = "build/" + host_cpu_variant() + "/";
    json first = {{"message", "first"},
                  {"branches", {"main", "v1"}},
                  {"metadata", true},
                  {"files",
                   {{cpu + "libkern.so", {{"path", vector_add_so().string()}, {"lfs", true}}},
                    {cpu + "NOTES.txt", {{"text", "plain file, not in LFS\n"}}},
                    {"build/" + k_lock_cuda + "/libkern.so", {{"text", "cuda shared object stand-in"}, {"lfs", true}}},
                    {"build/native-cuda/kern.fatbin", {{"text", fatbin_text}, {"lfs", true}}},
                    // A variant whose metadata.json has no digest: only the
                    // lock covers its plain file.
                    {"build/native-cuda/metadata.json", {{"text", "{\"name\": \"kern\"}\n"}}},
                    {"build/native-cuda/README.txt", {{"text", "plain file of the cuda variant\n"}}}}}};
    json commits = json::array({first});
    if (second_commit) {
        json second = first;
        second["message"] = "second";
        second["branches"] = {"main"};
        second["files"]["build/native-cuda/kern.fatbin"]["text"] = "fatbin bytes v2";
        commits.push_back(second);
    }
    return {{"repos", json::array({{{"repo_id", k_lock_repo}, {"type", "kernel"}, {"commits", commits}}})}};
}

std::string sha_of(const fs::path& hub, const std::string& revision) {
    json doc = json::parse(read_text(hub / "api/kernels/locktest/kern/revision" / revision));
    return doc["sha"].get<std::string>();
}

// Makes the hub tree at `dir` claim commit `to` for what it publishes as
// `from`: a hub that serves other bytes under a locked commit, consistently
// (listing, metadata.json digest and bytes agree with each other).
void impersonate(const fs::path& dir, const std::string& from, const std::string& to) {
    std::vector<fs::path> renames;
    for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator(); ++it) {
        if (it->path().filename() == from) renames.push_back(it->path());
        if (!it->is_regular_file()) continue;
        const bool api = it->path().string().find("/api/") != std::string::npos;
        if (!api && it->path().filename() != "_hub.json") continue;
        std::string text = read_text(it->path());
        for (auto at = text.find(from); at != std::string::npos; at = text.find(from, at))
            text.replace(at, from.size(), to);
        write_text(it->path(), text);
    }
    for (const auto& path : renames) fs::rename(path, path.parent_path() / to);
}

struct LockProject {
    Sandbox sandbox;
    fs::path hub = sandbox.dir.path() / "hub";
    fs::path project = sandbox.dir.path() / "project";
    std::string endpoint = "file://" + hub.string();
    fs::path image_cache = sandbox.dir.path() / "image-cache";

    explicit LockProject(const json& spec = lock_hub_spec()) {
        make_hub(spec, hub);
        fs::create_directories(project);
        write_manifest("kh_vector_add");
    }

    void write_manifest(const std::string& symbol) const {
        json manifest = {{"format", 1},
                         {"kernels", {{"kern", {{"repo_id", k_lock_repo}, {"version", 1}, {"symbol", symbol}}}}}};
        write_text(project / "kernhub.json", manifest.dump(2));
    }

    // `kernhub COMMAND` against the hub, quiet. `lock` works in the
    // developer's cache and `prewarm` fills the image's, as on a builder.
    ProcessResult run(const std::string& command, std::vector<std::string> more = {},
                      const std::string& use_endpoint = {}) const {
        const fs::path& cache = command == "lock" ? sandbox.cache : image_cache;
        std::vector<std::string> args{command,       "--endpoint",   use_endpoint.empty() ? endpoint : use_endpoint,
                                      "--cache-dir", cache.string(), "--quiet"};
        if (command == "lock" || std::find(more.begin(), more.end(), "--lock") == more.end()) {
            args.push_back("--project");
            args.push_back(project.string());
        }
        args.insert(args.end(), more.begin(), more.end());
        return sandbox.run(args);
    }

    fs::path lock_file() const { return project / "kernhub.lock"; }
    fs::path repo() const { return image_cache / k_lock_folder; }
};

}  // namespace

TEST_CASE(
    "lock pins a CUDA target and the CPU variant on a CPU-only machine, with sizes, digests and the variant hash") {
    LockProject p;
    ProcessResult r = p.run("lock", {"--target", k_lock_cuda, "--target", host_cpu_variant(), "--json"});
    INFO(describe(r));
    REQUIRE(r.exit_code == 0);
    json lock = json::parse(read_text(p.lock_file()));
    CHECK(lock["format"] == 1);
    const json& kern = lock["kernels"]["kern"];
    CHECK(kern["repo_id"] == k_lock_repo);
    CHECK(kern["repo_type"] == "kernel");
    CHECK(kern["revision"] == "v1");
    CHECK(kern["symbol"] == "kh_vector_add");
    CHECK(kern["commit"] == sha_of(p.hub, "v1"));
    std::vector<std::string> expected{k_lock_cuda, host_cpu_variant()};
    std::sort(expected.begin(), expected.end());
    CHECK(keys_of(kern["variants"]) == expected);
    CHECK(parse_stdout(r)["kernels"][0]["missing_targets"].empty());
    const std::string commit = kern["commit"];
    for (const std::string& variant : {k_lock_cuda, host_cpu_variant()}) {
        const json& files = kern["variants"][variant]["files"];
        CHECK(kern["variants"][variant]["hash"].get<std::string>().rfind("sha256-", 0) == 0);
        for (auto it = files.begin(); it != files.end(); ++it) {
            fs::path source = p.hub / "kernels/locktest/kern/resolve" / commit / "build" / variant / it.key();
            CHECK(it.value()["sha256"] == sha256_of(source));
            CHECK(it.value()["size"] == fs::file_size(source));
        }
    }
    CHECK(kern["variants"][host_cpu_variant()]["files"].contains("NOTES.txt"));
    // Only plain files were downloaded to describe them; LFS files came
    // from the listing.
    CHECK_FALSE(tree_has_name(p.sandbox.cache / k_lock_folder / "blobs", sha256_of(vector_add_so())));
    // The two-space indent, sorted keys and final newline.
    std::string text = read_text(p.lock_file());
    CHECK(text.back() == '\n');
    CHECK(text == lock.dump(2) + "\n");
}

TEST_CASE("re-locking unchanged rewrites identical bytes with no request, and --check passes") {
    LockProject p;
    HubServer server(p.hub);
    REQUIRE(p.run("lock", {"--target", k_lock_cuda}, server.endpoint()).exit_code == 0);
    const std::string first = read_text(p.lock_file());
    ProcessResult again = p.run("lock", {"--json"}, server.endpoint());
    INFO(describe(again));
    REQUIRE(again.exit_code == 0);
    json report = parse_stdout(again);
    CHECK(report["changed"] == false);
    CHECK(report["requests"] == 0);
    CHECK(report["kernels"][0]["pin_kept"] == true);
    CHECK(report["kernels"][0]["variants"] == json::array({k_lock_cuda}));  // the locked targets are kept
    CHECK(read_text(p.lock_file()) == first);
    ProcessResult check = p.run("lock", {"--check"}, server.endpoint());
    CHECK(check.exit_code == 0);
    CHECK(check.out.empty());
}

TEST_CASE("lock --check exits 8 with a diff and writes nothing when the lock is stale") {
    LockProject p;
    REQUIRE(p.run("lock").exit_code == 0);
    const std::string before = read_text(p.lock_file());
    p.write_manifest("kh_saxpy");
    ProcessResult r = p.run("lock", {"--check"});
    INFO(describe(r));
    CHECK(r.exit_code == 8);
    CHECK(r.out.find("-      \"symbol\": \"kh_vector_add\",") != std::string::npos);
    CHECK(r.out.find("+      \"symbol\": \"kh_saxpy\",") != std::string::npos);
    CHECK(r.err.find("out of date") != std::string::npos);
    CHECK(read_text(p.lock_file()) == before);

    ProcessResult json_check = p.run("lock", {"--check", "--json"});
    CHECK(json_check.exit_code == 8);
    json report = parse_stdout(json_check);
    CHECK(report["changed"] == true);
    CHECK(report["error"]["code"] == 8);

    fs::remove(p.lock_file());
    CHECK(p.run("lock", {"--check"}).exit_code == 8);
    CHECK_FALSE(fs::exists(p.lock_file()));
}

TEST_CASE("a pin stays when the branch moves, until --update asks") {
    LockProject p;
    REQUIRE(p.run("lock", {"--target", "native-cuda"}).exit_code == 0);
    const std::string old_commit = json::parse(read_text(p.lock_file()))["kernels"]["kern"]["commit"];
    // The publisher moves main to a new commit; v1 stays. Lock "main".
    make_hub(lock_hub_spec("fatbin bytes v1", true), p.hub);
    json manifest = {
        {"format", 1},
        {"kernels", {{"kern", {{"repo_id", k_lock_repo}, {"revision", "main"}, {"symbol", "kh_vector_add"}}}}}};
    write_text(p.project / "kernhub.json", manifest.dump());
    // A changed revision re-resolves.
    REQUIRE(p.run("lock").exit_code == 0);
    const std::string main_commit = json::parse(read_text(p.lock_file()))["kernels"]["kern"]["commit"];
    CHECK(main_commit == sha_of(p.hub, "main"));
    CHECK(main_commit != old_commit);

    // Now pin an older state and check that re-locking keeps it.
    json lock = json::parse(read_text(p.lock_file()));
    make_hub(lock_hub_spec("fatbin bytes v1", false), p.hub);  // main back at the first commit
    REQUIRE(p.run("lock", {"--update", "kern"}).exit_code == 0);
    const std::string pinned = json::parse(read_text(p.lock_file()))["kernels"]["kern"]["commit"];
    CHECK(pinned == old_commit);
    make_hub(lock_hub_spec("fatbin bytes v1", true), p.hub);  // main moves again
    REQUIRE(p.run("lock").exit_code == 0);
    CHECK(json::parse(read_text(p.lock_file()))["kernels"]["kern"]["commit"] == old_commit);
    ProcessResult update = p.run("lock", {"--update", "--json"});
    INFO(describe(update));
    REQUIRE(update.exit_code == 0);
    CHECK(json::parse(read_text(p.lock_file()))["kernels"]["kern"]["commit"] == main_commit);
    CHECK(parse_stdout(update)["kernels"][0]["pin_kept"] == false);
    check_error(p.run("lock", {"--update", "nope"}), 2, {"nope", "kernhub.json"});
}

TEST_CASE("prewarm fetches the locked CUDA target on a CPU-only machine, verifies it and writes the ref") {
    LockProject p;
    REQUIRE(p.run("lock", {"--target", "native-cuda", "--target", host_cpu_variant()}).exit_code == 0);
    const std::string commit = json::parse(read_text(p.lock_file()))["kernels"]["kern"]["commit"];
    ProcessResult r = p.run("prewarm", {"--target", "native-cuda", "--json"});
    INFO(describe(r));
    REQUIRE(r.exit_code == 0);
    json report = parse_stdout(r);
    REQUIRE(report["kernels"].size() == 1);
    CHECK(report["format"] == "kernhub.lock");
    CHECK(report["kernels"][0]["variant"] == "native-cuda");
    CHECK(report["kernels"][0]["fetched"] == 3);
    CHECK(report["kernels"][0]["refs"] == json::array({"v1"}));
    CHECK(read_text(p.repo() / "refs/v1") == commit);
    CHECK(read_text(p.repo() / "snapshots" / commit / "build/native-cuda/kern.fatbin") == "fatbin bytes v1");

    // Both targets: the first is already there.
    ProcessResult both = p.run("prewarm", {"--target", "native-cuda", "--target", host_cpu_variant(), "--json"});
    INFO(describe(both));
    REQUIRE(both.exit_code == 0);
    json second = parse_stdout(both);
    REQUIRE(second["kernels"].size() == 2);
    CHECK(second["kernels"][0]["fetched"] == 0);
    CHECK(second["kernels"][0]["already_cached"] == 3);
    CHECK(second["kernels"][1]["fetched"] == 3);
    CHECK(second["kernels"][1]["refs"].empty());  // refs/v1 is already right

    // Offline, a fetch of the version finds it through refs/v1.
    ProcessResult offline = p.sandbox.run(
        {"fetch", k_lock_repo + "@v1", "--target", "native-cuda", "--offline", "--cache-dir", p.image_cache.string()});
    CHECK(offline.exit_code == 0);

    // A target the kernel lacks that the lock does not mark, beside one it
    // has: refused, naming the kernel and the target, not silently dropped.
    check_error(p.run("prewarm", {"--target", "no-such-variant", "--target", "native-cuda"}), 3,
                {"'kern' (no-such-variant)", "lock again naming those targets (--target)"});

    // A target the lock does not have is refused.
    check_error(p.run("prewarm", {"--target", k_lock_cuda}), 3,
                {"kern", k_lock_cuda, "lock again naming those targets (--target)"});
}

TEST_CASE("prewarm refuses a hub that changed what was locked, naming the file, and keeps it out of the cache") {
    LockProject p;
    REQUIRE(p.run("lock", {"--target", "native-cuda"}).exit_code == 0);
    const std::string commit = json::parse(read_text(p.lock_file()))["kernels"]["kern"]["commit"];

    // The same commit id, other bytes: listing, metadata digest and file agree.
    fs::path tampered = p.sandbox.dir.path() / "tampered";
    make_hub(lock_hub_spec("fatbin bytes, tampered"), tampered);
    const std::string fake = sha_of(tampered, "v1");
    impersonate(tampered, fake, commit);
    REQUIRE(sha_of(tampered, "v1") == commit);
    // kernhub fetch alone accepts it: the hub is self-consistent.
    ProcessResult fetch =
        p.sandbox.run({"fetch", k_lock_repo + "@" + commit, "--target", "native-cuda", "--endpoint",
                       "file://" + tampered.string(), "--cache-dir", (p.sandbox.dir.path() / "other-cache").string()});
    REQUIRE(fetch.exit_code == 0);

    ProcessResult r = p.run("prewarm", {"--target", "native-cuda"}, "file://" + tampered.string());
    check_error(r, 4, {"kern.fatbin", "lock"});
    CHECK_FALSE(fs::exists(p.repo() / "snapshots" / commit / "build/native-cuda/kern.fatbin"));
    const std::string bad_sha =
        sha256_of(tampered / "kernels/locktest/kern/resolve" / commit / "build/native-cuda/kern.fatbin");
    CHECK_FALSE(tree_has_name(p.repo() / "blobs", bad_sha));
}

TEST_CASE("prewarm names a changed plain file and commits none of its bytes") {
    LockProject p;
    REQUIRE(p.run("lock").exit_code == 0);  // this host's variant, with NOTES.txt
    const std::string commit = json::parse(read_text(p.lock_file()))["kernels"]["kern"]["commit"];
    fs::path tampered = p.sandbox.dir.path() / "tampered";
    json spec = lock_hub_spec();
    spec["repos"][0]["commits"][0]["files"]["build/" + host_cpu_variant() + "/NOTES.txt"]["text"] =
        "plain file, NOT in LFS\n";  // same length
    make_hub(spec, tampered);
    impersonate(tampered, sha_of(tampered, "v1"), commit);
    ProcessResult r = p.run("prewarm", {}, "file://" + tampered.string());
    // metadata.json lists the changed digest, so it is the first file that
    // is not what was locked.
    check_error(r, 4, {"metadata.json", "lock file pins"});
    CHECK_FALSE(fs::exists(p.repo() / "snapshots" / commit / "build" / host_cpu_variant() / "metadata.json"));
}

TEST_CASE("prewarm checks a plain file no digest covers against its pin while it streams") {
    LockProject p;
    REQUIRE(p.run("lock", {"--target", "native-cuda"}).exit_code == 0);
    const std::string commit = json::parse(read_text(p.lock_file()))["kernels"]["kern"]["commit"];
    fs::path tampered = p.sandbox.dir.path() / "tampered";
    json spec = lock_hub_spec();
    spec["repos"][0]["commits"][0]["files"]["build/native-cuda/README.txt"]["text"] =
        "PLAIN file of the cuda variant\n";  // same length, same listing size
    make_hub(spec, tampered);
    impersonate(tampered, sha_of(tampered, "v1"), commit);
    ProcessResult r = p.run("prewarm", {"--target", "native-cuda"}, "file://" + tampered.string());
    check_error(r, 4, {"README.txt", "lock file pins"});
    CHECK_FALSE(fs::exists(p.repo() / "snapshots" / commit / "build/native-cuda/README.txt"));
    // README.txt's partial is discarded. kern.fatbin streams beside it and
    // is stopped by the failure: its partial may stay, for a later resume,
    // and can only hold a prefix of the locked bytes.
    const std::string fatbin = "fatbin bytes v1";
    const std::string fatbin_blob = hex_digest(fatbin, EVP_sha256());  // an LFS file's blob is named by its SHA-256
    for (const auto& e : fs::recursive_directory_iterator(p.repo() / "blobs")) {
        const std::string body = read_text(e.path());
        INFO(e.path().filename().string() << ": " << body);
        CHECK(body.find("PLAIN") == std::string::npos);
        if (e.path().extension() != ".incomplete") continue;
        CHECK(e.path().filename().string().rfind(fatbin_blob + ".", 0) == 0);
        CHECK(fatbin.compare(0, body.size(), body) == 0);
    }
}

TEST_CASE("prewarm without a lock says to run kernhub lock, and offline it only verifies what is cached") {
    LockProject p;
    check_error(p.run("prewarm"), 3, {"kernhub.lock", "kernhub lock"});
    check_error(p.run("prewarm", {"--lock", (p.project / "missing.lock").string()}), 3, {"missing.lock"});
    REQUIRE(p.run("lock").exit_code == 0);
    check_error(p.run("prewarm", {"--offline"}), 6, {"offline"});
    REQUIRE(p.run("prewarm").exit_code == 0);
    ProcessResult offline = p.run("prewarm", {"--offline", "--json"}, k_dead_endpoint);
    INFO(describe(offline));
    REQUIRE(offline.exit_code == 0);
    CHECK(parse_stdout(offline)["kernels"][0]["fetched"] == 0);
    // A damaged blob is found offline (exit 4), even though kernhub's own
    // record says the variant was verified: with a lock, bytes are hashed.
    const std::string commit = json::parse(read_text(p.lock_file()))["kernels"]["kern"]["commit"];
    fs::path notes = fs::canonical(p.repo() / "snapshots" / commit / "build" / host_cpu_variant() / "NOTES.txt");
    fs::permissions(notes, fs::perms::owner_write, fs::perm_options::add);
    write_text(notes, "plain file, not in LFS?\n");
    check_error(p.run("prewarm", {"--offline"}), 4, {"NOTES.txt"});
    write_text(notes, "plain file, not in LFS\n");
    REQUIRE(p.run("prewarm", {"--offline"}).exit_code == 0);
    // The same for an LFS blob, whose name is its SHA-256.
    fs::path so = fs::canonical(p.repo() / "snapshots" / commit / "build" / host_cpu_variant() / "libkern.so");
    fs::permissions(so, fs::perms::owner_write, fs::perm_options::add);
    std::string bytes = read_text(so);
    bytes[100] = static_cast<char>(bytes[100] ^ 1);
    write_text(so, bytes);
    check_error(p.run("prewarm", {"--offline"}), 4, {"libkern.so"});
    // A malformed lock is a usage error naming the file.
    write_text(p.lock_file(), "{\"format\": 1}");
    check_error(p.run("prewarm"), 2, {"kernhub.lock", "kernels"});
}

TEST_CASE("prewarm reads the kernels library's kernels.lock in its current and older formats") {
    LockProject p;
    const std::string commit = sha_of(p.hub, "v1");
    fs::path current = p.sandbox.dir.path() / "kernels.lock";
    write_text(
        current,
        json::array({{{"dependency", {{"repo-id", k_lock_repo}, {"version", 1}}}, {"lock", {{"commit", commit}}}}})
            .dump(2));
    ProcessResult r = p.run("prewarm", {"--lock", current.string(), "--target", "native-cuda", "--json"});
    INFO(describe(r));
    REQUIRE(r.exit_code == 0);
    json report = parse_stdout(r);
    CHECK(report["format"] == "kernels.lock");
    CHECK(report["kernels"][0]["name"] == k_lock_repo);
    CHECK(read_text(p.repo() / "refs/v1") == commit);

    // The older format pins each variant by its git_lfs_concat hash; take
    // the hash from a kernhub.lock of the same commit.
    REQUIRE(p.run("lock", {"--target", "native-cuda"}).exit_code == 0);
    const std::string hash =
        json::parse(read_text(p.lock_file()))["kernels"]["kern"]["variants"]["native-cuda"]["hash"];
    fs::path legacy = p.sandbox.dir.path() / "kernels-old.lock";
    auto write_legacy = [&](const std::string& h) {
        write_text(legacy,
                   json::array({{{"repo_id", k_lock_repo},
                                 {"sha", commit},
                                 {"variants", {{"native-cuda", {{"hash", h}, {"hash_type", "git_lfs_concat"}}}}}}})
                       .dump(2));
    };
    write_legacy(hash);
    ProcessResult old = p.run("prewarm", {"--lock", legacy.string(), "--target", "native-cuda", "--json"});
    INFO(describe(old));
    REQUIRE(old.exit_code == 0);
    CHECK(parse_stdout(old)["format"] == "kernels.lock (0.16)");
    std::string wrong = hash;
    wrong.back() = wrong.back() == '0' ? '1' : '0';
    write_legacy(wrong);
    check_error(p.run("prewarm", {"--lock", legacy.string(), "--target", "native-cuda"}), 4,
                {"native-cuda", "variant hash"});
}

TEST_CASE("lock stopped by SIGINT while the hub is slow says the lock file was not changed, and it was not") {
    LockProject p;
    HubServer server(p.hub);
    REQUIRE(p.run("lock", {"--target", k_lock_cuda}, server.endpoint()).exit_code == 0);
    const std::string before = read_text(p.lock_file());
    // --update asks the hub again; its answers are now held at a gate, and
    // the signal goes once this run's first request waits there.
    server.reset();
    server.add_faults({{{"match", "/api/"}, {"action", "hold"}, {"gate", "lock"}, {"count", -1}}});
    const Interrupted r = interrupt_when(p.sandbox,
                                         {"lock", "--update", "--endpoint", server.endpoint(), "--cache-dir",
                                          p.sandbox.cache.string(), "--project", p.project.string()},
                                         SIGINT, [&] { return server.wait_held("lock"); });
    server.release("lock");
    REQUIRE(r.started);
    INFO(r.err);
    CHECK(r.exit_code == 130);
    CHECK_THAT(r.err, Catch::Contains("kernhub: interrupted by SIGINT; the lock file was not changed"));
    CHECK(r.err.find("partial downloads") == std::string::npos);
    CHECK(read_text(p.lock_file()) == before);
}

TEST_CASE("a kept pin that contradicts its commit fails lock --check naming the field, and lock re-resolves it") {
    LockProject p(lock_hub_spec("fatbin bytes v1", true));
    json manifest = {
        {"format", 1},
        {"kernels", {{"kern", {{"repo_id", k_lock_repo}, {"revision", "main"}, {"symbol", "kh_vector_add"}}}}}};
    write_text(p.project / "kernhub.json", manifest.dump());
    HubServer server(p.hub);
    REQUIRE(p.run("lock", {"--target", "native-cuda"}, server.endpoint()).exit_code == 0);
    const std::string good = read_text(p.lock_file());
    const std::string main_commit = sha_of(p.hub, "main");
    const std::string v1_commit = sha_of(p.hub, "v1");
    REQUIRE(main_commit != v1_commit);

    SECTION("one file's size off by one byte: the listing is cached, no request is made") {
        json lock = json::parse(good);
        json& size = lock["kernels"]["kern"]["variants"]["native-cuda"]["files"]["kern.fatbin"]["size"];
        size = size.get<std::uint64_t>() + 1;
        write_text(p.lock_file(), lock.dump(2) + "\n");
        const std::string bad = read_text(p.lock_file());
        server.reset();
        ProcessResult check = p.run("lock", {"--check"}, server.endpoint());
        INFO(describe(check));
        CHECK(check.exit_code == 8);
        CHECK_THAT(check.err, Catch::Contains("kernel 'kern': the pin does not describe its commit (variant "
                                              "native-cuda, file kern.fatbin: size"));
        CHECK(server.stats()["requests"].empty());
        CHECK(read_text(p.lock_file()) == bad);
        ProcessResult as_json = p.run("lock", {"--check", "--json"}, server.endpoint());
        CHECK(as_json.exit_code == 8);
        json report = parse_stdout(as_json);
        CHECK_THAT(report["kernels"][0]["pin_problem"].get<std::string>(), Catch::Contains("kern.fatbin: size"));
        CHECK(report["error"]["code"] == 8);

        // Offline, with the listing in the cache, the check works the same.
        CHECK(p.run("lock", {"--check", "--offline"}, server.endpoint()).exit_code == 8);
    }
    SECTION("a plain file's sha256 edited: checked against the blob the cache holds, with no request") {
        json lock = json::parse(good);
        lock["kernels"]["kern"]["variants"]["native-cuda"]["files"]["README.txt"]["sha256"] = std::string(64, '0');
        write_text(p.lock_file(), lock.dump(2) + "\n");
        server.reset();
        ProcessResult check = p.run("lock", {"--check"}, server.endpoint());
        INFO(describe(check));
        CHECK(check.exit_code == 8);
        CHECK_THAT(check.err, Catch::Contains("variant native-cuda, file README.txt: sha256 " + std::string(64, '0') +
                                              " in the lock"));
        CHECK(server.stats()["requests"].empty());
    }
    SECTION("the commit of another revision (what a bad merge leaves)") {
        std::string bad = good;
        const std::size_t at = bad.find(main_commit);
        REQUIRE(at != std::string::npos);
        bad.replace(at, main_commit.size(), v1_commit);
        write_text(p.lock_file(), bad);
        ProcessResult check = p.run("lock", {"--check"}, server.endpoint());
        INFO(describe(check));
        CHECK(check.exit_code == 8);
        CHECK_THAT(check.err, Catch::Contains("kernel 'kern': the pin does not describe its commit (variant "
                                              "native-cuda, file kern.fatbin: sha256"));
        CHECK(read_text(p.lock_file()) == bad);

        // Offline with no cached listing of that commit: exit 6 naming the kernel.
        Sandbox fresh;
        ProcessResult offline = fresh.run({"lock", "--check", "--offline", "--endpoint", server.endpoint(),
                                           "--cache-dir", fresh.cache.string(), "--project", p.project.string()});
        INFO(describe(offline));
        CHECK(offline.exit_code == 6);
        CHECK_THAT(offline.err, Catch::Contains("kernel 'kern'"));
    }
    // Either way `lock` resolves the kernel again, says so, and the lock
    // then describes main's commit and passes --check; prewarm uses it.
    ProcessResult relock = p.run("lock", {"--json"}, server.endpoint());
    INFO(describe(relock));
    REQUIRE(relock.exit_code == 0);
    CHECK(parse_stdout(relock)["kernels"][0]["pin_kept"] == false);
    CHECK_THAT(relock.err, Catch::Contains("kernhub: warning: kernel 'kern': the pin does not describe its commit"));
    CHECK_THAT(relock.err, Catch::Contains("locked again from main"));
    CHECK(read_text(p.lock_file()) == good);
    CHECK(p.run("lock", {"--check"}, server.endpoint()).exit_code == 0);
    CHECK(p.run("prewarm", {"--target", "native-cuda"}, server.endpoint()).exit_code == 0);
}

TEST_CASE("lock --target records the kernels without that build, and prewarm --target skips exactly those") {
    // Two kernels: kern has the CUDA build, cpuonly does not.
    json spec = lock_hub_spec();
    const std::string cpu = "build/" + host_cpu_variant() + "/";
    json files = json::object();
    files[cpu + "libcpu.so"] = {{"path", vector_add_so().string()}, {"lfs", true}};
    json commit = {{"message", "cpu only"}, {"branches", {"main", "v1"}}, {"metadata", true}, {"files", files}};
    spec["repos"].push_back({{"repo_id", "locktest/cpuonly"}, {"type", "kernel"}, {"commits", json::array({commit})}});
    LockProject p(spec);
    json manifest = {{"format", 1},
                     {"kernels",
                      {{"kern", {{"repo_id", k_lock_repo}, {"version", 1}, {"symbol", "kh_vector_add"}}},
                       {"cpuonly", {{"repo_id", "locktest/cpuonly"}, {"version", 1}, {"symbol", "kh_vector_add"}}}}}};
    write_text(p.project / "kernhub.json", manifest.dump());

    ProcessResult locked = p.run("lock", {"--target", k_lock_cuda, "--json"});
    INFO(describe(locked));
    REQUIRE(locked.exit_code == 0);
    json lock = json::parse(read_text(p.lock_file()));
    CHECK(lock["kernels"]["cpuonly"]["missing_targets"] == json::array({k_lock_cuda}));
    CHECK(lock["kernels"]["cpuonly"]["variants"].empty());
    CHECK_FALSE(lock["kernels"]["kern"].contains("missing_targets"));
    // Re-locking without --target keeps both the variant and the mark.
    ProcessResult again = p.run("lock");
    REQUIRE(again.exit_code == 0);
    CHECK(json::parse(read_text(p.lock_file())) == lock);
    CHECK(p.run("lock", {"--check"}).exit_code == 0);

    ProcessResult prewarm = p.run("prewarm", {"--target", k_lock_cuda, "--json"});
    INFO(describe(prewarm));
    REQUIRE(prewarm.exit_code == 0);
    json report = parse_stdout(prewarm);
    CHECK(report["missing_targets"] == json::array({"cpuonly: " + k_lock_cuda}));
    REQUIRE(report["kernels"].size() == 1);
    CHECK(report["kernels"][0]["name"] == "kern");
    CHECK_FALSE(fs::exists(p.image_cache / "kernels--locktest--cpuonly"));
    ProcessResult plain = p.sandbox.run({"prewarm", "--target", k_lock_cuda, "--endpoint", p.endpoint, "--cache-dir",
                                         p.image_cache.string(), "--project", p.project.string()});
    CHECK(plain.exit_code == 0);
    CHECK_THAT(plain.err, Catch::Contains("skipped cpuonly: " + k_lock_cuda));

    // A target the lock neither locks nor marks, for any kernel, is exit 3
    // naming every kernel that lacks it.
    check_error(p.run("prewarm", {"--target", "native-cu126-x86_64-linux"}), 3,
                {"'cpuonly' (native-cu126-x86_64-linux)", "'kern' (native-cu126-x86_64-linux)"});
}

TEST_CASE("re-locking a kernel whose locked variant is gone from its new commit is exit 3, not a silent drop") {
    LockProject p;
    REQUIRE(p.run("lock", {"--target", "native-cuda"}).exit_code == 0);
    const std::string before = read_text(p.lock_file());
    // The publisher moves v1 to a commit without the native-cuda build.
    json spec = lock_hub_spec();
    json& files = spec["repos"][0]["commits"][0]["files"];
    for (const char* path :
         {"build/native-cuda/kern.fatbin", "build/native-cuda/metadata.json", "build/native-cuda/README.txt"}) {
        files.erase(path);
    }
    spec["repos"][0]["commits"][0]["message"] = "native-cuda dropped";
    make_hub(spec, p.hub);
    check_error(p.run("lock", {"--update"}), 3, {"'kern'", "no longer has the variant native-cuda", "--target"});
    CHECK(read_text(p.lock_file()) == before);
}
