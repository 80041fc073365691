// The hub protocol (docs/ARCHITECTURE.md, "Hub protocol") for kernel and model
// repos: revision -> commit, recursive tree listings, file downloads, and
// X-Error-Code mapped onto kernhub error codes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/repo.hpp"
#include "hub/transport.hpp"

namespace kernhub::hub {

struct RepoRef {
    RepoType type = RepoType::kernel;
    std::string repo_id;
};

struct TreeEntry {
    std::string path;  // repo-relative, e.g. "build/native-cpu-x86_64-linux/libx.so"
    bool is_file = false;
    std::uint64_t size = 0;
    std::string oid;         // git blob sha1 for files
    std::string lfs_sha256;  // empty for plain files

    bool is_lfs() const { return !lfs_sha256.empty(); }
    // The cache key: the LFS sha256, or the git blob sha1.
    const std::string& etag() const { return is_lfs() ? lfs_sha256 : oid; }
};

// Parses one tree listing page (a JSON array). Throws Error(network) naming
// `source` for malformed JSON or entries.
std::vector<TreeEntry> parse_tree_page(const std::string& json, const std::string& source);
std::string tree_to_json(const std::vector<TreeEntry>& entries);

// Percent-encodes everything but unreserved characters; keep_slash leaves
// '/' alone (for file paths).
std::string url_quote(const std::string& text, bool keep_slash);

// Stateless after construction apart from its transport: safe to share
// between threads.
class HubClient {
public:
    HubClient(std::string endpoint, std::unique_ptr<Transport> transport, bool has_token);

    // The commit a branch, tag or commit id names. Error(not_found) for an
    // unknown repo or revision; for a missing "vN" the message lists the
    // versions the repo has.
    std::string resolve_revision(const RepoRef& repo, const std::string& revision);
    // Every entry under `path` at `commit`, following pagination.
    std::vector<TreeEntry> list_tree(const RepoRef& repo, const std::string& commit, const std::string& path);
    // Streams a file at `commit` into target (redirects and retries inside).
    void download(const RepoRef& repo, const std::string& commit, const std::string& path, http::BodyTarget& target);

    // Every thread's requests; per-call counts use http::requests_on_this_thread.
    std::uint64_t requests() const { return m_transport->requests(); }
    const std::string& endpoint() const { return m_endpoint; }

private:
    std::string api_url(const RepoRef& repo, const std::string& rest) const;
    std::string resolve_url(const RepoRef& repo, const std::string& commit, const std::string& path) const;
    std::string versions_hint(const RepoRef& repo);
    [[noreturn]] void fail(const http::Response& response, const RepoRef& repo, const std::string& what);

    std::string m_endpoint;
    std::unique_ptr<Transport> m_transport;
    bool m_has_token;
};

}  // namespace kernhub::hub
