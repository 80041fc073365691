// When a revision was last resolved on the hub (docs/cache-format.md,
// "Side data"): .kernhub/refs/<encoded revision>.json, read by a fetch
// with KERNHUB_REF_TTL set to decide whether refs/<revision> is fresh
// enough to use without asking the hub again.
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>

#include "cache/cache.hpp"
#include "common/repo.hpp"
#include "common/strict_json.hpp"
#include "kernhub/error.hpp"

namespace kernhub::cache {

using nlohmann::json;

namespace {

constexpr const char* k_suffix = ".json";
// The longest file name most filesystems take (NAME_MAX).
constexpr std::size_t k_max_file_name = 255;

bool plain_name_byte(unsigned char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '-';
}

}  // namespace

std::optional<std::string> ref_resolution_name(const std::string& revision) {
    static constexpr char k_hex[] = "0123456789ABCDEF";
    std::string name;
    name.reserve(revision.size() + 5);
    for (char c : revision) {
        const auto byte = static_cast<unsigned char>(c);
        if (plain_name_byte(byte)) {
            name += c;
        } else {
            name += '%';
            name += k_hex[byte >> 4];
            name += k_hex[byte & 0xf];
        }
        if (name.size() + 5 > k_max_file_name) return std::nullopt;
    }
    // Never "." or "..": the suffix makes every name at least six bytes, and
    // no '/' or NUL survives the encoding, so the name is one path part.
    return name + k_suffix;
}

std::optional<RefResolution> RepoCache::read_ref_resolution(const std::string& revision) const {
    check_revision(revision);
    const std::optional<std::string> name = ref_resolution_name(revision);
    if (!name) return std::nullopt;
    std::optional<std::string> text;
    try {
        text = read_cache_file(m_folder / ".kernhub" / "refs" / *name, k_max_ref_resolution_bytes, "a ref resolution");
    } catch (const Error&) {
        return std::nullopt;  // a link, a FIFO, too large, unreadable: ask the hub
    }
    if (!text) return std::nullopt;
    const json doc = strict_json::parse_or_discard(*text);
    if (!doc.is_object()) return std::nullopt;
    const auto commit = doc.find("commit");
    const auto resolved_at = doc.find("resolved_at");
    if (commit == doc.end() || !commit->is_string() || !is_commit_sha(commit->get_ref<const std::string&>())) {
        return std::nullopt;
    }
    // Whole seconds since the epoch, as kernhub writes them; a negative or
    // float value, or one past int64, is not a time kernhub wrote.
    if (resolved_at == doc.end() || !resolved_at->is_number_unsigned() ||
        resolved_at->get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        return std::nullopt;
    }
    return RefResolution{commit->get<std::string>(), static_cast<std::int64_t>(resolved_at->get<std::uint64_t>())};
}

void RepoCache::write_ref_resolution(const std::string& revision, const RefResolution& resolution) const {
    check_revision(revision);
    check_commit(resolution.commit);
    const std::optional<std::string> name = ref_resolution_name(revision);
    if (!name) return;
    const json doc = {{"commit", resolution.commit}, {"resolved_at", resolution.resolved_at}};
    // No fsync: a time lost or torn by a crash reads as absent or malformed,
    // which costs one revision request and nothing else. The rename keeps
    // readers from ever seeing half a file.
    write_file_atomic(m_folder / ".kernhub" / "refs" / *name, doc.dump(), staging_dir(), Durability::rename_only);
}

std::optional<PublisherRecord> RepoCache::read_publisher() const {
    std::optional<std::string> text;
    try {
        text = read_cache_file(publisher_path(), k_max_publisher_bytes, "a publisher record");
    } catch (const Error&) {
        return std::nullopt;
    }
    if (!text) return std::nullopt;
    const json doc = strict_json::parse_or_discard(*text);
    // Exactly what write_publisher writes: four keys.
    if (!doc.is_object() || doc.size() != 4) return std::nullopt;
    const auto endpoint = doc.find("endpoint");
    const auto organization = doc.find("organization");
    const auto trusted = doc.find("trusted_kernel_publisher");
    const auto checked_at = doc.find("checked_at");
    if (endpoint == doc.end() || !endpoint->is_string() || organization == doc.end() || !organization->is_string() ||
        trusted == doc.end() || !trusted->is_boolean() || !trusted->get<bool>() || checked_at == doc.end() ||
        !checked_at->is_number_unsigned() ||
        checked_at->get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        return std::nullopt;
    }
    return PublisherRecord{endpoint->get<std::string>(), organization->get<std::string>(),
                           static_cast<std::int64_t>(checked_at->get<std::uint64_t>())};
}

void RepoCache::write_publisher(const PublisherRecord& record) const {
    const json doc = {{"endpoint", record.endpoint},
                      {"organization", record.organization},
                      {"trusted_kernel_publisher", true},
                      {"checked_at", record.checked_at}};
    write_file_atomic(publisher_path(), doc.dump(), staging_dir(), Durability::rename_only);
}

}  // namespace kernhub::cache
