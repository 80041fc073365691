// A fetch killed at any step leaves a cache that is usable and never shows
// unverified bytes (docs/cache-format.md, "Durability"). The CLI is killed
// with SIGKILL through the test-only hook KERNHUB_TEST_CRASH_AT=NAME:N at
// every named step, each time it is reached, with several files in flight;
// then the cache is inspected as another tool would find it, and a second
// fetch must complete it.
#include <openssl/evp.h>
#include <signal.h>

#include <random>

#include "cli_support.hpp"
#include "support/build_paths.hpp"
#include "support/hub_builder.hpp"
#include "support/hub_server.hpp"
#include "support/requirements.hpp"
#include "support/slurp.hpp"

using namespace kernhub::test;
using namespace kernhub::test::cli;

namespace {

// The hook is compiled in only under -DKERNHUB_TEST_HOOKS=ON: a CLI built
// without it never crashes, so these tests would prove nothing. The CLI
// binary itself is asked, not the build's settings.
KERNHUB_TEST_REQUIREMENT("needs:test-hooks", []() -> std::string {
    const std::string binary = slurp(KERNHUB_CLI_PATH);
    if (binary.find("KERNHUB_TEST_CRASH_AT") != std::string::npos) return "";
    return "the kernhub CLI was built without its crash points (configure with -DKERNHUB_TEST_HOOKS=ON, "
           "as tests/run.sh does)";
});

const std::string k_crash_repo = "kernhub-test/crash";
const std::string k_crash_folder = "kernels--kernhub-test--crash";

std::string random_bytes(std::size_t size, unsigned seed) {
    std::string bytes(size, '\0');
    std::mt19937 random(seed);
    for (auto& c : bytes) c = static_cast<char>(random());
    return bytes;
}

// A variant of six files: two large LFS files (hashed on a second thread
// while they arrive), one small LFS file and plain files, one in a folder.
struct CrashHub {
    TempDir dir;
    std::unique_ptr<HubServer> server;

    CrashHub() {
        const std::string variant = "build/" + host_cpu_variant() + "/";
        const fs::path sources = dir.path() / "src";
        fs::create_directories(sources);
        nlohmann::json files = nlohmann::json::object();
        auto add = [&](const std::string& rel, const std::string& bytes, bool lfs) {
            const fs::path source = sources / std::to_string(files.size());
            write_text(source, bytes);
            files[variant + rel] = {{"path", source.string()}, {"lfs", lfs}};
        };
        add("weights-a.bin", random_bytes(6u << 20, 1), true);
        add("weights-b.bin", random_bytes(5u << 20, 2), true);
        add("libsmall.so", random_bytes(70000, 3), true);
        add("config.json", "{\"layers\": 4}\n", false);
        add("sub/helper.py", "def helper():\n    return 1\n", false);
        nlohmann::json spec = {
            {"repos",
             {{{"repo_id", k_crash_repo},
               {"type", "kernel"},
               {"commits", {{{"message", "crash"}, {"branches", {"main"}}, {"metadata", true}, {"files", files}}}}}}}};
        make_hub(spec, dir.path() / "hub");
        server = std::make_unique<HubServer>(dir.path() / "hub");
    }
};

// Whether a blob's content is what its name says: the SHA-256 of an LFS
// file, or the git blob SHA-1 of a plain one.
bool blob_matches_name(const fs::path& blob) {
    const std::string name = blob.filename().string();
    const std::string bytes = read_text(blob);
    if (name.size() == 64) return hex_digest(bytes, EVP_sha256()) == name;
    if (name.size() == 40) {
        return hex_digest("blob " + std::to_string(bytes.size()) + std::string(1, '\0') + bytes, EVP_sha1()) == name;
    }
    return false;
}

// Every variant record names only files that are linked and whose bytes
// are the recorded ones: a record naming anything else would let the next
// fetch trust it (a fetch does not hash what its record vouches for).
void check_records_vouch_only_for_verified(const fs::path& cache) {
    const fs::path folder = cache / k_crash_folder;
    const fs::path records = folder / ".kernhub" / "variants";
    std::error_code ec;
    if (!fs::exists(records, ec)) return;
    for (fs::recursive_directory_iterator it(records), end; it != end; ++it) {
        if (!it->is_regular_file()) continue;
        const json record = json::parse(read_text(it->path()), nullptr, false);
        if (record.is_discarded()) continue;  // an empty record (power loss) counts as absent
        const fs::path variant_dir =
            folder / "snapshots" / record["commit"].get<std::string>() / "build" / record["variant"].get<std::string>();
        for (const auto& file : record["files"]) {
            const fs::path link = variant_dir / file["path"].get<std::string>();
            INFO("recorded " << link);
            REQUIRE(fs::exists(link));
            CHECK(sha256_of(link) == file["sha256"].get<std::string>());
        }
    }
}

// What another reader of the cache may see after the crash: every blob is
// verified content under its name, every snapshot entry is a link to such a
// blob (a process killed, unlike a machine losing power, never leaves a
// link without its blob), and a variant record (written last) only lists
// files that are linked and verified. Returns how many blobs there were.
std::size_t check_cache_consistent(const fs::path& cache, const std::string& context) {
    INFO(context);
    const fs::path folder = cache / k_crash_folder;
    std::size_t blobs = 0;
    std::error_code ec;
    if (fs::exists(folder / "blobs", ec)) {
        for (const auto& item : fs::directory_iterator(folder / "blobs")) {
            const std::string name = item.path().filename().string();
            if (name.size() > 11 && name.compare(name.size() - 11, 11, ".incomplete") == 0) continue;
            INFO("blob " << name);
            CHECK(item.is_regular_file());
            CHECK(blob_matches_name(item.path()));
            ++blobs;
        }
    }
    if (fs::exists(folder / "snapshots", ec)) {
        for (fs::recursive_directory_iterator it(folder / "snapshots"), end; it != end; ++it) {
            INFO("snapshot entry " << it->path());
            if (it->is_symlink()) {
                const fs::path target = fs::weakly_canonical(it->path().parent_path() / fs::read_symlink(it->path()));
                CHECK(target.parent_path().filename() == "blobs");
                REQUIRE(fs::exists(target));
                CHECK(blob_matches_name(target));
            } else {
                CHECK(it->is_directory());  // never a plain file: that would be unverified bytes
            }
        }
    }
    check_records_vouch_only_for_verified(cache);
    return blobs;
}

}  // namespace

TEST_CASE("a fetch killed at any step leaves a usable cache that shows only verified bytes",
          "[cli][durability][crash][needs:test-hooks]") {
    CrashHub hub;
    const std::vector<std::string> points = {"half-written", "verified", "committed", "linked", "synced", "recorded"};
    int kills = 0;
    for (const std::string& point : points) {
        for (int hit = 1; hit <= 8; ++hit) {
            Sandbox box;
            const std::string plan = point + ":" + std::to_string(hit);
            ProcessResult crashed = box.kh("fetch", k_crash_repo, hub.server->endpoint(), {"--quiet"},
                                           {{"KERNHUB_TEST_CRASH_AT", plan}, {"KERNHUB_MAX_CONNECTIONS", "3"}});
            if (crashed.exit_code == 0) {
                // The step is reached fewer than `hit` times in one fetch.
                INFO(plan);
                CHECK(hit > 1);
                break;
            }
            INFO(plan << ": " << describe(crashed));
            REQUIRE(crashed.exit_code == 128 + SIGKILL);
            ++kills;
            check_cache_consistent(box.cache, "after a kill at " + plan);

            // The next run completes the variant from what is there.
            ProcessResult again = box.kh("fetch", k_crash_repo, hub.server->endpoint(), {"--json"});
            REQUIRE(again.exit_code == 0);
            const std::size_t blobs = check_cache_consistent(box.cache, "after the fetch that followed " + plan);
            CHECK(blobs == 6);  // five files and metadata.json
            ProcessResult offline = box.kh("fetch", k_crash_repo, hub.server->endpoint(), {"--offline", "--quiet"});
            CHECK(offline.exit_code == 0);
            ProcessResult verify = box.kh("verify", k_crash_repo, hub.server->endpoint(), {"--quiet"});
            CHECK(verify.exit_code == 0);
        }
    }
    // Every point was reached: the per-file ones once per file (five files
    // and metadata.json), the per-variant ones once.
    CHECK(kills == 4 * 6 + 2);
}

TEST_CASE("killed at any step while the hub sends corrupt bytes, the cache still shows only verified bytes",
          "[cli][durability][crash][needs:test-hooks]") {
    CrashHub hub;
    // Each run, one large and one small file arrive with a byte flipped once;
    // the fetch refuses them (exit 4) or is killed first. Either way nothing
    // that did not verify may be visible, and a clean run completes.
    for (const char* point_name : {"half-written", "verified", "committed", "linked"}) {
        for (int hit = 1; hit <= 6; hit += 2) {
            Sandbox box;
            hub.server->reset();
            hub.server->add_faults({{{"match", "/lfs/"}, {"action", "corrupt"}, {"count", 1}},
                                    {{"match", "config.json"}, {"action", "corrupt"}, {"count", 1}}});
            const std::string plan = std::string(point_name) + ":" + std::to_string(hit);
            ProcessResult crashed = box.kh("fetch", k_crash_repo, hub.server->endpoint(), {"--quiet"},
                                           {{"KERNHUB_TEST_CRASH_AT", plan}, {"KERNHUB_MAX_CONNECTIONS", "3"}});
            INFO(plan << ": " << describe(crashed));
            CHECK((crashed.exit_code == 128 + SIGKILL || crashed.exit_code == 4));
            check_cache_consistent(box.cache, "after " + plan + " with corrupt bytes");
            hub.server->reset();
            ProcessResult again = box.kh("fetch", k_crash_repo, hub.server->endpoint(), {"--quiet"});
            CHECK(again.exit_code == 0);
            CHECK(check_cache_consistent(box.cache, "after the clean fetch that followed " + plan) == 6);
        }
    }
}

TEST_CASE("cache verify --repair killed after any removal leaves no record vouching for a damaged file",
          "[cli][durability][crash][needs:test-hooks]") {
    CrashHub hub;
    int kills = 0;
    for (int hit = 1; hit <= 8; ++hit) {
        Sandbox box;
        ProcessResult fetched = box.kh("fetch", k_crash_repo, hub.server->endpoint(), {"--quiet"});
        REQUIRE(fetched.exit_code == 0);
        // Two large files damaged in place, sizes kept: a fetch that trusts
        // its variant record checks sizes, not content.
        const fs::path variant = box.cache / k_crash_folder / "snapshots";
        int damaged = 0;
        for (fs::recursive_directory_iterator it(variant), end; it != end; ++it) {
            const std::string name = it->path().filename().string();
            if (name != "weights-a.bin" && name != "weights-b.bin") continue;
            const fs::path blob = fs::canonical(it->path());
            std::string bytes = read_text(blob);
            bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x5a);
            fs::permissions(blob, fs::perms::owner_write, fs::perm_options::add);
            write_text(blob, bytes);
            ++damaged;
        }
        REQUIRE(damaged == 2);

        const std::string plan = "repaired:" + std::to_string(hit);
        ProcessResult crashed = box.run({"cache", "verify", "--repair", "--quiet", "--cache-dir", box.cache.string()},
                                        {{"KERNHUB_TEST_CRASH_AT", plan}});
        INFO(plan << ": " << describe(crashed));
        if (crashed.exit_code == 0) {
            CHECK(hit > 1);  // fewer removals than `hit`
            break;
        }
        REQUIRE(crashed.exit_code == 128 + SIGKILL);
        ++kills;
        // Every record left names only files that are there and verify.
        check_records_vouch_only_for_verified(box.cache);
        // The next fetch puts the right bytes back.
        ProcessResult again = box.kh("fetch", k_crash_repo, hub.server->endpoint(), {"--quiet"});
        REQUIRE(again.exit_code == 0);
        CHECK(check_cache_consistent(box.cache, "after the fetch that followed " + plan) == 6);
    }
    // The record, the two blobs, and the links to them went one by one.
    CHECK(kills >= 3);
}
