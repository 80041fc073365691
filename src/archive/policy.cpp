// ExtractionPolicy's pieces that need no libarchive: entry paths, symlink
// targets, limits and the wording of refusals.
#include <archive.h>

#include <algorithm>
#include <vector>

#include "archive/archive.hpp"
#include "archive/detail.hpp"
#include "common/text.hpp"
#include "kernhub/error.hpp"

namespace kernhub::archive {

const char* to_string(EntryType type) {
    switch (type) {
        case EntryType::file:
            return "regular file";
        case EntryType::directory:
            return "directory";
        case EntryType::symlink:
            return "symbolic link";
        case EntryType::hardlink:
            return "hard link";
        case EntryType::character_device:
            return "character device";
        case EntryType::block_device:
            return "block device";
        case EntryType::fifo:
            return "FIFO";
        case EntryType::socket:
            return "socket";
        case EntryType::unknown:
            break;
    }
    return "entry of unknown type";
}

std::uint64_t ExtractionPolicy::output_limit(std::uint64_t archive_bytes) const {
    // Saturate instead of wrapping: a ratio times a huge size is "no limit
    // from the ratio", and max_total_bytes still applies.
    std::uint64_t scaled =
        max_ratio != 0 && archive_bytes > UINT64_MAX / max_ratio ? UINT64_MAX : archive_bytes * max_ratio;
    return std::max(scaled, ratio_floor_bytes);
}

namespace {

std::vector<std::string> split_parts(const std::string& path) {
    std::vector<std::string> parts;
    std::size_t start = 0;
    for (;;) {
        std::size_t end = path.find('/', start);
        parts.push_back(path.substr(start, end == std::string::npos ? std::string::npos : end - start));
        if (end == std::string::npos) return parts;
        start = end + 1;
    }
}

}  // namespace

std::optional<std::string> resolve_link(const std::string& link_path, const std::string& target) {
    if (target.empty() || target.front() == '/') return std::nullopt;
    std::vector<std::string> resolved = split_parts(link_path);
    resolved.pop_back();  // the link's own name: targets start from its folder
    for (const auto& part : split_parts(target)) {
        if (part.empty() || part == ".") continue;
        if (part == "..") {
            if (resolved.empty()) return std::nullopt;
            resolved.pop_back();
        } else {
            resolved.push_back(part);
        }
    }
    std::string out;
    for (const auto& part : resolved) out += (out.empty() ? "" : "/") + part;
    return out;
}

Error refusal(const fs::path& file, const std::string& entry, const std::string& why) {
    std::string subject = entry.empty() ? "" : "entry " + quoted_name(entry) + " ";
    return Error(ErrorCode::verification, "refusing archive " + printable(file.string()) + ": " + subject + why +
                                              "; nothing from it was kept, check where the archive came from");
}

namespace detail {

Handle::Handle(Kind kind) : m_kind(kind) {
    m_archive = kind == Kind::read ? libarchive().archive_read_new() : libarchive().archive_write_new();
    if (m_archive == nullptr) throw Error(ErrorCode::internal, "libarchive could not allocate a handle; out of memory");
}

Handle::~Handle() {
    if (m_kind == Kind::read) {
        libarchive().archive_read_free(m_archive);
    } else {
        libarchive().archive_write_free(m_archive);
    }
}

std::string Handle::error_text() const {
    const char* text = libarchive().archive_error_string(m_archive);
    return printable(text != nullptr ? text : "unknown libarchive error");
}

std::string size_text(std::uint64_t bytes) {
    const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
    int unit = 0;
    std::uint64_t value = bytes;
    while (unit < 4 && value >= 1024 && value % 1024 == 0) {
        value /= 1024;
        ++unit;
    }
    return std::to_string(value) + " " + units[unit];
}

void refuse(const std::filesystem::path& file, const std::string& entry, const std::string& why) {
    throw refusal(file, entry, why);
}

NormalizedPath normalize_path(const std::string& raw, bool directory, const ExtractionPolicy& policy) {
    NormalizedPath out;
    if (raw.empty()) return {raw, "has an empty path", false};
    if (raw.front() == '/') return {raw, "has an absolute path", false};
    std::string path = raw;
    while (path.rfind("./", 0) == 0) path.erase(0, 2);
    if (path.empty() || path == ".") return {path, "", true};
    if (directory && path.back() == '/') path.pop_back();
    out.path = path;
    if (path.size() > policy.max_path_bytes) {
        out.problem = "has a path of " + std::to_string(path.size()) + " bytes, over the max_path_bytes limit of " +
                      std::to_string(policy.max_path_bytes);
        return out;
    }
    for (const auto& part : split_parts(path)) {
        if (part.empty()) {
            out.problem = "has an empty path part";
        } else if (part == ".") {
            out.problem = "has a '.' path part";
        } else if (part == "..") {
            out.problem = "climbs out of the archive with '..'";
        } else if (part.size() > policy.max_name_bytes) {
            out.problem = "has a name of " + std::to_string(part.size()) + " bytes, over the max_name_bytes limit of " +
                          std::to_string(policy.max_name_bytes);
        }
        if (!out.problem.empty()) return out;
    }
    return out;
}

}  // namespace detail

}  // namespace kernhub::archive
