// The variant record's format (docs/cache-format.md, "Side data"): the files
// of a complete variant with their sizes and SHA-256, and the signature
// verified for it when a policy applied, written by fetch and read back by
// fetch, `cache ls` and `cache verify`.
#include <nlohmann/json.hpp>

#include "cache/cache.hpp"
#include "common/strict_json.hpp"
#include "kernhub/error.hpp"

namespace kernhub::cache {

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

// The signature part; nullopt unless every field is what kernhub writes.
std::optional<RecordedSignature> read_signature(const json& record) {
    const auto it = record.find("signature");
    if (it == record.end() || !it->is_object()) return std::nullopt;
    const json& item = *it;
    const auto text = [&item](const char* key) -> const std::string* {
        const auto field = item.find(key);
        if (field == item.end() || !field->is_string()) return nullptr;
        return &field->get_ref<const std::string&>();
    };
    const auto number = [&item](const char* key) -> std::optional<std::int64_t> {
        const auto field = item.find(key);
        if (field == item.end() || !field->is_number_integer()) return std::nullopt;
        return field->get<std::int64_t>();
    };
    const std::string* identity = text("identity");
    const std::string* issuer = text("issuer");
    const std::string* repository = text("repository");
    const std::string* root = text("root_sha256");
    const std::string* policy = text("policy_sha256");
    const auto log_time = number("log_time");
    const auto log_index = number("log_index");
    if (identity == nullptr || issuer == nullptr || repository == nullptr || root == nullptr || policy == nullptr ||
        !log_time || !log_index || identity->empty() || issuer->empty()) {
        return std::nullopt;
    }
    return RecordedSignature{*identity, *issuer, *repository, *log_time, *log_index, *root, *policy};
}

}  // namespace

std::optional<std::vector<RecordedFile>> RepoCache::read_variant_files(const std::string& commit,
                                                                       const std::string& variant) const {
    auto record = read_variant(commit, variant);
    if (!record) return std::nullopt;
    return std::move(record->files);
}

std::optional<VariantRecord> RepoCache::read_variant(const std::string& commit, const std::string& variant,
                                                     LinkArea area) const {
    std::optional<std::string> text;
    try {
        text = read_variant_record(commit, variant, area);
    } catch (const Error& e) {
        if (e.code() == ErrorCode::internal) throw;
        return std::nullopt;  // a bad variant name, a link or an oversized file: not kernhub's record
    }
    if (!text) return std::nullopt;
    const json record = strict_json::parse_or_discard(*text);
    if (!record.is_object() || !record.contains("files") || !record["files"].is_array()) return std::nullopt;
    VariantRecord out;
    for (const auto& item : record["files"]) {
        if (!well_formed(item)) return std::nullopt;
        out.files.push_back(RecordedFile{item["path"].get<std::string>(), item["size"].get<std::uint64_t>(),
                                         item["sha256"].get<std::string>(), item.value("archive", std::string())});
    }
    out.signature = read_signature(record);
    return out;
}

void RepoCache::write_variant_files(const std::string& commit, const std::string& variant,
                                    const std::vector<RecordedFile>& files,
                                    const std::optional<RecordedSignature>& signature, LinkArea area) const {
    json record = {{"format", 1}, {"variant", variant}, {"commit", commit}, {"files", json::array()}};
    for (const auto& file : files) {
        json item = {{"path", file.path}, {"size", file.size}, {"sha256", file.sha256}};
        if (!file.archive.empty()) item["archive"] = file.archive;
        record["files"].push_back(std::move(item));
    }
    if (signature) {
        record["signature"] = {{"identity", signature->identity},          {"issuer", signature->issuer},
                               {"repository", signature->repository},      {"log_time", signature->log_time},
                               {"log_index", signature->log_index},        {"root_sha256", signature->root_sha256},
                               {"policy_sha256", signature->policy_digest}};
    }
    write_variant_record(commit, variant, record.dump(2), area);
}

}  // namespace kernhub::cache
