// Signed kernels on the fetch path (docs/trust.md, "Signatures"): a registry
// entry's policy makes the variant's metadata.json.sigstore verify before any
// other file is used, the result lands in the variant record, and a
// refusal leaves nothing of the variant visible. The variants are signed at
// test time by a throwaway Sigstore instance (tests/support/sigstore_signer.py)
// whose trusted_root.json the Client is given.
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <memory>

#include "digest/digest.hpp"
#include "hub/hub_env.hpp"
#include "kernhub/kernhub.hpp"
#include "support/build_paths.hpp"
#include "support/hub_builder.hpp"
#include "support/kernel_hub.hpp"
#include "support/process.hpp"
#include "support/sigstore_instance.hpp"
#include "support/slurp.hpp"

using namespace kernhub;
using namespace kernhub::test;
using kernhub::test::hub_env::code_of;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const std::string k_issuer = "https://token.actions.githubusercontent.com";
const std::string k_builder = "https://github.com/kernhub-sig/kernels/.github/workflows/build.yaml@refs/heads/main";
const std::string k_stranger = "https://github.com/someone/else/.github/workflows/build.yaml@refs/heads/main";
const std::string k_source_repo = "https://github.com/kernhub-sig/kernels";

std::string b64_sha256_file(const fs::path& path) {
    return digest::to_base64(*digest::from_hex(digest::sha256_file_hex(path)));
}

// metadata.json in the kernels format, whose digest covers `so`.
std::string metadata_for(const std::string& name, const fs::path& so) {
    json metadata = {{"name", name},
                     {"id", "kernhub-sig/" + name},
                     {"version", 1},
                     {"license", "Apache-2.0"},
                     {"backend", {{"type", "cpu"}}},
                     {"digest", {{"algorithm", "sha256"}, {"files", {{"libvector_add.so", b64_sha256_file(so)}}}}}};
    return metadata.dump(2) + "\n";
}

// One hub holding a repo per case, each with the host's CPU variant; a
// registry naming each with the same policy; and the instance's root.
struct SignedHub {
    TempDir dir;
    SigstoreInstance sigstore{dir.path() / "sigstore"};
    fs::path cache = dir.path() / "cache";
    fs::path registry = dir.path() / "registry.json";
    std::unique_ptr<HubServer> server;

    SignedHub() {
        const fs::path work = dir.path() / "work";
        fs::create_directories(work);
        const fs::path so = vector_add_so();
        const std::string good = metadata_for("signed", so);
        const auto sign = [&](const std::string& name, const std::string& metadata, const std::string& identity,
                              const std::vector<std::string>& faults = {}) {
            const fs::path artifact = work / (name + ".metadata.json");
            std::ofstream(artifact, std::ios::binary) << metadata;
            const fs::path bundle = work / (name + ".sigstore");
            sigstore.sign(artifact, bundle, identity, k_issuer, k_source_repo, faults);
            return slurp(bundle);
        };
        const std::string prefix = "build/" + host_cpu_variant() + "/";
        const auto repo = [&](const std::string& name, const json& files) {
            return json{{"repo_id", "kernhub-sig/" + name},
                        {"commits", json::array({{{"branches", {"main"}}, {"files", files}}})}};
        };
        const auto signed_files = [&](const std::string& metadata, const std::string& bundle) {
            return json{{prefix + "libvector_add.so", {{"path", so.string()}}},
                        {prefix + "metadata.json", {{"text", metadata}}},
                        {prefix + "metadata.json.sigstore", {{"text", bundle}}}};
        };
        json repos = json::array();
        // Signed by the builder the policy names.
        repos.push_back(repo("signed", signed_files(good, sign("signed", good, k_builder))));
        // No bundle at all.
        repos.push_back(repo("unsigned", {{prefix + "libvector_add.so", {{"path", so.string()}}},
                                          {prefix + "metadata.json", {{"text", good}}}}));
        // A valid signature, by someone the policy does not name.
        repos.push_back(repo("stranger", signed_files(good, sign("stranger", good, k_stranger))));
        // Signed, then the shared object was replaced (the hub's listing
        // agrees with the new bytes; the signed digest does not).
        json changed = signed_files(good, sign("changed", good, k_builder));
        changed[prefix + "libvector_add.so"] = {{"text", "not the signed shared object"}, {"lfs", true}};
        repos.push_back(repo("changed", changed));
        // A signed metadata.json without a digest covers no other file.
        const std::string bare = json{{"name", "nodigest"}, {"version", 1}}.dump() + "\n";
        json nodigest = signed_files(bare, sign("nodigest", bare, k_builder));
        nodigest[prefix + "libvector_add.so"] = {{"path", good_fixture_so().string()}};
        repos.push_back(repo("nodigest", nodigest));
        // Signed, then metadata.json was rewritten to cover other bytes.
        const std::string forged = metadata_for("forged", good_fixture_so());
        json rewritten = signed_files(forged, sign("rewritten", good, k_builder));
        rewritten[prefix + "libvector_add.so"] = {{"path", good_fixture_so().string()}};
        repos.push_back(repo("rewritten", rewritten));
        // Signed, but no registry entry with a policy names it.
        repos.push_back(repo("open", signed_files(good, sign("open", good, k_builder))));
        // The certificate had expired when the log took the entry.
        repos.push_back(repo("expired", signed_files(good, sign("expired", good, k_builder, {"expired"}))));
        make_hub({{"repos", repos}}, dir.path() / "hub");
        server = std::make_unique<HubServer>(dir.path() / "hub");

        json kernels = json::object();
        for (const char* name : {"signed", "unsigned", "stranger", "changed", "rewritten", "expired", "nodigest"}) {
            kernels[name] = {
                {"repo_id", std::string("kernhub-sig/") + name},
                {"revision", "main"},
                {"symbol", "kh_vector_add"},
                {"signature",
                 {{"issuer", k_issuer}, {"identities", {k_builder}}, {"repository", "kernhub-sig/kernels"}}}};
        }
        kernels["plain"] = {{"repo_id", "kernhub-sig/open"}, {"revision", "main"}, {"symbol", "kh_vector_add"}};
        // Another name for a repo with a policy, without one of its own.
        kernels["alias"] = {{"repo_id", "kernhub-sig/stranger"}, {"revision", "main"}, {"symbol", "kh_vector_add"}};
        std::ofstream(registry) << json{{"format", 1}, {"kernels", kernels}}.dump(2);
    }

    Options options(bool offline = false) const {
        Options o;
        o.endpoint = server->endpoint();
        o.cache_dir = cache.string();
        o.registries = {registry.string()};
        o.project_dir = dir.path().string();
        o.no_default_registry = true;
        o.offline = offline;
        o.token = "";
        o.retries = 1;
        o.sigstore_trusted_root = sigstore.trusted_root_path().string();
        return o;
    }
    fs::path folder(const std::string& name) const { return cache / ("kernels--kernhub-sig--" + name); }

    // Nothing of the variant is visible: no snapshot file, no record, and
    // no blob but those of files that verified.
    void require_nothing_visible(const std::string& name) const {
        const fs::path snapshots = folder(name) / "snapshots";
        if (fs::exists(snapshots)) {
            for (const auto& entry : fs::recursive_directory_iterator(snapshots)) {
                INFO(entry.path());
                CHECK_FALSE(entry.is_symlink());
            }
        }
        CHECK_FALSE(fs::exists(folder(name) / ".kernhub" / "variants"));
    }
};

}  // namespace

TEST_CASE("a signed variant fetches, records its signer and loads", "[hub][signature][needs:sigstore-signer]") {
    SignedHub hub;
    Client client(hub.options());
    LoadResult loaded = client.load("signed");
    REQUIRE(loaded.fetch.signature);
    CHECK(loaded.fetch.signature->identity == k_builder);
    CHECK(loaded.fetch.signature->issuer == k_issuer);
    CHECK(loaded.fetch.signature->repository == k_source_repo);
    CHECK(loaded.fetch.signature->log_time > 0);
    using AddFn = void (*)(const float*, const float*, float*, std::size_t);
    const float a[3] = {1, 2, 3}, b[3] = {10, 20, 30};
    float out[3] = {};
    reinterpret_cast<AddFn>(loaded.address)(a, b, out, 3);
    CHECK(out[2] == 33.0f);

    // Warm and offline: the record vouches for the signature; no request,
    // and the same signer reported.
    hub.server->reset();
    FetchResult warm = Client(hub.options(true)).fetch("signed");
    REQUIRE(warm.signature);
    CHECK(warm.signature->identity == k_builder);
    CHECK(warm.signature->log_time == loaded.fetch.signature->log_time);
    CHECK(hub.server->stats()["requests"].empty());

    // The same repo under an entry without a policy: no signature reported.
    // The repo referenced directly takes the policy of the entry naming it,
    // in any letter case (the hub ignores case in repo ids).
    CHECK(Client(hub.options(true)).fetch("kernhub-sig/signed@main").signature);
    // (The test hub, unlike the real one, knows repo ids in one case only:
    // getting past the required-policy gate to its "not found" shows the
    // policy applied.)
    Options required = hub.options();
    required.require_signatures = true;
    CHECK(code_of([&] { Client(required).fetch("KernHub-Sig/Signed@main"); }) == ErrorCode::not_found);
    CHECK(code_of([&] { Client(required).fetch("Kernhub-sig/open@main"); }) == ErrorCode::verification);
    // So does another entry naming the repo without a policy of its own.
    CHECK(code_of([&] { Client(hub.options()).fetch("alias"); }) == ErrorCode::verification);
    CHECK(code_of([&] { Client(hub.options()).fetch("kernhub-sig/stranger"); }) == ErrorCode::verification);
    // An entry without a policy reports none.
    CHECK_FALSE(Client(hub.options()).fetch("plain").signature);
}

TEST_CASE("a cached variant with no recorded signature is verified before use, offline too",
          "[hub][signature][needs:sigstore-signer]") {
    SignedHub hub;
    // A record without a signature, as an older kernhub or a fetch without
    // a policy leaves it.
    Client(hub.options()).fetch("signed");
    for (const auto& entry : fs::recursive_directory_iterator(hub.folder("signed") / ".kernhub" / "variants")) {
        if (!entry.is_regular_file()) continue;
        json record = json::parse(slurp(entry.path()));
        REQUIRE(record.erase("signature") == 1);
        fs::permissions(entry.path(), fs::perms::owner_write, fs::perm_options::add);
        std::ofstream(entry.path(), std::ios::trunc) << record.dump(2);
    }
    hub.server->reset();
    FetchResult checked = Client(hub.options(true)).fetch("signed");
    REQUIRE(checked.signature);
    CHECK(checked.signature->identity == k_builder);

    // Another trusted root: the recorded result does not vouch for it, and
    // this root does not verify the instance's bundle.
    SigstoreInstance other(hub.dir.path() / "other-sigstore");
    Options foreign = hub.options(true);
    foreign.sigstore_trusted_root = other.trusted_root_path().string();
    std::string message;
    CHECK(code_of([&] { Client(foreign).fetch("signed"); }, &message) == ErrorCode::verification);
    CHECK_THAT(message, Catch::Contains("sigstore: "));
}

TEST_CASE("a variant the policy does not accept is refused with nothing visible",
          "[hub][signature][needs:sigstore-signer]") {
    SignedHub hub;
    struct Case {
        const char* name;
        const char* expected;  // in the message
    };
    const Case cases[] = {
        {"unsigned", "has no metadata.json.sigstore"},
        {"stranger", "sigstore: identity"},
        {"rewritten", "sigstore: artifact-digest"},
        {"expired", "sigstore: certificate-validity"},
        {"changed", "does not match the digest in its variant's metadata.json"},
        {"nodigest", "has no \"digest\""},
    };
    for (const auto& c : cases) {
        INFO(c.name);
        std::string message;
        CHECK(code_of([&] { Client(hub.options()).load(c.name); }, &message) == ErrorCode::verification);
        CHECK_THAT(message, Catch::Contains(c.expected));
        hub.require_nothing_visible(c.name);
        if (std::string(c.name) != "changed") {
            // Refused before the shared object was asked for.
            CHECK(hub.server->count_requests("libvector_add.so") == 0);
        }
        hub.server->reset();
    }
}

TEST_CASE("signatures can be required for every kernel", "[hub][signature][needs:sigstore-signer]") {
    SignedHub hub;
    Options required = hub.options();
    required.require_signatures = true;
    std::string message;
    CHECK(code_of([&] { Client(required).fetch("plain"); }, &message) == ErrorCode::verification);
    CHECK_THAT(message, Catch::Contains("no \"signature\" policy"));
    CHECK(hub.server->stats()["requests"].empty());
    // A repo referenced directly takes the policy of the entries naming it.
    CHECK(Client(required).fetch("kernhub-sig/signed@main").signature);
    CHECK(Client(required).fetch("signed").signature);
}

TEST_CASE("lock records the signer of each locked variant", "[hub][signature][needs:sigstore-signer]") {
    SignedHub hub;
    // The project's kernhub.json names the signed kernel with its policy.
    json project = json::parse(slurp(hub.registry));
    for (const char* other : {"unsigned", "stranger", "changed", "rewritten", "expired", "nodigest", "alias"}) {
        project["kernels"].erase(other);
    }
    std::ofstream(hub.dir.path() / "kernhub.json") << project.dump(2);
    Options options = hub.options();
    options.registries.clear();
    LockReport report = Client(options).lock(LockOptions{});
    const auto locked = std::find_if(report.kernels.begin(), report.kernels.end(),
                                     [](const LockedKernel& k) { return k.name == "signed"; });
    REQUIRE(locked != report.kernels.end());
    REQUIRE(locked->signature);
    CHECK(locked->signature->identity == k_builder);
    const json lock = json::parse(report.content);
    const json& variant = lock["kernels"]["signed"]["variants"][host_cpu_variant()];
    CHECK(variant["signer"] == json({{"identity", k_builder}, {"issuer", k_issuer}}));
    // The entry without a policy records no signer.
    CHECK_FALSE(lock["kernels"]["plain"]["variants"][host_cpu_variant()].contains("signer"));

    // A prewarm from the lock requires the recorded signer, in a fresh cache.
    std::ofstream(hub.dir.path() / "kernhub.lock") << report.content;
    Options fresh = options;
    fresh.cache_dir = (hub.dir.path() / "fresh-cache").string();
    PrewarmReport warmed = Client(fresh).prewarm((hub.dir.path() / "kernhub.lock").string());
    CHECK(warmed.kernels.size() == 2);
    json forged = lock;
    forged["kernels"]["signed"]["variants"][host_cpu_variant()]["signer"]["identity"] = k_stranger;
    std::ofstream(hub.dir.path() / "forged.lock") << forged.dump(2) << '\n';
    fresh.cache_dir = (hub.dir.path() / "fresh-cache-2").string();
    std::string message;
    CHECK(code_of([&] { Client(fresh).prewarm((hub.dir.path() / "forged.lock").string()); }, &message) ==
          ErrorCode::verification);
    CHECK_THAT(message, Catch::Contains("not signed by the signer its lock records"));
}

TEST_CASE("info shows the policy and the signer of the selected variant", "[hub][signature][needs:sigstore-signer]") {
    SignedHub hub;
    // Nothing cached: info verifies the signature itself.
    InfoResult info = Client(hub.options()).info("signed");
    REQUIRE(info.signature_policy);
    CHECK(info.signature_policy->identities == std::vector<std::string>{k_builder});
    REQUIRE(info.signature);
    CHECK(info.signature->identity == k_builder);
    CHECK(info.signature->log_time > 0);
    CHECK(hub.server->count_requests("libvector_add.so") == 0);
    // Refused variants are refused by info too.
    CHECK(code_of([&] { Client(hub.options()).info("stranger"); }) == ErrorCode::verification);
    InfoResult plain = Client(hub.options()).info("plain");
    CHECK_FALSE(plain.signature_policy);
    CHECK_FALSE(plain.signature);
}

TEST_CASE("verify checks a cached variant again, offline: digest and signature",
          "[hub][signature][needs:sigstore-signer]") {
    SignedHub hub;
    FetchResult fetched = Client(hub.options()).fetch("signed");
    Client(hub.options()).fetch("plain");
    VerifyReport report = Client(hub.options(true)).verify("signed");
    CHECK(report.variant == fetched.variant);
    CHECK(report.digest_checked);
    CHECK(report.files_checked == 3);
    REQUIRE(report.signature);
    CHECK(report.signature->identity == k_builder);

    // Without a policy only the digest is checked; with one given, it applies.
    VerifyReport plain = Client(hub.options(true)).verify("plain");
    CHECK(plain.digest_checked);
    CHECK_FALSE(plain.signature);
    std::string message;
    CHECK(code_of(
              [&] {
                  Client(hub.options(true)).verify("plain", SignaturePolicy{k_issuer, {k_stranger}, {}});
              },
              &message) == ErrorCode::verification);
    CHECK_THAT(message, Catch::Contains("sigstore: identity"));

    // The CLI says the same, and exits 4 once a cached byte changed.
    const std::vector<std::string> cli = {KERNHUB_CLI_PATH,
                                          "verify",
                                          "signed",
                                          "--registry",
                                          hub.registry.string(),
                                          "--cache-dir",
                                          hub.cache.string(),
                                          "--trusted-root",
                                          hub.sigstore.trusted_root_path().string()};
    ProcessResult ok = run_process(cli, {{"KERNHUB_OFFLINE", "1"}});
    INFO(ok.out << ok.err);
    CHECK(ok.exit_code == 0);
    CHECK_THAT(ok.out, Catch::Contains("signed by " + k_builder));
    const fs::path so = fs::canonical(fs::path(fetched.path) / "libvector_add.so");
    std::string bytes = slurp(so);
    bytes[200] = static_cast<char>(~bytes[200]);
    fs::permissions(so, fs::perms::owner_write, fs::perm_options::add);
    std::ofstream(so, std::ios::binary | std::ios::trunc) << bytes;
    ProcessResult bad = run_process(cli, {{"KERNHUB_OFFLINE", "1"}});
    INFO(bad.out << bad.err);
    CHECK(bad.exit_code == 4);
    CHECK_THAT(bad.err, Catch::Contains("libvector_add.so"));
}

TEST_CASE("the CLI takes the trusted root and the requirement from the environment",
          "[hub][signature][needs:sigstore-signer]") {
    SignedHub hub;
    const std::vector<std::string> fetch = {KERNHUB_CLI_PATH,      "fetch",       "signed",           "--registry",
                                            hub.registry.string(), "--cache-dir", hub.cache.string(), "--endpoint",
                                            hub.server->endpoint()};
    // The built-in public-good root does not know the test instance.
    ProcessResult foreign = run_process(fetch, {{"KERNHUB_SIGSTORE_TRUSTED_ROOT", std::nullopt}});
    INFO(foreign.out << foreign.err);
    CHECK(foreign.exit_code == 4);
    CHECK_THAT(foreign.err, Catch::Contains("sigstore: certificate-chain"));
    hub.require_nothing_visible("signed");

    ProcessResult ok =
        run_process(fetch, {{"KERNHUB_SIGSTORE_TRUSTED_ROOT", hub.sigstore.trusted_root_path().string()}});
    INFO(ok.out << ok.err);
    CHECK(ok.exit_code == 0);
    CHECK_THAT(ok.err, Catch::Contains("signed by " + k_builder));

    std::vector<std::string> plain = fetch;
    plain[2] = "plain";
    ProcessResult required = run_process(plain, {{"KERNHUB_REQUIRE_SIGNATURES", "1"}});
    INFO(required.out << required.err);
    CHECK(required.exit_code == 4);
    CHECK_THAT(required.err, Catch::Contains("KERNHUB_REQUIRE_SIGNATURES"));
    CHECK(run_process(plain, {{"KERNHUB_REQUIRE_SIGNATURES", "maybe"}}).exit_code == 2);
    CHECK(run_process(plain, {{"KERNHUB_REQUIRE_SIGNATURES", "0"}}).exit_code == 0);
}
