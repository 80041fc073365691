// Caches laid out for the cache-management tests with the store's own
// writers (blobs, links, refs, records), plus helpers to age and damage them.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "cache/cache.hpp"
#include "cache/receipts.hpp"
#include "digest/digest.hpp"
#include "support/temp_dir.hpp"

namespace kernhub::test::cacheadmin {

namespace fs = std::filesystem;

inline const std::string k_commit_a = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
inline const std::string k_commit_b = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
inline const std::string k_commit_c = "cccccccccccccccccccccccccccccccccccccccc";
inline const std::string k_variant = "native-cpu-x86_64-linux";

inline std::string git_blob_id(const std::string& content) {
    digest::GitBlobHasher hasher(content.size());
    hasher.update(content.data(), content.size());
    return hasher.finish_hex();
}

// One repo of a cache under a temp root.
struct RepoFixture {
    fs::path root;
    cache::RepoCache repo;

    RepoFixture(const fs::path& cache_root, const std::string& repo_id, RepoType type = RepoType::kernel)
        : root(cache_root), repo(cache_root, type, repo_id) {}

    // Stores `content` as a verified blob (named by its SHA-256, or by its
    // git blob id when `lfs` is false) and returns the etag.
    std::string blob(const std::string& content, bool lfs = true) const {
        const std::string etag = lfs ? digest::sha256_hex(content) : git_blob_id(content);
        if (repo.has_blob(etag)) return etag;
        auto partial = repo.begin_blob(etag);
        partial.write(content.data(), content.size());
        partial.commit();
        return etag;
    }

    // The blob, linked as snapshots/<commit>/<relpath>.
    std::string file(const std::string& commit, const std::string& relpath, const std::string& content,
                     bool lfs = true) const {
        const std::string etag = blob(content, lfs);
        repo.link_snapshot(commit, relpath, etag);
        return etag;
    }

    // kernhub's record that the variant is complete, naming `files`
    // (path relative to the variant folder -> content).
    void record(const std::string& commit, const std::string& variant,
                const std::vector<std::pair<std::string, std::string>>& files) const {
        nlohmann::json doc = {
            {"format", 1}, {"variant", variant}, {"commit", commit}, {"files", nlohmann::json::array()}};
        for (const auto& [path, content] : files) {
            doc["files"].push_back({{"path", path}, {"size", content.size()}, {"sha256", digest::sha256_hex(content)}});
        }
        repo.write_variant_record(commit, variant, doc.dump(2));
    }

    // A complete, recorded variant of two files: an LFS .so and a plain metadata.json.
    void variant(const std::string& commit, const std::string& so, const std::string& name = k_variant) const {
        const std::string prefix = "build/" + name + "/";
        file(commit, prefix + "libkernel.so", so);
        file(commit, prefix + "metadata.json", "{\"id\": \"" + so + "\"}", false);
        record(commit, name, {{"libkernel.so", so}, {"metadata.json", "{\"id\": \"" + so + "\"}"}});
    }

    // What a load holds of a variant (docs/cache-format.md, "Partial
    // variants"): `files` (path relative to the variant folder -> content)
    // as blobs (LFS, but metadata.json), linked under
    // .kernhub/partial/<commit>/build/<variant>/, and, with `with_record`,
    // the partial record naming them.
    void part(const std::string& commit, const std::string& variant,
              const std::vector<std::pair<std::string, std::string>>& files, bool with_record = true) const {
        nlohmann::json doc = {
            {"format", 1}, {"variant", variant}, {"commit", commit}, {"files", nlohmann::json::array()}};
        for (const auto& [path, content] : files) {
            const std::string etag = blob(content, path != "metadata.json");
            repo.link_snapshot(commit, "build/" + variant + "/" + path, etag, true, cache::LinkArea::partial);
            doc["files"].push_back({{"path", path}, {"size", content.size()}, {"sha256", digest::sha256_hex(content)}});
        }
        if (with_record) repo.write_variant_record(commit, variant, doc.dump(2), cache::LinkArea::partial);
    }
    // .kernhub/partial/<commit>
    fs::path partial(const std::string& commit) const { return repo.partial_dir(commit); }

    fs::path snapshot(const std::string& commit) const { return repo.snapshot_dir(commit); }
    fs::path blob_path(const std::string& etag) const { return repo.blob_path(etag); }
};

// Sets the modification time of `path` and of everything below it (links
// themselves, never their targets) to `hours` ago.
inline void age(const fs::path& path, int hours) {
    const auto when = std::chrono::system_clock::now() - std::chrono::hours(hours);
    const auto secs = std::chrono::duration_cast<std::chrono::seconds>(when.time_since_epoch()).count();
    struct timespec times[2] = {{secs, 0}, {secs, 0}};
    std::error_code ec;
    if (fs::is_directory(fs::symlink_status(path, ec))) {
        for (fs::recursive_directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
            REQUIRE(::utimensat(AT_FDCWD, it->path().c_str(), times, AT_SYMLINK_NOFOLLOW) == 0);
        }
    }
    REQUIRE(::utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW) == 0);
}

inline void write_file(const fs::path& path, const std::string& content) {
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << content;
}

// Every path below the root, links and folders included.
inline std::set<std::string> tree_of(const fs::path& root) {
    std::set<std::string> out;
    std::error_code ec;
    for (fs::recursive_directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
        out.insert(it->path().lexically_relative(root).string());
    }
    return out;
}

// A receipt as kernels 0.19.1 writes it: named by kernhub::cache::receipt_name,
// holding the location as JSON, mode 0600.
inline fs::path write_receipt(const fs::path& root, const std::string& store, const std::string& repo_id,
                              const std::string& commit, const std::string& variant) {
    const fs::path path = root / ".verified-kernels" / store / kernhub::cache::receipt_name(repo_id, commit, variant);
    const nlohmann::json doc = {
        {"location", {{"type", "remote_kernel"}, {"repo_id", repo_id}, {"revision", commit}, {"variant", variant}}}};
    write_file(path, doc.dump());
    return path;
}

inline std::vector<fs::path> write_receipts(const fs::path& root, const std::string& repo_id, const std::string& commit,
                                            const std::string& variant) {
    return {write_receipt(root, "digest/v1", repo_id, commit, variant),
            write_receipt(root, "signature/v1", repo_id, commit, variant)};
}

// Whether every one of `paths` exists (as an entry; a link counts), or none.
inline bool all_exist(const std::vector<fs::path>& paths) {
    for (const auto& p : paths) {
        if (!fs::exists(fs::symlink_status(p))) return false;
    }
    return true;
}

inline bool none_exist(const std::vector<fs::path>& paths) {
    for (const auto& p : paths) {
        if (fs::exists(fs::symlink_status(p))) return false;
    }
    return true;
}

// Flips the first byte of a read-only blob in place.
inline void flip_first_byte(const fs::path& path) {
    fs::permissions(path, fs::perms::owner_write, fs::perm_options::add);
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    char c = 0;
    file.get(c);
    file.seekp(0);
    file.put(static_cast<char>(c ^ 0x01));
}

}  // namespace kernhub::test::cacheadmin
