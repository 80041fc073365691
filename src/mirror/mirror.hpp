// Static hub trees for mirrors (docs/ci-images.md, "How a mirror tree is
// written"): the layout of docs/ci-images.md's "Hubs" section, written from
// verified cache blobs so that a stock static web server or a file://
// endpoint serves it to kernhub, plus the
// nginx server block that also lets huggingface_hub read it (per-file ETag,
// X-Linked-Etag, X-Linked-Size, X-Repo-Commit, revision names mapped onto
// commits). Adding to a tree never removes anything from it.
//
//   api/{kernels|models}/<org>/<name>/revision/<rev>     {"id", "sha", "private", "siblings"}
//   api/{kernels|models}/<org>/<name>/refs               {"branches", "tags", "converts"}
//   api/{kernels|models}/<org>/<name>/tree/<commit>/build  listing of build/ (kernhub's request)
//   api/{kernels|models}/<org>/<name>/tree/<commit>.json   listing of the whole mirrored repo
//                                                          (huggingface_hub asks for tree/<commit>)
//   [kernels/]<org>/<name>/resolve/<commit>/<path>       the bytes
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include "cache/cache.hpp"
#include "hub/hub_client.hpp"

namespace kernhub::mirror {

namespace fs = std::filesystem;

// Bounds on what is read back from an existing tree (an earlier run, another
// tool or a person wrote it): one listing, revision or refs document; the
// files one nginx configuration names; the revisions of one repo.
inline constexpr std::size_t k_max_tree_document_bytes = 64u << 20;
inline constexpr std::size_t k_max_conf_files = 1000000;
inline constexpr std::size_t k_max_repo_revisions = 10000;

// One repo file to mirror: its listing entry and where its verified bytes are.
struct MirrorFile {
    hub::TreeEntry entry;  // a file: path, size, git oid, LFS sha256
    fs::path source;       // a cache blob
};

struct PlaceCounts {
    std::size_t linked = 0;     // hard links to the cache blob
    std::size_t copied = 0;     // copies (another filesystem)
    std::size_t unchanged = 0;  // already in the tree with the right content
};

// A static hub tree being added to. Holds <root>/.kernhub-mirror.lock for
// its lifetime, so two mirror runs into one tree merge their listings one
// after the other instead of losing one of them. Temporaries are staged in
// <root>/.kernhub-tmp: made by this run, emptied of what a killed run left
// before anything else (under the lock, so no live run writes there) and
// removed when the run ends, so a tree served or uploaded as is never
// holds a temporary between runs.
class HubTree {
public:
    explicit HubTree(fs::path root);
    ~HubTree();
    HubTree(const HubTree&) = delete;
    HubTree& operator=(const HubTree&) = delete;

    const fs::path& root() const noexcept { return m_root; }

    // Places the files under resolve/<commit>/ and merges them into the
    // commit's listings and revision/<commit>. Bytes first, listings after:
    // nothing is listed before it can be served.
    PlaceCounts add_files(const hub::RepoRef& repo, const std::string& commit, const std::vector<MirrorFile>& files);
    // Points revision/<revision> (a branch, tag or vN; not a commit id) at
    // `commit` and records it in refs. Call after add_files for that commit.
    void set_revision(const hub::RepoRef& repo, const std::string& revision, const std::string& commit);
    // Writes api/organizations/<org>/overview: the organisation overview
    // exactly as the hub answered it (docs/trust.md, "Trusted publishers"), so
    // that clients checking publisher trust against the mirror get the
    // hub's answer. Error(usage) for an unsafe organisation name.
    void set_organization(const std::string& org, const std::string& overview);

private:
    fs::path m_root;
    cache::FileLock m_lock;
};

// Throws Error(usage) unless `listen` is PORT, HOST:PORT or [IPv6]:PORT.
void check_listen(const std::string& listen);

// The nginx configuration for the tree at `root` (absolute): one server
// block listening on `listen`, to be included inside http { }. Generated
// from the tree's listings and revision documents; Error(usage) when `root`
// holds no repo, Error(verification) naming a document that does not parse.
std::string nginx_conf(const fs::path& root, const std::string& listen);

}  // namespace kernhub::mirror
