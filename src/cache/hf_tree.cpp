// huggingface_hub's listing of a commit (<repo>/trees/<commit>.json): the
// one reader of its format, for the offline fetch and for cache import.
#include "cache/cache.hpp"
#include "common/strict_json.hpp"

namespace kernhub::cache {

HfTree parse_hf_tree(const std::string& text, const std::string& prefix) {
    strict_json::Limits limits;
    limits.max_depth = 8;
    limits.depth_name = "k_max_hf_tree_depth";
    const strict_json::Parsed parsed = strict_json::parse(text, limits);
    const nlohmann::json& doc = parsed.document;
    HfTree out;
    if (parsed.problem) return out;
    if (!doc.is_object() || doc.value("format_version", nlohmann::json()) != 1) {
        out.status = HfTree::Status::other_format;
        return out;
    }
    const auto files = doc.find("files");
    if (files == doc.end() || !files->is_object()) return out;
    for (const auto& [path, info] : files->items()) {
        if (path.rfind(prefix, 0) != 0) continue;
        if (!info.is_object()) return HfTree{};
        const auto size = info.find("size");
        const auto blob = info.find("blob_id");
        if (size == info.end() || !size->is_number_unsigned() || blob == info.end() || !blob->is_string()) {
            return HfTree{};
        }
        HfTreeFile file{path, size->get<std::uint64_t>(), blob->get<std::string>(), {}};
        if (const auto lfs = info.find("lfs_sha256"); lfs != info.end() && !lfs->is_null()) {
            if (!lfs->is_string()) return HfTree{};
            file.lfs_sha256 = lfs->get<std::string>();
            if (const auto lfs_size = info.find("lfs_size"); lfs_size != info.end() && lfs_size->is_number_unsigned()) {
                file.size = lfs_size->get<std::uint64_t>();
            }
        }
        out.files.push_back(std::move(file));
    }
    out.status = HfTree::Status::ok;
    return out;
}

}  // namespace kernhub::cache
