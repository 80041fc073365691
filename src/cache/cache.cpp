// Cache root resolution, repo folder names and the RepoCache layout. Every
// string that becomes part of a path is validated here first: etags, commits
// and file paths come from the network, revisions and variants from users.
#include "cache/cache.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "cache/io_error.hpp"
#include "cache/posix_io.hpp"
#include "common/crash_point.hpp"
#include "common/hint.hpp"
#include "common/text.hpp"
#include "kernhub/error.hpp"

namespace kernhub::cache {

namespace {

bool is_lower_hex(const std::string& text) {
    for (char c : text) {
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
    }
    return true;
}

// Splits on '/' and rejects empty, "." and ".." parts and NUL bytes.
bool has_only_plain_parts(const std::string& path) {
    if (path.empty() || path.find('\0') != std::string::npos) return false;
    std::size_t start = 0;
    for (;;) {
        std::size_t end = path.find('/', start);
        std::string part = path.substr(start, end == std::string::npos ? end : end - start);
        if (part.empty() || part == "." || part == "..") return false;
        if (end == std::string::npos) return true;
        start = end + 1;
    }
}

void check_variant(const std::string& variant) {
    if (!is_variant_name(variant)) {
        throw Error(ErrorCode::usage,
                    "invalid variant name " + quoted_name(variant) + ": use letters, digits, '.', '_', '-' or '+'");
    }
}

std::optional<std::string> env_value(const EnvLookup& env, const char* name) {
    std::optional<std::string> value = env(name);
    if (value && value->empty()) return std::nullopt;
    return value;
}

// huggingface_hub runs expanduser() on its variables; do the same for "~/"
// so HF_HOME="~/hf" names the same folder in both tools.
fs::path expand_home(const std::string& value, const EnvLookup& env) {
    if (value == "~" || value.rfind("~/", 0) == 0) {
        if (auto home = env_value(env, "HOME")) return fs::path(*home) / value.substr(value.size() > 1 ? 2 : 1);
    }
    return fs::path(value);
}

}  // namespace

void check_revision(const std::string& revision) {
    if (!has_only_plain_parts(revision)) {
        throw Error(ErrorCode::usage, "invalid revision " + quoted_name(revision) +
                                          ": it must be a branch, tag or commit without "
                                          "empty, '.' or '..' parts");
    }
}

bool is_etag(const std::string& name) {
    return (name.size() == 40 || name.size() == 64) && is_lower_hex(name);
}

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

bool is_variant_name(const std::string& name) {
    if (name.empty() || name.front() == '.') return false;
    return std::all_of(name.begin(), name.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
               c == '-' || c == '+';
    });
}

void check_etag(const std::string& etag) {
    if (!is_etag(etag)) {
        throw Error(ErrorCode::verification, "hub sent an invalid etag " + quoted_name(etag) +
                                                 "; expected 40 or 64 lowercase hex characters, check the endpoint");
    }
}

void check_commit(const std::string& commit) {
    if (!is_commit_sha(commit)) {
        throw Error(ErrorCode::verification, "hub sent an invalid commit " + quoted_name(commit) +
                                                 "; expected 40 or 64 lowercase hex characters, check the endpoint");
    }
}

std::string path_name_problem(const std::string& relpath) {
    if (!is_utf8(relpath)) return "is not UTF-8";
    for (unsigned char c : relpath) {
        if (c < 0x20 || c == 0x7f) return "holds a control character";
    }
    std::size_t parts = 1;
    std::size_t part_bytes = 0;
    for (char c : relpath) {
        if (c == '/') {
            ++parts;
            part_bytes = 0;
        } else if (++part_bytes > 255) {
            return "has a part longer than 255 bytes";
        }
    }
    if (parts > k_max_path_parts) {
        return "has more than " + std::to_string(k_max_path_parts) + " parts (k_max_path_parts)";
    }
    return {};
}

void check_relative_path(const std::string& relpath) {
    if (!has_only_plain_parts(relpath)) {
        throw Error(ErrorCode::verification,
                    "hub sent an unsafe file path " + quoted_name(relpath) +
                        "; refusing to write outside the snapshot, report the repo to its owner");
    }
}

EnvLookup process_env() {
    return [](const std::string& name) -> std::optional<std::string> {
        const char* value = std::getenv(name.c_str());
        if (value == nullptr) return std::nullopt;
        return std::string(value);
    };
}

fs::path resolve_cache_root(const std::string& explicit_dir, const EnvLookup& env) {
    if (!explicit_dir.empty()) return expand_home(explicit_dir, env);
    for (const char* name : {"KERNHUB_CACHE", "KERNELS_CACHE", "HF_HUB_CACHE"}) {
        if (auto value = env_value(env, name)) return expand_home(*value, env);
    }
    if (auto hf_home = env_value(env, "HF_HOME")) return expand_home(*hf_home, env) / "hub";
    if (auto xdg = env_value(env, "XDG_CACHE_HOME")) {
        return expand_home(*xdg, env) / "huggingface" / "hub";
    }
    if (auto home = env_value(env, "HOME")) return fs::path(*home) / ".cache" / "huggingface" / "hub";
    throw Error(ErrorCode::usage,
                "cannot choose a cache directory: HOME is not set; set KERNHUB_CACHE or name the cache "
                "directory",
                hint::setting("cache_dir"));
}

std::string repo_folder_name(RepoType type, const std::string& repo_id) {
    // Validation keeps "org/name" from smuggling path syntax into the folder.
    validate_repo_id(repo_id);
    std::string name = type == RepoType::kernel ? "kernels--" : "models--";
    for (char c : repo_id) {
        if (c == '/') {
            name += "--";
        } else {
            name += c;
        }
    }
    return name;
}

std::optional<RepoFolder> parse_repo_folder(const std::string& name) {
    for (RepoType type : {RepoType::kernel, RepoType::model}) {
        const std::string prefix = type == RepoType::kernel ? "kernels--" : "models--";
        if (name.rfind(prefix, 0) != 0) continue;
        const std::string rest = name.substr(prefix.size());
        const std::size_t separator = rest.find("--");
        if (separator == std::string::npos) return std::nullopt;
        RepoFolder repo{type, rest.substr(0, separator) + "/" + rest.substr(separator + 2)};
        try {
            if (repo_folder_name(repo.type, repo.repo_id) == name) return repo;
        } catch (const Error&) {
            // not a valid repo id: not a repo folder
        }
        return std::nullopt;
    }
    return std::nullopt;
}

// ---- RepoCache -------------------------------------------------------------

RepoCache::RepoCache(fs::path root, RepoType type, const std::string& repo_id)
    : m_root(std::move(root)), m_folder_name(repo_folder_name(type, repo_id)) {
    m_folder = m_root / m_folder_name;
}

// Paths are joined as text: every `/` on a fs::path splits it into
// components again, which the warm load path would pay many times.
fs::path RepoCache::blob_path(const std::string& etag) const {
    check_etag(etag);
    return fs::path(m_folder.native() + "/blobs/" + etag);
}

fs::path RepoCache::snapshot_dir(const std::string& commit) const {
    check_commit(commit);
    return fs::path(m_folder.native() + "/snapshots/" + commit);
}

fs::path RepoCache::snapshot_path(const std::string& commit, const std::string& relpath) const {
    check_relative_path(relpath);
    check_commit(commit);
    return fs::path(m_folder.native() + "/snapshots/" + commit + "/" + relpath);
}

fs::path RepoCache::partial_dir(const std::string& commit) const {
    check_commit(commit);
    return fs::path(m_folder.native() + "/.kernhub/partial/" + commit);
}

fs::path RepoCache::link_dir(LinkArea area, const std::string& commit) const {
    return area == LinkArea::snapshot ? snapshot_dir(commit) : partial_dir(commit);
}

fs::path RepoCache::link_path(LinkArea area, const std::string& commit, const std::string& relpath) const {
    if (area == LinkArea::snapshot) return snapshot_path(commit, relpath);
    check_relative_path(relpath);
    check_commit(commit);
    return fs::path(m_folder.native() + "/.kernhub/partial/" + commit + "/" + relpath);
}

std::optional<std::string> RepoCache::read_ref(const std::string& revision) const {
    check_revision(revision);
    std::optional<std::string> content;
    try {
        content = read_cache_file(m_folder / "refs" / revision, k_max_ref_bytes, "a ref");
    } catch (const Error& e) {
        if (e.code() != ErrorCode::verification) throw;
        return std::nullopt;  // not a ref: resolved again and replaced
    }
    if (!content) return std::nullopt;
    std::size_t end = content->find_last_not_of(" \t\r\n");
    content->resize(end == std::string::npos ? 0 : end + 1);
    // A ref that does not hold a commit is treated as absent, so the caller
    // resolves the revision again and overwrites it.
    if (!is_commit_sha(*content)) return std::nullopt;
    return content;
}

void RepoCache::write_ref(const std::string& revision, const std::string& commit, Durability durability) const {
    check_revision(revision);
    check_commit(commit);
    // No trailing newline: byte-identical to what huggingface_hub writes.
    write_file_atomic(m_folder / "refs" / revision, commit, staging_dir(), durability);
}

bool RepoCache::has_blob(const std::string& etag) const {
    std::error_code ec;
    return fs::is_regular_file(fs::symlink_status(blob_path(etag), ec));
}

FileLock RepoCache::lock_blob(const std::string& etag, const std::atomic<bool>* cancel) const {
    check_etag(etag);
    return FileLock(m_root / ".locks" / m_folder_name / (etag + ".lock"), cancel);
}

std::optional<FileLock> RepoCache::try_lock_blob(const std::string& etag, bool create) const {
    check_etag(etag);
    return FileLock::try_acquire(m_root / ".locks" / m_folder_name / (etag + ".lock"), create);
}

FileLock RepoCache::lock_snapshots(const std::atomic<bool>* cancel) const {
    return FileLock(m_root / ".locks" / m_folder_name / "kernhub-snapshots.lock", cancel);
}

std::optional<FileLock> RepoCache::hold_partial(const std::atomic<bool>* cancel) const {
    try {
        return FileLock::shared(m_root / ".locks" / m_folder_name / "kernhub-partial.lock", cancel);
    } catch (const Error& error) {
        if (error.code() == ErrorCode::interrupted) throw;
        // As claim_snapshot: whoever would remove the partial area cannot
        // take the lock there either, and removes nothing.
        return std::nullopt;
    }
}

std::optional<FileLock> RepoCache::try_lock_partial(bool create) const {
    return FileLock::try_acquire(m_root / ".locks" / m_folder_name / "kernhub-partial.lock", create);
}

bool RepoCache::claim_snapshot(const std::string& commit, const std::atomic<bool>* cancel) const {
    check_commit(commit);
    const auto lock = [&]() -> std::optional<FileLock> {
        try {
            return FileLock::shared(m_root / ".locks" / m_folder_name / "kernhub-snapshots.lock", cancel);
        } catch (const Error& error) {
            if (error.code() == ErrorCode::interrupted) throw;
            // A .locks this process cannot use (a file, a link, no
            // permission): a prune of this user cannot take the lock there
            // either, and stops before it removes any snapshot. Reading the
            // cache goes on.
            return std::nullopt;
        }
    }();
    const fs::path dir = m_folder / "snapshots" / commit;
    struct stat st {};
    if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return false;
    // UTIME_NOW for both times; a folder this user may not change is left
    // as it is (see the header).
    const struct timespec now[2] = {{0, UTIME_NOW}, {0, UTIME_NOW}};
    if (::utimensat(AT_FDCWD, dir.c_str(), now, AT_SYMLINK_NOFOLLOW) == 0) return true;
    const int err = errno;
    if (err == ENOENT) return false;
    if (err != EACCES && err != EPERM && err != EROFS) {
        throw Error(ErrorCode::internal, "cannot mark " + dir.string() + " as in use: " + detail::errno_text(err) +
                                             "; check permissions on the cache");
    }
    return true;
}

std::string snapshot_link_target(const std::string& relpath, const std::string& etag) {
    std::size_t ups = 2;
    for (char c : relpath) ups += c == '/' ? 1 : 0;
    std::string target;
    for (std::size_t i = 0; i < ups; ++i) target += "../";
    return target + "blobs/" + etag;
}

std::string link_target(LinkArea area, const std::string& relpath, const std::string& etag) {
    std::string target = snapshot_link_target(relpath, etag);
    return area == LinkArea::snapshot ? target : "../" + target;
}

namespace {

// Makes `dir` and `staging`, then the link `link` -> `target` under a temp
// name in `staging`, renamed into place. 0, or the errno with `refused`
// naming where it failed.
int place_link(const fs::path& dir, const fs::path& staging, const std::string& target, const fs::path& link,
               fs::path& refused) {
    refused = dir;
    int err = detail::make_directories(dir);
    if (err == 0) {
        refused = staging;
        err = detail::make_directories(refused);
    }
    // symlink() cannot replace an entry, so build the link under a temp name
    // and rename it over: readers see the old link or the new one. The temp
    // lives outside snapshots/ so a crash leaves no stray entry there; the
    // link text is relative to its final place, not to where it is made.
    const fs::path temp = staging / (".link." + detail::random_hex(16) + ".tmp");  // fits any name
    crash_point("folder-made");
    if (err == 0 && ::symlink(target.c_str(), temp.c_str()) != 0) {
        err = errno;
        refused = temp;
    }
    if (err == 0 && ::rename(temp.c_str(), link.c_str()) != 0) {
        err = errno;
        refused = link;
        ::unlink(temp.c_str());
    }
    return err;
}

// The folders from snapshots/ down to the one holding relpath's link. Each
// must be a real folder: through a linked one, the link's relative target
// (and any link made there) would land outside the repo folder.
std::vector<fs::path> snapshot_folders(const fs::path& repo_folder, const std::string& commit,
                                       const std::string& relpath, LinkArea area = LinkArea::snapshot) {
    std::vector<fs::path> out;
    if (area == LinkArea::snapshot) {
        out = {repo_folder / "snapshots", repo_folder / "snapshots" / commit};
    } else {
        out = {repo_folder / ".kernhub", repo_folder / ".kernhub" / "partial",
               repo_folder / ".kernhub" / "partial" / commit};
    }
    const fs::path base = out.back();
    for (std::size_t slash = relpath.find('/'); slash != std::string::npos; slash = relpath.find('/', slash + 1)) {
        out.push_back(base / relpath.substr(0, slash));
    }
    return out;
}

}  // namespace

bool RepoCache::snapshot_folders_real(const std::string& commit, const std::string& relpath, LinkArea area) const {
    check_relative_path(relpath);
    check_commit(commit);
    // blobs/ too: through a linked one every link target leads out.
    std::vector<fs::path> folders = snapshot_folders(m_folder, commit, relpath, area);
    folders.push_back(m_folder / "blobs");
    for (const fs::path& dir : folders) {
        struct stat st {};
        if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return false;
    }
    return true;
}

void RepoCache::unlink_linked_folders() const {
    for (const fs::path& dir :
         {m_folder / "blobs", m_folder / "refs", m_folder / ".kernhub", m_folder / ".kernhub" / "tmp",
          m_folder / ".kernhub" / "trees", m_folder / ".kernhub" / "variants", m_folder / ".kernhub" / "refs",
          m_folder / ".kernhub" / "partial"}) {
        struct stat st {};
        if (::lstat(dir.c_str(), &st) != 0 || S_ISDIR(st.st_mode)) continue;
        if (::unlink(dir.c_str()) != 0 && errno != ENOENT) {
            const int err = errno;
            detail::throw_io_error("replace the linked folder", dir, err, "remove it by hand and fetch again");
        }
    }
}

std::optional<std::string> RepoCache::linked_blob(const std::string& commit, const std::string& relpath,
                                                  LinkArea area) const {
    const std::string prefix = link_target(area, relpath, "");
    std::string target(prefix.size() + 65, '\0');
    const ssize_t n = ::readlink(link_path(area, commit, relpath).c_str(), target.data(), target.size());
    if (n < 0 || static_cast<std::size_t>(n) >= target.size() || target.compare(0, prefix.size(), prefix) != 0) {
        return std::nullopt;
    }
    std::string etag = target.substr(prefix.size(), static_cast<std::size_t>(n) - prefix.size());
    if (!is_etag(etag) || !snapshot_folders_real(commit, relpath, area)) return std::nullopt;
    return etag;
}

void RepoCache::link_snapshot(const std::string& commit, const std::string& relpath, const std::string& etag,
                              bool sync_directory, LinkArea area) const {
    fs::path link = link_path(area, commit, relpath);
    // A linked folder on the way is put back as a real one (the link is
    // removed, never what it points to): the snapshot is then rebuilt from
    // verified blobs inside the repo folder.
    for (const fs::path& dir : snapshot_folders(m_folder, commit, relpath, area)) {
        struct stat st {};
        if (::lstat(dir.c_str(), &st) == 0 && S_ISLNK(st.st_mode) && ::unlink(dir.c_str()) != 0) {
            const int err = errno;
            detail::throw_io_error("replace the linked folder", dir, err, "remove it by hand and fetch again");
        }
    }
    if (!has_blob(etag)) {
        throw Error(ErrorCode::internal, "cannot link " + link.string() + ": blob " + blob_path(etag).string() +
                                             " is missing; it must be fetched first");
    }
    const std::string target = link_target(area, relpath, etag);
    std::error_code read_ec;
    if (fs::read_symlink(link, read_ec) == fs::path(target) && !read_ec) return;
    fs::path dir = link.parent_path();
    // `refused`: where a failure happened, for the message.
    fs::path refused;
    int err = 0;
    // A folder of the partial area removed between its making and the
    // rename (by a removal running where locks do not exclude: the
    // partial-area lock keeps the others out) is made again.
    for (int attempt = 0; attempt < 3; ++attempt) {
        err = place_link(dir, staging_dir(), target, link, refused);
        if (err != ENOENT || area != LinkArea::partial || refused != link) break;
    }
    if (err == 0 && sync_directory) {
        err = detail::fsync_directory(dir);
        refused = dir;
    }
    if (err != 0) detail::throw_io_error("link", link, err, "check permissions and free space", refused);
}

std::vector<RepoCache::SnapshotFile> RepoCache::list_snapshot(const std::string& commit,
                                                              const std::string& subdir) const {
    std::vector<SnapshotFile> out;
    fs::path base = snapshot_dir(commit);
    std::error_code ec;
    fs::recursive_directory_iterator it(base / subdir, ec), end;
    for (; !ec && it != end; it.increment(ec)) {
        std::error_code type_ec;
        if (!it->is_regular_file(type_ec)) continue;  // follows links: dangling ones drop out
        SnapshotFile file;
        file.relpath = it->path().lexically_relative(base).generic_string();
        std::error_code entry_ec;  // a problem with one entry must not end the walk
        file.size = it->file_size(entry_ec);
        if (it->is_symlink(entry_ec)) {
            fs::path target = fs::read_symlink(it->path(), entry_ec);
            if (target.parent_path().filename() == "blobs") file.etag = target.filename().string();
        }
        out.push_back(std::move(file));
    }
    std::sort(out.begin(), out.end(),
              [](const SnapshotFile& a, const SnapshotFile& b) { return a.relpath < b.relpath; });
    return out;
}

bool RepoCache::snapshot_complete(const std::string& commit, const std::string& relpath) const {
    std::error_code ec;
    // status() follows the link: a dangling link reports "not found".
    return fs::is_regular_file(fs::status(snapshot_path(commit, relpath), ec));
}

bool RepoCache::snapshot_links_blob(const std::string& commit, const std::string& relpath, const std::string& etag,
                                    std::uint64_t size, LinkArea area) const {
    // readlink() alone: fs::read_symlink would lstat first to size its buffer.
    const std::string expected = link_target(area, relpath, etag);
    std::string target(expected.size() + 1, '\0');
    const ssize_t n = ::readlink(link_path(area, commit, relpath).c_str(), target.data(), target.size());
    if (n < 0 || static_cast<std::size_t>(n) != expected.size() || target.compare(0, expected.size(), expected) != 0) {
        return false;
    }
    struct stat st {};
    return ::lstat(blob_path(etag).c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
           static_cast<std::uint64_t>(st.st_size) == size && snapshot_folders_real(commit, relpath, area);
}

std::optional<std::string> RepoCache::read_tree(const std::string& commit, std::size_t max_bytes) const {
    check_commit(commit);
    return read_cache_file(m_folder / ".kernhub" / "trees" / (commit + ".json"), max_bytes, "a tree listing");
}

void RepoCache::remove_tree(const std::string& commit) const {
    check_commit(commit);
    const fs::path path = m_folder / ".kernhub" / "trees" / (commit + ".json");
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
        const int err = errno;
        detail::throw_io_error("remove", path, err, "remove it by hand and fetch again");
    }
}

std::optional<std::string> RepoCache::read_hf_tree(const std::string& commit, std::size_t max_bytes) const {
    check_commit(commit);
    return read_cache_file(m_folder / "trees" / (commit + ".json"), max_bytes, "a tree listing");
}

bool RepoCache::has_tree(const std::string& commit) const {
    check_commit(commit);
    struct stat st {};
    return ::lstat((m_folder / ".kernhub" / "trees" / (commit + ".json")).c_str(), &st) == 0;
}

void RepoCache::write_tree(const std::string& commit, const std::string& json) const {
    check_commit(commit);
    write_file_atomic(m_folder / ".kernhub" / "trees" / (commit + ".json"), json, {}, Durability::rename_only);
}

namespace {

// .kernhub/variants/<commit>/<variant>.json, or in the partial area
// .kernhub/partial/<commit>/<variant>.json (beside the area's build/).
fs::path record_path(const fs::path& folder, LinkArea area, const std::string& commit, const std::string& variant) {
    return folder / ".kernhub" / (area == LinkArea::snapshot ? "variants" : "partial") / commit / (variant + ".json");
}

}  // namespace

std::optional<std::string> RepoCache::read_variant_record(const std::string& commit, const std::string& variant,
                                                          LinkArea area) const {
    check_commit(commit);
    check_variant(variant);
    return read_cache_file(record_path(m_folder, area, commit, variant), k_max_record_bytes, "a variant record");
}

// Either record is side data (docs/cache-format.md, "Durability"): its
// files' blobs and links are synced before it is written, and a record
// lost or cut short reads as absent, which costs hashing, never trust.
void RepoCache::write_variant_record(const std::string& commit, const std::string& variant, const std::string& json,
                                     LinkArea area) const {
    check_commit(commit);
    check_variant(variant);
    // The partial record's temp is staged in .kernhub/tmp/, whose leftovers prune removes.
    const fs::path temp_dir = area == LinkArea::partial ? staging_dir() : fs::path();
    const fs::path path = record_path(m_folder, area, commit, variant);
    for (int attempt = 0;; ++attempt) {
        try {
            write_file_atomic(path, json, temp_dir, Durability::rename_only);
            return;
        } catch (const Error&) {
            // As link_snapshot: a partial folder removed under the write
            // (where locks do not exclude) is made again.
            struct stat st {};
            if (area != LinkArea::partial || attempt == 2 || ::lstat(path.parent_path().c_str(), &st) == 0) throw;
        }
    }
}

void RepoCache::remove_partial_variant(const std::string& commit, const std::string& variant) const {
    check_commit(commit);
    check_variant(variant);
    const fs::path base = m_folder / ".kernhub" / "partial";
    // The record first: a link without a record only costs a hash later,
    // a record without its links would be a lie until it is checked.
    remove_beneath(base, fs::path(commit) / (variant + ".json"));
    remove_beneath(base, fs::path(commit) / "build" / variant);
    remove_empty_partial_folders(commit);
}

void RepoCache::remove_empty_partial_folders(const std::string& commit) const {
    check_commit(commit);
    const fs::path base = m_folder / ".kernhub" / "partial";
    // rmdir refuses a folder that is not empty (and never follows a link):
    // the first one still holding something ends the climb.
    for (const fs::path& dir : {base / commit / "build", base / commit, base}) {
        if (::rmdir(dir.c_str()) != 0 && errno != ENOENT) break;
    }
}

}  // namespace kernhub::cache
