// Writes a static hub tree (docs/ci-images.md, "How a mirror tree is written"). Order matters
// to readers of a tree being added to: file bytes, then the commit's
// listings, then revision/<commit>, and last revision/<name> and refs, so a
// revision never names a commit whose files are not there yet.
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "cache/place_file.hpp"
#include "common/hint.hpp"
#include "common/strict_json.hpp"
#include "common/text.hpp"
#include "digest/digest.hpp"
#include "kernhub/error.hpp"
#include "mirror/mirror.hpp"
#include "mirror/tree_files.hpp"

namespace kernhub::mirror {

using nlohmann::json;
using namespace detail;

namespace {

constexpr const char* k_lock_name = ".kernhub-mirror.lock";
// Temp names live here, not next to their targets, so a directory listing
// served by a web server never shows them.
constexpr const char* k_staging_name = ".kernhub-tmp";

fs::path absolute_root(fs::path root) {
    std::error_code ec;
    fs::path absolute = fs::absolute(root, ec);
    if (ec) return root;  // moved out, as the caller moved it in
    return absolute.lexically_normal();
}

// True when `target` already holds the entry's bytes: the same inode as the
// source (a hard link from an earlier run), or a file whose hub hash matches.
bool already_there(const fs::path& target, const MirrorFile& file) {
    struct stat have {
    }, want{};
    if (::lstat(target.c_str(), &have) != 0 || !S_ISREG(have.st_mode)) return false;
    if (::stat(file.source.c_str(), &want) == 0 && have.st_dev == want.st_dev && have.st_ino == want.st_ino) {
        return true;
    }
    if (static_cast<std::uint64_t>(have.st_size) != file.entry.size) return false;
    if (file.entry.is_lfs()) return digest::sha256_file_hex(target) == file.entry.lfs_sha256;
    return digest::git_blob_sha1_file_hex(target) == file.entry.oid;
}

json revision_document(const hub::RepoRef& repo, const std::string& commit,
                       const std::map<std::string, hub::TreeEntry>& listing) {
    json siblings = json::array();
    for (const auto& [path, entry] : listing) siblings.push_back({{"rfilename", path}});
    return {{"id", repo.repo_id}, {"sha", commit}, {"private", false}, {"siblings", std::move(siblings)}};
}

// The tree's folder must exist before its lock file can be made in it.
fs::path created(fs::path root) {
    std::error_code ec;
    fs::create_directories(root, ec);
    if (ec || !fs::is_directory(root, ec)) {
        throw Error(ErrorCode::internal,
                    "cannot make the hub tree " + root.string() + ": " +
                        (ec ? ec.message() : std::string("it is not a directory")) +
                        "; choose a tree folder you can write",
                    hint::setting("mirror.to"));
    }
    return root;
}

}  // namespace

HubTree::HubTree(fs::path root) : m_root(created(absolute_root(std::move(root)))), m_lock(m_root / k_lock_name) {
    // What a killed run left: the lock is ours, so no live run writes here.
    // remove_all removes a link, never what it points to.
    std::error_code ec;
    fs::remove_all(m_root / k_staging_name, ec);
    if (ec) {
        throw Error(ErrorCode::internal, "cannot remove the temporaries " + (m_root / k_staging_name).string() +
                                             " a killed mirror run left: " + ec.message() +
                                             "; remove that folder by hand");
    }
}

HubTree::~HubTree() {
    // Empty once every atomic write is done; a failed run's leftovers (the
    // folder is not empty) go at the start of the next.
    ::rmdir((m_root / k_staging_name).c_str());
}

PlaceCounts HubTree::add_files(const hub::RepoRef& repo, const std::string& commit,
                               const std::vector<MirrorFile>& files) {
    validate_repo_id(repo.repo_id);
    cache::check_commit(commit);
    PlaceCounts counts;
    const fs::path resolve = m_root / resolve_prefix(repo) / "resolve" / commit;
    std::map<std::string, hub::TreeEntry> listing = read_listing(m_root, repo, commit);
    for (const MirrorFile& file : files) {
        cache::check_relative_path(file.entry.path);
        cache::check_etag(file.entry.etag());
        const fs::path target = resolve / file.entry.path;
        if (already_there(target, file)) {
            ++counts.unchanged;
        } else if (cache::place_file(file.source, target, m_root / k_staging_name) == cache::Placed::linked) {
            ++counts.linked;
        } else {
            ++counts.copied;
        }
        listing[file.entry.path] = file.entry;
    }

    std::vector<hub::TreeEntry> all, build;
    for (const auto& [path, entry] : listing) {
        all.push_back(entry);
        if (path.rfind("build/", 0) == 0) build.push_back(entry);
    }
    const fs::path api = api_dir(m_root, repo);
    const fs::path staging = m_root / k_staging_name;
    cache::write_file_atomic(api / "tree" / commit / "build", listing_json(build), staging);
    cache::write_file_atomic(api / "tree" / (commit + ".json"), listing_json(all), staging);
    const std::string revision = revision_document(repo, commit, listing).dump();
    cache::write_file_atomic(api / "revision" / commit, revision, staging);
    // Other names of this commit list its files too.
    for (const auto& [name, path] : revision_files(api / "revision")) {
        if (name == commit) continue;
        std::optional<std::string> text = read_document(path);
        if (text && revision_commit(path, *text) == commit) cache::write_file_atomic(path, revision, staging);
    }
    return counts;
}

void HubTree::set_organization(const std::string& org, const std::string& overview) {
    validate_repo_id(org + "/overview");
    cache::write_file_atomic(m_root / "api" / "organizations" / org / "overview", overview, m_root / k_staging_name);
}

namespace {

// A revision "a/b" is kept as the file revision/a/b (nginx decodes the
// %2F a client sends), so it needs a folder where revision "a" would be a
// file: one tree cannot hold both, as one git repository cannot hold the
// branches "a" and "a/b" (a hub can, as a tag and a branch).
void check_no_clash(const fs::path& revisions, const hub::RepoRef& repo, const std::string& revision) {
    const auto clash = [&](const std::string& kept, const std::string& why) {
        throw Error(ErrorCode::usage, "cannot mirror revision " + quoted_name(revision) + " of " + repo.repo_id +
                                          ": this tree keeps revision " + quoted_name(kept) + " there, and " + why +
                                          "; mirror the two into separate trees");
    };
    std::error_code ec;
    for (std::size_t slash = revision.find('/'); slash != std::string::npos; slash = revision.find('/', slash + 1)) {
        const std::string prefix = revision.substr(0, slash);
        if (fs::exists(fs::symlink_status(revisions / prefix, ec)) && !fs::is_directory(revisions / prefix, ec)) {
            clash(prefix, "it is the file revision/" + prefix + " where this one needs a folder");
        }
    }
    if (fs::is_directory(fs::symlink_status(revisions / revision, ec))) {
        fs::directory_iterator inside(revisions / revision, ec);
        const std::string kept = !ec && inside != fs::directory_iterator()
                                     ? revision + "/" + inside->path().filename().string()
                                     : revision + "/...";
        clash(kept, "it is a file in the folder revision/" + revision + " where this one needs a file");
    }
}

}  // namespace

void HubTree::set_revision(const hub::RepoRef& repo, const std::string& revision, const std::string& commit) {
    validate_repo_id(repo.repo_id);
    cache::check_commit(commit);
    if (std::string problem = revision_problem(revision); !problem.empty() || is_commit_sha(revision)) {
        throw Error(ErrorCode::usage, "revision '" + revision + "' cannot name a file of the hub tree" +
                                          (problem.empty() ? ": it is a commit id" : ": it " + problem));
    }
    const fs::path api = api_dir(m_root, repo);
    check_no_clash(api / "revision", repo, revision);
    const fs::path staging = m_root / k_staging_name;
    const auto listing = read_listing(m_root, repo, commit);
    cache::write_file_atomic(api / "revision" / revision, revision_document(repo, commit, listing).dump(), staging);

    json refs = {{"branches", json::array()}, {"tags", json::array()}, {"converts", json::array()}};
    const fs::path refs_path = api / "refs";
    if (std::optional<std::string> text = read_document(refs_path)) {
        refs = strict_json::parse_or_discard(*text);
        bool valid =
            refs.is_object() && refs.value("branches", json()).is_array() && refs.value("tags", json()).is_array();
        if (!valid) {
            throw Error(ErrorCode::verification,
                        "the hub tree's " + refs_path.string() + " is not a refs document; fix or remove it");
        }
    }
    // A name the tree already has keeps its kind; a new one becomes a branch
    // (the hub's answer does not say which it was).
    bool found = false;
    for (const char* kind : {"branches", "tags"}) {
        for (auto& ref : refs[kind]) {
            if (ref.is_object() && ref.value("name", "") == revision) {
                ref["targetCommit"] = commit;
                found = true;
            }
        }
    }
    if (!found) {
        refs["branches"].push_back({{"name", revision}, {"ref", "refs/heads/" + revision}, {"targetCommit", commit}});
    }
    cache::write_file_atomic(refs_path, refs.dump(), staging);
}

}  // namespace kernhub::mirror
