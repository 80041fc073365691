// The lock module: kernhub.lock written and read back, the kernels
// library's two kernels.lock formats, strictness and limits, the variant
// hash and the diff.
#include <atomic>
#include <catch2/catch.hpp>
#include <string>

#include "kernhub/error.hpp"
#include "lockfile/lockfile.hpp"

using namespace kernhub;

namespace {

const std::string k_commit = "5a920c31f7f00491fbaf874c057018a0ad2e0637";
const std::string k_sha = "621dc20267a565a0eb9801df6733c3dd58c7e54cc8b08c793d3280d1451d2d79";
const std::string k_hash = "sha256-dd2c8e3a64def92d8bdbcbb8c6168e66dbfa8730895aedf5671f635f855acc91";

lockfile::KernhubLock sample() {
    lockfile::KernhubLock out;
    lockfile::LockedKernel kernel;
    kernel.repo_id = "org/vector-add";
    kernel.revision = "v1";
    kernel.commit = k_commit;
    kernel.symbol = "kh_vector_add";
    kernel.variants["native-cpu-x86_64-linux"] = {k_hash, {{"libvector_add.so", {17128, k_sha}}}, {}};
    out.kernels["vector-add"] = kernel;
    return out;
}

// The usage error's message, or "" when the text parses.
std::string parse_error(const std::string& text) {
    try {
        lockfile::parse_lock(text, "test.lock");
    } catch (const Error& e) {
        CHECK(e.code() == ErrorCode::usage);
        return e.message();
    }
    return "";
}

}  // namespace

TEST_CASE("a kernhub.lock is written with sorted keys, two-space indent and a final newline, and reads back") {
    const std::string text = lockfile::write_kernhub_lock(sample());
    CHECK(text.back() == '\n');
    CHECK(text.find("\n  \"kernels\": {\n    \"vector-add\": {\n      \"commit\"") != std::string::npos);
    // Sorted: commit < repo_id < repo_type < revision < symbol < variants.
    CHECK(text.find("\"commit\"") < text.find("\"repo_id\""));
    CHECK(text.find("\"revision\"") < text.find("\"symbol\""));
    CHECK(text.find("\"file\"") == std::string::npos);  // optional, absent when empty

    lockfile::AnyLock parsed = lockfile::parse_lock(text, "kernhub.lock");
    REQUIRE(parsed.format == lockfile::Format::kernhub_lock);
    const auto& kernel = parsed.kernhub.kernels.at("vector-add");
    CHECK(kernel.commit == k_commit);
    CHECK(kernel.revision == "v1");
    CHECK(kernel.repo_type == RepoType::kernel);
    CHECK(kernel.variants.at("native-cpu-x86_64-linux").files.at("libvector_add.so").size == 17128);
    // Writing what was read gives the same bytes.
    CHECK(lockfile::write_kernhub_lock(parsed.kernhub) == text);
}

TEST_CASE("a kernhub.lock that is not exactly the format is refused naming the entry and the field") {
    const std::string good = lockfile::write_kernhub_lock(sample());
    auto with = [&](const std::string& from, const std::string& to) {
        std::string text = good;
        auto at = text.find(from);
        REQUIRE(at != std::string::npos);
        return text.replace(at, from.size(), to);
    };
    CHECK(parse_error(good).empty());
    CHECK(parse_error(with("\"symbol\"", "\"symbl\"")).find("unknown field \"symbl\"") != std::string::npos);
    CHECK(parse_error(with(k_commit, "main")).find("40 characters for SHA-1, 64 for SHA-256") != std::string::npos);
    CHECK(parse_error(with("\"libvector_add.so\"", "\"../escape.so\"")).find("relative path") != std::string::npos);
    CHECK(parse_error(with("\"native-cpu-x86_64-linux\"", "\".hidden\"")).find("variant") != std::string::npos);
    CHECK(parse_error(with("\"format\": 1", "\"format\": 2")).find("format") != std::string::npos);
    CHECK(parse_error(with("\"v1\"", "\"../v1\"")).find("revision") != std::string::npos);
    CHECK(parse_error(with("\"repo_type\": \"kernel\"", "\"repo_type\": \"space\"")).find("repo_type") !=
          std::string::npos);
    CHECK(parse_error(with("\"symbol\": \"kh_vector_add\"", "\"symbol\": \"a\", \"symbol\": \"b\"")).find("twice") !=
          std::string::npos);
    CHECK(parse_error("{").find("not valid JSON") != std::string::npos);
    CHECK(parse_error("42").find("neither") != std::string::npos);
}

TEST_CASE("a lock file over k_max_lock_bytes is refused naming the limit") {
    std::string huge = "[" + std::string(lockfile::k_max_lock_bytes, ' ') + "]";
    CHECK(parse_error(huge).find("k_max_lock_bytes") != std::string::npos);
}

TEST_CASE("a lock nested deeper than any lock format is refused before it is built") {
    std::string deep = std::string(100000, '[') + std::string(100000, ']');
    CHECK(parse_error(deep).find("k_max_depth") != std::string::npos);
}

TEST_CASE("the current kernels.lock format gives repo, revision (vN for a version) and commit") {
    const std::string text = R"([
  {"dependency": {"repo-id": "kernels-community/activation", "version": 1}, "lock": {"commit": ")" +
                             k_commit +
                             R"("}},
  {"dependency": {"repo-id": "kernels-community/relu", "revision": "main"}, "lock": {"commit": ")" +
                             k_commit +
                             R"("}}
])";
    lockfile::AnyLock parsed = lockfile::parse_lock(text, "kernels.lock");
    REQUIRE(parsed.format == lockfile::Format::kernels_lock);
    REQUIRE(parsed.kernels.size() == 2);
    CHECK(parsed.kernels[0].repo_id == "kernels-community/activation");
    CHECK(parsed.kernels[0].revision == "v1");
    CHECK(parsed.kernels[1].revision == "main");
    CHECK(parsed.kernels[1].commit == k_commit);
    CHECK(parsed.kernels[0].variant_hashes.empty());

    auto entry = [&](const std::string& dependency) {
        return "[{\"dependency\": " + dependency + ", \"lock\": {\"commit\": \"" + k_commit + "\"}}]";
    };
    CHECK(parse_error(entry(R"({"repo-id": "a/b", "version": 1, "revision": "main"})")).find("exactly one") !=
          std::string::npos);
    CHECK(parse_error(entry(R"({"repo-id": "a/b"})")).find("exactly one") != std::string::npos);
    CHECK(parse_error(entry(R"({"repo-id": "a/b", "version": -1})")).find("version") != std::string::npos);
    CHECK(parse_error(entry(R"({"repo-id": "../b", "version": 1})")).find("entry 0") != std::string::npos);
    CHECK(parse_error(entry(R"({"repo-id": "a/b", "version": 1, "extra": 1})")).find("unknown field \"extra\"") !=
          std::string::npos);
    std::string doubled = entry(R"({"repo-id": "a/b", "version": 1})");
    doubled = doubled.substr(0, doubled.size() - 1) + ", " + doubled.substr(1);
    CHECK(parse_error(doubled).find("locked twice") != std::string::npos);
}

TEST_CASE("the older kernels.lock format gives the commit and each variant's git_lfs_concat hash") {
    const std::string text = R"([{"repo_id": "kernels-community/activation", "sha": ")" + k_commit +
                             R"(", "variants": {"torch-universal": {"hash": ")" + k_hash +
                             R"(", "hash_type": "git_lfs_concat"}}}])";
    lockfile::AnyLock parsed = lockfile::parse_lock(text, "kernels.lock");
    REQUIRE(parsed.format == lockfile::Format::kernels_lock_0_16);
    REQUIRE(parsed.kernels.size() == 1);
    CHECK(parsed.kernels[0].revision.empty());
    CHECK(parsed.kernels[0].commit == k_commit);
    CHECK(parsed.kernels[0].variant_hashes.at("torch-universal") == k_hash);

    std::string other_type = text;
    other_type.replace(other_type.find("git_lfs_concat"), 14, "sha1_concat");
    CHECK(parse_error(other_type).find("hash_type") != std::string::npos);
    std::string bad_hash = text;
    bad_hash.replace(bad_hash.find("sha256-"), 7, "sha512-");
    CHECK(parse_error(bad_hash).find("hash") != std::string::npos);
}

TEST_CASE("the variant hash is SHA-256 over sorted paths and raw digests, as the kernels library computes it") {
    // Expected value computed independently with Python's hashlib over
    // b"libvector_add.so" + bytes.fromhex(lfs sha256) + b"metadata.json" +
    // bytes.fromhex(git blob sha1).
    auto raw = [](const std::string& hex) { return digest::from_hex(hex).value(); };
    std::vector<std::pair<std::string, digest::Bytes>> files = {
        {"metadata.json", raw("7c7bf2ae6a0a4dfff4ebe1454f5efa6f27f888eb")},
        {"libvector_add.so", raw(k_sha)},
    };
    CHECK(lockfile::variant_hash(files) == k_hash);
    files[0].second[0] ^= 1;  // any other digest changes it
    CHECK(lockfile::variant_hash(files) != k_hash);
}

TEST_CASE("the line diff shows removed and added lines with context, and nothing for equal texts") {
    CHECK(lockfile::line_diff("a\nb\nc\n", "a\nb\nc\n", "old", "new").empty());
    const std::string diff = lockfile::line_diff("a\nb\nc\nd\n", "a\nB\nc\nd\ne\n", "old", "new");
    CHECK(diff.rfind("--- old\n+++ new\n", 0) == 0);
    CHECK(diff.find("\n-b\n+B\n") != std::string::npos);
    CHECK(diff.find("\n+e\n") != std::string::npos);
    CHECK(diff.find("\n a\n") != std::string::npos);
    CHECK(lockfile::line_diff("", "x\n", "/dev/null", "new").find("+x") != std::string::npos);
}

TEST_CASE("kernhub.lock carries a variant's signer and reads it back strictly", "[lock][signature]") {
    lockfile::KernhubLock locked = sample();
    auto& variant = locked.kernels.begin()->second.variants.begin()->second;
    variant.signer = lockfile::LockedSigner{"https://github.com/o/r/.github/workflows/build.yaml@refs/heads/main",
                                            "https://token.actions.githubusercontent.com"};
    const std::string text = lockfile::write_kernhub_lock(locked);
    CHECK(text.find("\"signer\": {") != std::string::npos);
    const lockfile::AnyLock back = lockfile::parse_lock(text, "kernhub.lock");
    const auto& read = back.kernhub.kernels.begin()->second.variants.begin()->second;
    REQUIRE(read.signer);
    CHECK(read.signer->identity == variant.signer->identity);
    CHECK(read.signer->issuer == variant.signer->issuer);
    CHECK(lockfile::write_kernhub_lock(back.kernhub) == text);

    for (const char* bad : {R"("signer": "x")", R"("signer": {"identity": "i"})",
                            R"("signer": {"identity": "i", "issuer": "u", "extra": 1})",
                            R"("signer": {"identity": "", "issuer": "u"})"}) {
        INFO(bad);
        std::string broken = text;
        const std::size_t at = broken.find("\"signer\": {");
        const std::size_t end = broken.find('}', at) + 1;
        broken.replace(at, end - at, bad);
        try {
            lockfile::parse_lock(broken, "kernhub.lock");
            FAIL("accepted");
        } catch (const kernhub::Error& e) {
            CHECK(e.code() == kernhub::ErrorCode::usage);
            CHECK_THAT(e.message(), Catch::Contains("signer"));
        }
    }
}

TEST_CASE("a lock's parse ends with Error(interrupted) once the cancel flag is set, and reads it otherwise") {
    std::string text = "[";
    for (int i = 0; i < 2000; ++i) {
        text += std::string(i ? "," : "") + R"({"dependency": {"repo-id": "org/k)" + std::to_string(i) +
                R"(", "version": 1}, "lock": {"commit": ")" + std::string(40, 'a') + R"("}})";
    }
    text += "]";
    std::atomic<bool> cancel{true};
    try {
        lockfile::parse_lock(text, "kernels.lock", &cancel);
        FAIL("a cancelled parse went on");
    } catch (const Error& e) {
        CHECK(e.code() == ErrorCode::interrupted);
        CHECK_THAT(e.what(), Catch::Contains("kernels.lock"));
    }
    cancel = false;
    CHECK(lockfile::parse_lock(text, "kernels.lock", &cancel).kernels.size() == 2000);
}

TEST_CASE("a commit pin may be a full SHA-256 id (64 hex) in kernhub.lock and both kernels.lock formats") {
    const std::string sha256_commit = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
    lockfile::KernhubLock lock = sample();
    lock.kernels.at("vector-add").commit = sha256_commit;
    const std::string text = lockfile::write_kernhub_lock(lock);
    lockfile::AnyLock parsed = lockfile::parse_lock(text, "kernhub.lock");
    CHECK(parsed.kernhub.kernels.at("vector-add").commit == sha256_commit);
    CHECK(lockfile::write_kernhub_lock(parsed.kernhub) == text);

    const std::string current = R"([{"dependency": {"repo-id": "org/k", "version": 3}, "lock": {"commit": ")" +
                                sha256_commit + R"("}}])";
    parsed = lockfile::parse_lock(current, "kernels.lock");
    REQUIRE(parsed.kernels.size() == 1);
    CHECK(parsed.kernels[0].commit == sha256_commit);
    CHECK(parsed.kernels[0].revision == "v3");
    const std::string older = R"([{"repo_id": "org/k", "sha": ")" + sha256_commit + R"(", "variants": {}}])";
    CHECK(lockfile::parse_lock(older, "kernels.lock").kernels.at(0).commit == sha256_commit);

    // Abbreviations, other lengths and uppercase stay refused, in every format.
    for (const std::string& bad : {sha256_commit.substr(0, 63), sha256_commit + "0", sha256_commit.substr(0, 12),
                                   std::string(64, 'A'), std::string(63, 'a') + "g", std::string(41, 'a')}) {
        CAPTURE(bad);
        std::string kernhub_text = text;
        kernhub_text.replace(kernhub_text.find(sha256_commit), sha256_commit.size(), bad);
        CHECK(parse_error(kernhub_text).find("64 for SHA-256") != std::string::npos);
        std::string kernels_text = current;
        kernels_text.replace(kernels_text.find(sha256_commit), sha256_commit.size(), bad);
        CHECK(parse_error(kernels_text).find("64 for SHA-256") != std::string::npos);
    }
}
