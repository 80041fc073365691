// Where an entry of a cache archive belongs in the cache layout, and the one
// kind of link a cache holds (docs/cache-format.md, "Cache archives").
#include <sys/stat.h>

#include "archive/archive.hpp"
#include "cache/cache.hpp"
#include "cache/receipts.hpp"
#include "cacheadmin/archive_layout.hpp"
#include "cacheadmin/cache_archive.hpp"
#include "common/text.hpp"

namespace kernhub::cacheadmin {

bool lstat_is(const fs::path& path, mode_t type, struct stat* out) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0 || (st.st_mode & S_IFMT) != type) return false;
    if (out != nullptr) *out = st;
    return true;
}

namespace {

// "<stem>.json" -> stem; "" for any other name.
std::string json_stem(const std::string& name) {
    const std::string suffix = ".json";
    if (name.size() <= suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
        return {};
    }
    return name.substr(0, name.size() - suffix.size());
}

std::vector<std::string> split_path(const std::string& path) {
    std::vector<std::string> parts;
    std::size_t start = 0;
    for (;;) {
        std::size_t slash = path.find('/', start);
        parts.push_back(path.substr(start, slash == std::string::npos ? std::string::npos : slash - start));
        if (slash == std::string::npos) return parts;
        start = slash + 1;
    }
}

std::string join_from(const std::vector<std::string>& parts, std::size_t first) {
    std::string out;
    for (std::size_t i = first; i < parts.size(); ++i) out += (out.empty() ? "" : "/") + parts[i];
    return out;
}

std::string bytes_text(std::uint64_t bytes) {
    return bytes % 1024 == 0 && bytes >= 1024 ? std::to_string(bytes >> 10) + " KiB" : std::to_string(bytes) + " bytes";
}

std::string size_problem(const archive::Entry& entry, std::uint64_t limit, const char* limit_name) {
    if (entry.size <= limit) return {};
    return "is " + std::to_string(entry.size) + " bytes, over the " + limit_name + " limit of " + bytes_text(limit);
}

// `at` as a `kind`, with `why` as its problem unless `ok`.
Placement expected(Placement at, bool ok, Kind kind, const std::string& why) {
    at.kind = kind;
    if (!ok) at.problem = why;
    return at;
}

// kernhub's side data below a repo folder: .kernhub/trees/<commit>.json and
// .kernhub/variants/<commit>/<variant>.json (parts[1] is ".kernhub").
Placement place_kernhub_data(const archive::Entry& entry, const std::vector<std::string>& parts, Placement at) {
    const std::size_t n = parts.size();
    const bool dir = entry.type == archive::EntryType::directory;
    const bool file = entry.type == archive::EntryType::file;
    const bool trees = parts[2] == "trees";
    if (n == 3) return expected(at, dir, Kind::directory, "must be a directory");
    if (trees && n == 4) {
        at.commit = json_stem(parts[3]);
        std::string why = size_problem(entry, cache::k_max_listing_bytes, "max_listing_bytes");
        return expected(at, file && is_commit_sha(at.commit) && why.empty(), Kind::kernhub_tree,
                        why.empty() ? "must be a regular file named <commit>.json" : why);
    }
    if (!trees && n == 4) {
        at.commit = parts[3];
        return expected(at, dir && is_commit_sha(at.commit), Kind::directory, "must be a directory named by a commit");
    }
    if (!trees && n == 5) {
        at.commit = parts[3];
        at.name = json_stem(parts[4]);
        std::string why = size_problem(entry, cache::k_max_record_bytes, "max_record_bytes");
        return expected(at, file && is_commit_sha(at.commit) && cache::is_variant_name(at.name) && why.empty(),
                        Kind::variant_record, why.empty() ? "must be a regular file named <variant>.json" : why);
    }
    return expected(at, false, Kind::directory,
                    "is not part of the cache layout: a repo folder holds blobs/, snapshots/, refs/, trees/, "
                    ".kernhub/trees/ and .kernhub/variants/");
}

// The layout below one repo folder: parts[0] is the folder.
Placement place_in_repo(const archive::Entry& entry, const std::vector<std::string>& parts) {
    Placement at;
    at.folder = parts[0];
    const std::size_t n = parts.size();
    const bool dir = entry.type == archive::EntryType::directory;
    const bool file = entry.type == archive::EntryType::file;
    const std::string section = n > 1 ? parts[1] : "";
    if (n == 1) return expected(at, dir, Kind::directory, "must be a directory (a repo folder)");
    if (n == 2 && (section == "blobs" || section == "snapshots" || section == "refs" || section == "trees" ||
                   section == ".kernhub")) {
        return expected(at, dir, Kind::directory, "must be a directory");
    }
    if (section == "blobs" && n == 3) {
        at.name = parts[2];
        return expected(at, file && cache::is_etag(at.name), Kind::blob,
                        "must be a regular file named by a 40- or 64-character lowercase hex digest");
    }
    if (section == "snapshots") {
        at.commit = parts[2];
        if (!is_commit_sha(at.commit)) {
            return expected(at, false, Kind::directory, "is not under a commit folder (40 or 64 lowercase hex)");
        }
        if (n == 3 || dir) return expected(at, dir, Kind::directory, "must be a directory (a snapshot)");
        at.name = join_from(parts, 3);
        return expected(at, entry.type == archive::EntryType::symlink, Kind::link,
                        "is a " + std::string(archive::to_string(entry.type)) +
                            " under snapshots/; a snapshot holds only links into blobs/");
    }
    if (section == "refs") {
        at.name = join_from(parts, 2);
        if (dir) return expected(at, true, Kind::directory, "");
        std::string why = revision_problem(at.name);
        if (why.empty()) why = size_problem(entry, cache::k_max_ref_bytes, "max_ref_bytes");
        return expected(at, file && why.empty(), Kind::ref, why.empty() ? "must be a regular file (a ref)" : why);
    }
    if (section == "trees" && n == 3) {
        at.commit = json_stem(parts[2]);
        std::string why = size_problem(entry, cache::k_max_listing_bytes, "max_listing_bytes");
        return expected(at, file && is_commit_sha(at.commit) && why.empty(), Kind::hf_tree,
                        why.empty() ? "must be a regular file named <commit>.json" : why);
    }
    if (section == ".kernhub" && n >= 3 && (parts[2] == "trees" || parts[2] == "variants")) {
        return place_kernhub_data(entry, parts, at);
    }
    return expected(at, false, Kind::directory,
                    "is not part of the cache layout: a repo folder holds blobs/, snapshots/, refs/, trees/, "
                    ".kernhub/trees/ and .kernhub/variants/");
}

}  // namespace

Placement place(const archive::Entry& entry) {
    const std::vector<std::string> parts = split_path(entry.path);
    if (parts.size() == 1 && parts[0] == "CACHEDIR.TAG") {
        Placement at;
        at.kind = Kind::cachedir_tag;
        if (entry.type != archive::EntryType::file) at.problem = "must be a regular file";
        if (at.problem.empty()) at.problem = size_problem(entry, k_import_max_cachedir_tag_bytes, "max_tag_bytes");
        return at;
    }
    if (parts[0] == cache::k_receipts_folder) {
        // A receipt makes the Python kernels library skip its hash of the
        // variant it names: it speaks for the files of the machine that
        // wrote it, never for those an archive brings.
        Placement at;
        at.problem =
            "is part of the Python kernels library's verification receipts (.verified-kernels/); a receipt lets "
            "kernels skip hashing a variant, so it is never taken from an archive (an exported cache holds none: "
            "leave .verified-kernels/ out of the archive)";
        return at;
    }
    if (!cache::parse_repo_folder(parts[0])) {
        Placement at;
        at.problem =
            "is outside any repo folder; the top of a cache archive holds only kernels--ORG--NAME and "
            "models--ORG--NAME folders (and CACHEDIR.TAG)";
        return at;
    }
    return place_in_repo(entry, parts);
}

// The one kind of link a cache holds: from snapshots/<commit>/<path> into
// blobs/ of the same repo folder.
std::string snapshot_link_problem(const archive::Entry& entry) {
    const std::vector<std::string> parts = split_path(entry.path);
    if (parts.size() < 4 || !cache::parse_repo_folder(parts[0]) || parts[1] != "snapshots" ||
        !is_commit_sha(parts[2])) {
        return "is a symbolic link; links are allowed only under snapshots/<commit>/ of a repo folder";
    }
    const std::string blobs = parts[0] + "/blobs/";
    std::optional<std::string> resolved = archive::resolve_link(entry.path, entry.link_target);
    if (resolved && resolved->rfind(blobs, 0) == 0 && cache::is_etag(resolved->substr(blobs.size()))) return {};
    return "is a link to '" + printable(entry.link_target) +
           "', which does not lead into blobs/ of its own repo folder";
}

}  // namespace kernhub::cacheadmin
