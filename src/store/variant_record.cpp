// The variant record's format (docs/ARCHITECTURE.md, "Side data"): the files
// of a complete variant with their sizes and SHA-256, written by fetch and
// read back by fetch, `cache ls` and `cache verify`.
#include <nlohmann/json.hpp>

#include "kernhub/error.hpp"
#include "store/cache.hpp"

namespace kernhub::store {

using nlohmann::json;

namespace {

// A path kernhub would itself have recorded: relative, without '.' or '..'
// parts, and passing path_name_problem (the rule fetch applies to listed
// and unpacked files, so what fetch keeps, a record may name).
bool safe_path(const std::string& path) {
    if (!path_name_problem(path).empty()) return false;
    try {
        check_relative_path(path);
    } catch (const Error&) {
        return false;
    }
    return true;
}

// The record lives in a cache others may write, and its paths and hashes
// reach FetchResult and verify_on_load: an entry kernhub would not have
// written makes the whole record unusable, so the variant is verified again.
bool well_formed(const json& item) {
    if (!item.is_object() || !item.contains("path") || !item["path"].is_string() || !item.contains("size") ||
        !item["size"].is_number_unsigned() || !item.contains("sha256") || !item["sha256"].is_string() ||
        (item.contains("archive") && !item["archive"].is_string())) {
        return false;
    }
    const std::string& sha256 = item["sha256"].get_ref<const std::string&>();
    return safe_path(item["path"].get_ref<const std::string&>()) && sha256.size() == 64 && is_etag(sha256);
}

}  // namespace

std::optional<std::vector<RecordedFile>> RepoCache::read_variant_files(const std::string& commit,
                                                                       const std::string& variant) const {
    std::optional<std::string> text;
    try {
        text = read_variant_record(commit, variant);
    } catch (const Error& e) {
        if (e.code() == ErrorCode::internal) throw;
        return std::nullopt;  // a bad variant name, a link or an oversized file: not kernhub's record
    }
    if (!text) return std::nullopt;
    const json record = json::parse(*text, nullptr, false);
    if (!record.is_object() || !record.contains("files") || !record["files"].is_array()) return std::nullopt;
    std::vector<RecordedFile> files;
    for (const auto& item : record["files"]) {
        if (!well_formed(item)) return std::nullopt;
        files.push_back(RecordedFile{item["path"].get<std::string>(), item["size"].get<std::uint64_t>(),
                                     item["sha256"].get<std::string>(), item.value("archive", std::string())});
    }
    return files;
}

void RepoCache::write_variant_files(const std::string& commit, const std::string& variant,
                                    const std::vector<RecordedFile>& files) const {
    json record = {{"format", 1}, {"variant", variant}, {"commit", commit}, {"files", json::array()}};
    for (const auto& file : files) {
        json item = {{"path", file.path}, {"size", file.size}, {"sha256", file.sha256}};
        if (!file.archive.empty()) item["archive"] = file.archive;
        record["files"].push_back(std::move(item));
    }
    write_variant_record(commit, variant, record.dump(2));
}

}  // namespace kernhub::store
