// Where a commit's listing comes from when the hub is not asked: kernhub's
// own copy, huggingface_hub's cached tree, or the snapshot links themselves.
#include <nlohmann/json.hpp>

#include "cache/cache.hpp"
#include "fetch/fetcher.hpp"

namespace kernhub::fetch {

using nlohmann::json;

bool is_python_bytecode(const std::string& relpath) {
    const std::string pyc = ".pyc";
    if (relpath.size() >= pyc.size() && relpath.compare(relpath.size() - pyc.size(), pyc.size(), pyc) == 0) {
        return true;
    }
    std::size_t start = 0;
    for (;;) {
        std::size_t end = relpath.find('/', start);
        if (relpath.compare(start, end == std::string::npos ? std::string::npos : end - start, "__pycache__") == 0) {
            return true;
        }
        if (end == std::string::npos) return false;
        start = end + 1;
    }
}

bool excluded_from_digest(const std::string& relpath) {
    return relpath == "metadata.json" || relpath == "metadata.json.sigstore" || is_python_bytecode(relpath);
}

static bool is_size(const json& value) {
    return value.is_number_unsigned();
}

std::optional<std::vector<hub::TreeEntry>> parse_hf_tree_cache(const std::string& text) {
    json doc = json::parse(text, nullptr, false);
    if (doc.is_discarded() || !doc.is_object() || doc.value("format_version", json()) != 1) return std::nullopt;
    auto files = doc.find("files");
    if (files == doc.end() || !files->is_object()) return std::nullopt;
    std::vector<hub::TreeEntry> entries;
    for (const auto& [path, info] : files->items()) {
        if (path.rfind("build/", 0) != 0) continue;
        if (!info.is_object() || !info.contains("size") || !is_size(info["size"]) || !info.contains("blob_id") ||
            !info["blob_id"].is_string()) {
            return std::nullopt;
        }
        hub::TreeEntry entry;
        entry.path = path;
        entry.is_file = true;
        entry.size = info["size"].get<std::uint64_t>();
        entry.oid = info["blob_id"].get<std::string>();
        if (info.contains("lfs_sha256") && !info["lfs_sha256"].is_null()) {
            if (!info["lfs_sha256"].is_string()) return std::nullopt;
            entry.lfs_sha256 = info["lfs_sha256"].get<std::string>();
            if (info.contains("lfs_size") && is_size(info["lfs_size"]))
                entry.size = info["lfs_size"].get<std::uint64_t>();
        }
        entries.push_back(std::move(entry));
    }
    return entries;
}

}  // namespace kernhub::fetch
