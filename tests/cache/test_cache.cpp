#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cache/cache.hpp"
#include "digest/digest.hpp"
#include "kernhub/error.hpp"
#include "support/forked.hpp"
#include "support/temp_dir.hpp"

namespace fs = std::filesystem;
using kernhub::Error;
using kernhub::ErrorCode;
using kernhub::RepoType;
using kernhub::cache::RepoCache;
using kernhub::test::TempDir;

namespace {

const std::string k_commit = "0123456789abcdef0123456789abcdef01234567";
const std::string k_commit2 = "89abcdef0123456789abcdef0123456789abcdef";

std::string read_whole(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream out;
    out << in.rdbuf();
    return out.str();
}

std::vector<std::string> names_in(const fs::path& dir) {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename());
    std::sort(names.begin(), names.end());
    return names;
}

// Stores `content` as a committed blob whose etag is its sha256.
std::string add_blob(const RepoCache& cache, const std::string& content) {
    std::string etag = kernhub::digest::sha256_hex(content);
    auto blob = cache.begin_blob(etag);
    blob.write(content.data(), content.size());
    blob.commit();
    return etag;
}

ErrorCode code_of(const std::function<void()>& action) {
    try {
        action();
    } catch (const Error& e) {
        return e.code();
    }
    return ErrorCode::ok;
}

}  // namespace

TEST_CASE("cache root resolution order", "[store]") {
    using Env = std::map<std::string, std::string>;
    const Env all = {{"KERNHUB_CACHE", "/k"}, {"KERNELS_CACHE", "/kc"}, {"HF_HUB_CACHE", "/hc"},
                     {"HF_HOME", "/hh"},      {"XDG_CACHE_HOME", "/x"}, {"HOME", "/home/u"}};
    auto without = [&](std::initializer_list<const char*> names, const std::string& blank = "") {
        Env env = all;
        for (const char* name : names) env.erase(name);
        if (!blank.empty()) env[blank] = "";
        return env;
    };
    struct Row {
        std::string name;
        Env env;
        std::string explicit_dir;
        std::string expected;
    };
    const std::vector<Row> rows = {
        {"explicit wins", all, "/cli", "/cli"},
        {"KERNHUB_CACHE", all, "", "/k"},
        {"KERNELS_CACHE", without({"KERNHUB_CACHE"}), "", "/kc"},
        {"empty KERNHUB_CACHE ignored", without({}, "KERNHUB_CACHE"), "", "/kc"},
        {"HF_HUB_CACHE", without({"KERNHUB_CACHE", "KERNELS_CACHE"}), "", "/hc"},
        {"HF_HOME", without({"KERNHUB_CACHE", "KERNELS_CACHE", "HF_HUB_CACHE"}), "", "/hh/hub"},
        {"empty HF_HUB_CACHE ignored", without({"KERNHUB_CACHE", "KERNELS_CACHE"}, "HF_HUB_CACHE"), "", "/hh/hub"},
        {"XDG_CACHE_HOME", without({"KERNHUB_CACHE", "KERNELS_CACHE", "HF_HUB_CACHE", "HF_HOME"}), "",
         "/x/huggingface/hub"},
        {"HOME", Env{{"HOME", "/home/u"}, {"XDG_CACHE_HOME", ""}}, "", "/home/u/.cache/huggingface/hub"},
        {"tilde expands", Env{{"HF_HOME", "~/hf"}, {"HOME", "/home/u"}}, "", "/home/u/hf/hub"},
    };
    for (const Row& row : rows) {
        CAPTURE(row.name);
        auto lookup = [&](const std::string& key) -> std::optional<std::string> {
            auto it = row.env.find(key);
            if (it == row.env.end()) return std::nullopt;
            return it->second;
        };
        CHECK(kernhub::cache::resolve_cache_root(row.explicit_dir, lookup) == fs::path(row.expected));
    }
    for (const Env& env : {Env{}, Env{{"HOME", ""}}}) {
        auto lookup = [&](const std::string& key) -> std::optional<std::string> {
            auto it = env.find(key);
            return it == env.end() ? std::nullopt : std::optional<std::string>(it->second);
        };
        CHECK(code_of([&] { kernhub::cache::resolve_cache_root("", lookup); }) == ErrorCode::usage);
    }
}

TEST_CASE("process_env reads the environment", "[store]") {
    ::setenv("KERNHUB_TEST_STORE_VAR", "value", 1);
    auto env = kernhub::cache::process_env();
    CHECK(env("KERNHUB_TEST_STORE_VAR") == std::optional<std::string>("value"));
    ::unsetenv("KERNHUB_TEST_STORE_VAR");
    CHECK_FALSE(env("KERNHUB_TEST_STORE_VAR").has_value());
}

TEST_CASE("repo folder names", "[store]") {
    CHECK(kernhub::cache::repo_folder_name(RepoType::kernel, "kernels-community/flash-attn3") ==
          "kernels--kernels-community--flash-attn3");
    CHECK(kernhub::cache::repo_folder_name(RepoType::model, "org/name") == "models--org--name");
    CHECK(code_of([] { kernhub::cache::repo_folder_name(RepoType::kernel, "../escape"); }) == ErrorCode::usage);
    TempDir dir;
    RepoCache cache(dir.path(), RepoType::kernel, "org/name");
    CHECK(cache.folder() == dir.path() / "kernels--org--name");
    CHECK(cache.root() == dir.path());
}

TEST_CASE("write_file_atomic writes, replaces and leaves no temp", "[store]") {
    TempDir dir;
    const fs::path target = dir.path() / "a" / "b" / "file.json";
    kernhub::cache::write_file_atomic(target, "first");
    CHECK(read_whole(target) == "first");
    kernhub::cache::write_file_atomic(target, "second, longer content");
    CHECK(read_whole(target) == "second, longer content");
    CHECK(names_in(target.parent_path()) == std::vector<std::string>{"file.json"});
    CHECK(kernhub::cache::read_file(target) == std::optional<std::string>("second, longer content"));
    CHECK_FALSE(kernhub::cache::read_file(dir.path() / "missing").has_value());

    // A parent that is a regular file fails even for root.
    const fs::path blocked = target / "child";
    try {
        kernhub::cache::write_file_atomic(blocked, "x");
        FAIL("expected an Error");
    } catch (const Error& e) {
        CHECK(e.code() == ErrorCode::internal);
        CHECK_THAT(e.message(), Catch::StartsWith("cannot write " + blocked.string() + ": "));
        CHECK_THAT(e.message(), Catch::EndsWith("; check permissions and free space"));
    }
    CHECK(code_of([&] { kernhub::cache::read_file(dir.path()); }) == ErrorCode::internal);
}

TEST_CASE("IncompleteBlob commit, abandon and restart", "[store]") {
    TempDir dir;
    RepoCache cache(dir.path(), RepoType::kernel, "org/name");
    const std::string content = "kernel bytes";
    const std::string etag = kernhub::digest::sha256_hex(content);

    SECTION("commit makes a read-only blob and removes the temp") {
        auto blob = cache.begin_blob(etag);
        const fs::path temp = blob.temp_path();
        CHECK(temp.parent_path() == cache.folder() / "blobs");
        CHECK(temp.filename().string().size() == etag.size() + 1 + 16 + 11);
        CHECK_THAT(temp.filename().string(), Catch::StartsWith(etag + ".") && Catch::EndsWith(".incomplete"));
        blob.write(content.data(), content.size());
        CHECK(blob.size() == content.size());
        CHECK_FALSE(cache.has_blob(etag));  // nothing visible before commit
        blob.commit();
        CHECK(cache.has_blob(etag));
        CHECK_FALSE(fs::exists(temp));
        CHECK(read_whole(cache.blob_path(etag)) == content);
        struct stat st {};
        REQUIRE(::stat(cache.blob_path(etag).c_str(), &st) == 0);
        CHECK((st.st_mode & 07777) == 0444);
        CHECK(names_in(cache.folder() / "blobs") == std::vector<std::string>{etag});
        CHECK_THROWS_AS(blob.write("x", 1), Error);
    }
    SECTION("an abandoned blob keeps its partial file for the next run; discard removes it") {
        fs::path temp;
        {
            auto blob = cache.begin_blob(etag);
            blob.write(content.data(), content.size());
            auto moved = std::move(blob);  // the moved-from one must not close or remove anything
            moved.write("more", 4);
            temp = moved.temp_path();
        }
        CHECK(names_in(cache.folder() / "blobs") == std::vector<std::string>{temp.filename().string()});
        CHECK(read_whole(temp) == content + "more");
        CHECK_FALSE(cache.has_blob(etag));
        {
            auto blob = cache.begin_blob(etag);
            blob.write("x", 1);
            blob.discard();
            CHECK_THROWS_AS(blob.write("y", 1), Error);
        }
        CHECK(names_in(cache.folder() / "blobs").size() == 1);  // only the first partial
    }
    SECTION("a partial file holding bytes the blob did not write is never committed") {
        auto blob = cache.begin_blob(etag);
        const fs::path temp = blob.temp_path();
        blob.write(content.data(), content.size());
        {
            // Another writer of the same file (a forked child's share of
            // the descriptor would do the same).
            std::ofstream other(temp, std::ios::binary | std::ios::app);
            other << "stray";
        }
        try {
            blob.commit();
            FAIL("commit accepted a file with bytes it did not write");
        } catch (const Error& e) {
            CHECK(e.code() == ErrorCode::verification);
            CHECK_THAT(e.what(), Catch::Contains("holds 17 bytes where 12 were written"));
        }
        CHECK_FALSE(cache.has_blob(etag));
        CHECK_FALSE(fs::exists(temp));
    }
    SECTION("restart drops what was written") {
        auto blob = cache.begin_blob(etag);
        const std::string junk(5000, 'j');
        blob.write(junk.data(), junk.size());
        blob.restart();
        CHECK(blob.size() == 0);
        blob.write(content.data(), content.size());
        blob.commit();
        CHECK(read_whole(cache.blob_path(etag)) == content);
    }
}

TEST_CASE("CACHEDIR.TAG is created at the root", "[store]") {
    TempDir dir;
    RepoCache cache(dir.path(), RepoType::kernel, "org/name");
    CHECK_FALSE(fs::exists(dir.path() / "CACHEDIR.TAG"));
    add_blob(cache, "x");
    CHECK_THAT(read_whole(dir.path() / "CACHEDIR.TAG"),
               Catch::StartsWith("Signature: 8a477f597d28d172789f06886806bc55"));
}

TEST_CASE("snapshot links are relative, resolve and are replaced atomically", "[store]") {
    TempDir dir;
    RepoCache cache(dir.path(), RepoType::kernel, "org/name");
    const std::string etag = add_blob(cache, "payload");
    const std::vector<std::pair<std::string, std::string>> rows = {
        {"a.so", "../../blobs/"},
        {"build/a.so", "../../../blobs/"},
        {"build/torch-cu128/a.so", "../../../../blobs/"},
    };
    for (const auto& [relpath, prefix] : rows) {
        CAPTURE(relpath);
        CHECK_FALSE(cache.snapshot_complete(k_commit, relpath));
        cache.link_snapshot(k_commit, relpath, etag);
        const fs::path link = cache.snapshot_path(k_commit, relpath);
        CHECK(fs::is_symlink(fs::symlink_status(link)));
        CHECK(fs::read_symlink(link) == fs::path(prefix + etag));
        CHECK(fs::equivalent(link, cache.blob_path(etag)));
        CHECK(read_whole(link) == "payload");
        CHECK(cache.snapshot_complete(k_commit, relpath));
    }

    const std::string etag2 = add_blob(cache, "newer payload");
    cache.link_snapshot(k_commit, "build/a.so", etag2);
    CHECK(fs::read_symlink(cache.snapshot_path(k_commit, "build/a.so")) == fs::path("../../../blobs/" + etag2));
    CHECK(read_whole(cache.snapshot_path(k_commit, "build/a.so")) == "newer payload");
    CHECK(names_in(cache.snapshot_dir(k_commit) / "build") == std::vector<std::string>{"a.so", "torch-cu128"});

    const std::string absent(64, 'e');
    CHECK(code_of([&] { cache.link_snapshot(k_commit, "b.so", absent); }) == ErrorCode::internal);
    CHECK_FALSE(fs::exists(fs::symlink_status(cache.snapshot_path(k_commit, "b.so"))));
}

TEST_CASE("snapshot_complete is false for a dangling link", "[store]") {
    TempDir dir;
    RepoCache cache(dir.path(), RepoType::kernel, "org/name");
    const fs::path link = cache.snapshot_path(k_commit, "a.so");
    fs::create_directories(link.parent_path());
    fs::create_symlink("../../blobs/" + std::string(64, 'a'), link);
    CHECK_FALSE(cache.snapshot_complete(k_commit, "a.so"));
    CHECK_FALSE(cache.snapshot_complete(k_commit, "missing.so"));
}

TEST_CASE("refs round trip", "[store]") {
    TempDir dir;
    RepoCache cache(dir.path(), RepoType::kernel, "org/name");
    CHECK_FALSE(cache.read_ref("main").has_value());
    cache.write_ref("main", k_commit);
    CHECK(cache.read_ref("main") == k_commit);
    CHECK(read_whole(cache.folder() / "refs" / "main") == k_commit);  // no newline, like huggingface_hub
    cache.write_ref("main", k_commit2);
    CHECK(cache.read_ref("main") == k_commit2);

    cache.write_ref("refs/pr/1", k_commit);
    CHECK(fs::is_regular_file(cache.folder() / "refs" / "refs" / "pr" / "1"));
    CHECK(cache.read_ref("refs/pr/1") == k_commit);

    // Written by hand with trailing whitespace; a garbage ref reads as absent.
    kernhub::cache::write_file_atomic(cache.folder() / "refs" / "v1", k_commit + "\n");
    CHECK(cache.read_ref("v1") == k_commit);
    kernhub::cache::write_file_atomic(cache.folder() / "refs" / "v2", "not a commit\n");
    CHECK_FALSE(cache.read_ref("v2").has_value());

    for (const char* bad : {"..", "../main", "a/../b", "a/..", "/abs", "", ".", "a//b", "a/"}) {
        CAPTURE(bad);
        CHECK(code_of([&] { cache.write_ref(bad, k_commit); }) == ErrorCode::usage);
        CHECK(code_of([&] { cache.read_ref(bad); }) == ErrorCode::usage);
    }
    CHECK(code_of([&] { cache.write_ref("main", "abc"); }) == ErrorCode::verification);
}

TEST_CASE("trees and variant records round trip", "[store]") {
    TempDir dir;
    RepoCache cache(dir.path(), RepoType::kernel, "org/name");
    const std::string variant = "torch28-cxx11-cu128-x86_64-linux";
    CHECK_FALSE(cache.read_tree(k_commit).has_value());
    CHECK_FALSE(cache.read_variant_record(k_commit, variant).has_value());
    cache.write_tree(k_commit, R"([{"path":"a"}])");
    cache.write_variant_record(k_commit, variant, R"({"ok":true})");
    CHECK(cache.read_tree(k_commit) == std::optional<std::string>(R"([{"path":"a"}])"));
    CHECK(cache.read_variant_record(k_commit, variant) == std::optional<std::string>(R"({"ok":true})"));
    CHECK(fs::is_regular_file(cache.folder() / ".kernhub" / "trees" / (k_commit + ".json")));
    CHECK(fs::is_regular_file(cache.folder() / ".kernhub" / "variants" / k_commit / (variant + ".json")));
    for (const char* bad : {"", "../x", "a/b", ".hidden"}) {
        CAPTURE(bad);
        CHECK(code_of([&] { cache.write_variant_record(k_commit, bad, "{}"); }) == ErrorCode::usage);
    }
}

TEST_CASE("invalid etags and commits are rejected", "[store]") {
    TempDir dir;
    RepoCache cache(dir.path(), RepoType::kernel, "org/name");
    const std::vector<std::string> bad_etags = {"",
                                                std::string(39, 'a'),
                                                std::string(41, 'a'),
                                                std::string(63, 'a'),
                                                std::string(40, 'A'),
                                                std::string(39, 'a') + "g",
                                                "../" + std::string(37, 'a'),
                                                "\"" + std::string(40, 'a') + "\""};
    for (const std::string& etag : bad_etags) {
        CAPTURE(etag);
        CHECK(code_of([&] { cache.blob_path(etag); }) == ErrorCode::verification);
        CHECK(code_of([&] { cache.lock_blob(etag); }) == ErrorCode::verification);
        CHECK(code_of([&] { cache.begin_blob(etag); }) == ErrorCode::verification);
    }
    CHECK_NOTHROW(cache.blob_path(std::string(40, 'a')));
    CHECK_NOTHROW(cache.blob_path(std::string(64, '0')));
    try {
        cache.blob_path("XYZ");
        FAIL("expected an Error");
    } catch (const Error& e) {
        CHECK_THAT(e.message(), Catch::StartsWith("hub sent an invalid etag 'XYZ'"));
    }
    // A commit is a full SHA-1 (40) or SHA-256 (64) id in lowercase hex.
    for (const std::string& commit : {std::string(39, 'a'), std::string(41, 'a'), std::string(63, 'a'),
                                      std::string(65, 'a'), std::string(40, 'A'), std::string(64, 'A'),
                                      std::string(63, 'a') + "g", std::string("main")}) {
        CAPTURE(commit);
        CHECK(code_of([&] { cache.snapshot_dir(commit); }) == ErrorCode::verification);
        CHECK(code_of([&] { cache.write_tree(commit, "{}"); }) == ErrorCode::verification);
    }
    CHECK_NOTHROW(cache.snapshot_dir(std::string(40, 'a')));
    CHECK_NOTHROW(cache.snapshot_dir(std::string(64, 'b')));
    try {
        cache.snapshot_dir("main");
        FAIL("expected an Error");
    } catch (const Error& e) {
        CHECK_THAT(e.message(), Catch::StartsWith("hub sent an invalid commit 'main'"));
    }
    CHECK_FALSE(fs::exists(cache.folder()));  // nothing was created for bad input
}

TEST_CASE("check_relative_path table", "[store]") {
    for (const char* good : {"a", "a.so", "build/a.so", "build/torch-cu128/_ops.so", ".hidden", "a..b", "..a",
                             "dir/...", "name with space"}) {
        CAPTURE(good);
        CHECK_NOTHROW(kernhub::cache::check_relative_path(good));
    }
    const std::vector<std::string> bad = {
        "", "/a", "/", "..", ".", "../a", "a/..", "a/../b", "a/./b", "./a", "a//b", "a/", std::string("a\0b", 3)};
    for (const std::string& path : bad) {
        CAPTURE(path);
        CHECK(code_of([&] { kernhub::cache::check_relative_path(path); }) == ErrorCode::verification);
    }
}

TEST_CASE("a forked child leaves its parent's cache lock and partial download alone", "[store]") {
    TempDir dir;
    RepoCache cache(dir.path(), RepoType::kernel, "org/name");
    const std::string content = "kernel bytes";
    const std::string etag = kernhub::digest::sha256_hex(content);
    const fs::path lock_path = dir.path() / ".locks" / "forked.lock";
    std::optional<kernhub::cache::FileLock> lock;
    lock.emplace(lock_path);
    std::optional<kernhub::cache::IncompleteBlob> blob;
    blob.emplace(cache.begin_blob(etag));
    blob->write(content.data(), 5);
    const fs::path temp = blob->temp_path();
    // The child has copies of both, as a child forked while a thread of
    // the parent downloads does; it tries each thing it must not do.
    const kernhub::test::Forked child = kernhub::test::run_forked([&] {
        std::string out;
        for (const char* what : {"write", "restart", "commit"}) {
            try {
                if (std::string(what) == "write") blob->write("x", 1);
                if (std::string(what) == "restart") blob->restart();
                if (std::string(what) == "commit") blob->commit();
                out += std::string(what) + " accepted\n";
            } catch (const Error& e) {
                out += std::string(what) + (e.code() == ErrorCode::internal ? " refused\n" : " other error\n");
            }
        }
        blob->discard();  // closes the child's descriptor; the file stays
        lock.reset();     // closes the child's descriptor; the lock stays
        return out;
    });
    INFO(child.out);
    CHECK(child.ok());
    CHECK(child.out == "write refused\nrestart refused\ncommit refused\n");
    CHECK(fs::exists(temp));
    // Still the parent's: no other open file gets the lock.
    CHECK_FALSE(kernhub::cache::FileLock::try_acquire(lock_path).has_value());
    blob->write(content.data() + 5, content.size() - 5);
    blob->commit();
    CHECK(read_whole(cache.blob_path(etag)) == content);
    lock.reset();
    CHECK(kernhub::cache::FileLock::try_acquire(lock_path).has_value());
}
