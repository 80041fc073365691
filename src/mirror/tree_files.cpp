#include "mirror/tree_files.hpp"

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "cache/cache.hpp"
#include "common/strict_json.hpp"
#include "kernhub/error.hpp"
#include "mirror/mirror.hpp"

namespace kernhub::mirror::detail {

using nlohmann::json;

const char* api_kind(RepoType type) {
    return type == RepoType::kernel ? "kernels" : "models";
}

fs::path api_dir(const fs::path& root, const hub::RepoRef& repo) {
    return root / "api" / api_kind(repo.type) / repo.repo_id;
}

std::string resolve_prefix(const hub::RepoRef& repo) {
    return repo.type == RepoType::kernel ? "kernels/" + repo.repo_id : repo.repo_id;
}

static Error damaged(const fs::path& path, const std::string& why) {
    return Error(ErrorCode::verification,
                 "the hub tree's " + path.string() + " " + why + "; fix or remove it, or mirror into a new directory");
}

std::optional<std::string> read_document(const fs::path& path) {
    std::string content;
    const cache::ReadStatus status = cache::read_file_into(path, content, k_max_tree_document_bytes);
    if (!status.opened && (status.error == ENOENT || status.error == ENOTDIR)) return std::nullopt;
    if (status.error == EFBIG) {
        throw damaged(path, "is larger than k_max_tree_document_bytes (" +
                                std::to_string(k_max_tree_document_bytes >> 20) + " MiB)");
    }
    if (status.error == EISDIR) throw damaged(path, "is a directory, where a document belongs");
    if (status.not_regular) throw damaged(path, "is not a regular file (a FIFO or device), where a document belongs");
    if (status.error != 0) {
        throw Error(ErrorCode::internal,
                    "cannot read " + path.string() + ": " + std::strerror(status.error) + "; check permissions");
    }
    return content;
}

std::map<std::string, hub::TreeEntry> read_listing(const fs::path& root, const hub::RepoRef& repo,
                                                   const std::string& commit) {
    const fs::path tree = api_dir(root, repo) / "tree";
    std::map<std::string, hub::TreeEntry> files;
    for (const fs::path& path : {tree / (commit + ".json"), tree / commit / "build"}) {
        std::optional<std::string> text = read_document(path);
        if (!text) continue;
        std::vector<hub::TreeEntry> entries;
        try {
            entries = hub::parse_tree_page(*text, path.string());
        } catch (const Error& e) {
            throw damaged(path, "is not a tree listing (" + e.plain_message() + ")");
        }
        for (auto& entry : entries) {
            if (!entry.is_file) continue;
            cache::check_relative_path(entry.path);
            cache::check_etag(entry.etag());
            files[entry.path] = std::move(entry);
        }
        break;
    }
    return files;
}

std::vector<std::pair<std::string, fs::path>> revision_files(const fs::path& dir) {
    std::vector<std::pair<std::string, fs::path>> out;
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) return out;
    for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        if (!it->is_regular_file(ec)) continue;
        if (out.size() == k_max_repo_revisions) {
            throw Error(ErrorCode::verification, dir.string() + " holds more than k_max_repo_revisions (" +
                                                     std::to_string(k_max_repo_revisions) +
                                                     ") revisions; mirror into a new directory");
        }
        out.emplace_back(it->path().lexically_relative(dir).generic_string(), it->path());
    }
    if (ec) throw Error(ErrorCode::internal, "cannot list " + dir.string() + ": " + ec.message());
    return out;
}

std::string revision_commit(const fs::path& path, const std::string& text) {
    json doc = strict_json::parse_or_discard(text);
    if (doc.is_object() && doc.contains("sha") && doc["sha"].is_string() &&
        is_commit_sha(doc["sha"].get<std::string>())) {
        return doc["sha"].get<std::string>();
    }
    throw damaged(path, "names no commit \"sha\"");
}

// The size of the Git LFS pointer file that stands for an LFS file in git.
static std::size_t lfs_pointer_size(const hub::TreeEntry& entry) {
    return std::string("version https://git-lfs.github.com/spec/v1\noid sha256:" + entry.lfs_sha256 + "\nsize " +
                       std::to_string(entry.size) + "\n")
        .size();
}

std::string listing_json(const std::vector<hub::TreeEntry>& entries) {
    json out = json::array();
    for (const auto& entry : entries) {
        json item = {{"type", "file"}, {"oid", entry.oid}, {"size", entry.size}, {"path", entry.path}};
        if (entry.is_lfs()) {
            item["lfs"] = {{"oid", entry.lfs_sha256}, {"size", entry.size}, {"pointerSize", lfs_pointer_size(entry)}};
        }
        out.push_back(std::move(item));
    }
    return out.dump();
}

}  // namespace kernhub::mirror::detail
