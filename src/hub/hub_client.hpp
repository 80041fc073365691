// The hub protocol (docs/ci-images.md, "Hub protocol") for kernel and model
// repos: revision -> commit, recursive tree listings, file downloads, and
// X-Error-Code mapped onto kernhub error codes.
#pragma once

#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
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

// Which entries of a page parse_tree_page_into keeps.
struct PageFilter {
    bool files_only = false;  // drop directories
    std::string keep_prefix;  // keep only paths starting with this ("" keeps all)
    // Entries the page may have, kept or not; parsing stops after one more.
    std::size_t max_entries = std::numeric_limits<std::size_t>::max();
};

// Parses one tree listing page (a JSON array) without building a document,
// appending the entries `filter` keeps to `out`. Returns how many entries
// the page has, or filter.max_entries + 1 when it has more (parsing stopped
// there). Throws Error(network) naming `source` for malformed JSON or
// entries.
std::size_t parse_tree_page_into(const std::string& json, const std::string& source, const PageFilter& filter,
                                 std::vector<TreeEntry>& out);
// Every entry of one page.
std::vector<TreeEntry> parse_tree_page(const std::string& json, const std::string& source);
std::string tree_to_json(const std::vector<TreeEntry>& entries);

// Bounds on what the hub's answers may cost (docs/ci-images.md, "Hub
// protocol"); each is an Options field and a KERNHUB_* variable.
inline constexpr std::size_t k_default_max_listing_entries = 100000;
inline constexpr std::size_t k_default_max_listing_bytes = 64u << 20;
// Pages one listing may have. A hub's pages hold about 1000 entries, so the
// entry and byte caps bind long before; this stops a hub that links empty
// pages on and on (each page is a request, all under one API deadline).
inline constexpr int k_max_listing_pages = 10000;
struct HubLimits {
    // Entries and body bytes of one listing, over all its pages.
    std::size_t max_listing_entries = k_default_max_listing_entries;
    std::size_t max_listing_bytes = k_default_max_listing_bytes;
    // One listing, all its pages, is one API call: it shares one deadline.
    std::chrono::milliseconds api_timeout{60000};
};

// An organisation overview is a small object; a larger answer is not one.
inline constexpr std::size_t k_max_overview_bytes = 1u << 20;

// Whether an organisation overview (HubClient::organization_overview)
// marks it a trusted kernel publisher: "trustedKernelPublisher": true. A
// missing field is false, as for the kernels library.
// Error(verification) naming `source` when the document is not an object
// or the field is not a boolean.
bool is_trusted_publisher(const std::string& overview, const std::string& source);

// Percent-encodes everything but unreserved characters; keep_slash leaves
// '/' alone (for file paths).
std::string url_quote(const std::string& text, bool keep_slash);

// A branch of a repo and the commit it points at.
struct VersionBranch {
    std::string name;
    std::string commit;
};

// Stateless after construction apart from its transport: safe to share
// between threads.
class HubClient {
public:
    HubClient(std::string endpoint, std::unique_ptr<Transport> transport, bool has_token, HubLimits limits = {});

    // The commit a branch, tag or commit id names. Error(not_found) for an
    // unknown repo or revision; for a missing "vN" the message lists the
    // versions the repo has.
    std::string resolve_revision(const RepoRef& repo, const std::string& revision);
    // The repo's "vN" branch of the highest N, with its commit, from one
    // refs request; nullopt when the repo has none. Error(network) for a
    // branch commit that is not a full commit id.
    std::optional<VersionBranch> latest_version(const RepoRef& repo);
    const HubLimits& limits() const { return m_limits; }
    // The files under `path` at `commit` (directories and anything outside
    // `path` a hub sends are dropped while parsing), following pagination.
    // Error(network) naming KERNHUB_MAX_LISTING_ENTRIES,
    // KERNHUB_MAX_LISTING_BYTES or KERNHUB_API_TIMEOUT when the listing
    // exceeds that limit.
    std::vector<TreeEntry> list_tree(const RepoRef& repo, const std::string& commit, const std::string& path);
    // The hub's overview of an organisation (GET
    // /api/organizations/ORG/overview, what the kernels library asks before
    // it trusts a publisher): the body as the hub sent it (not parsed), at
    // most k_max_overview_bytes. nullopt when the hub answers 404, 401 or
    // 403 (no such organisation, a static tree without its overview, one it
    // will not show). Error(network) when the hub cannot be reached, or
    // answers another status (429 and 5xx after retries).
    std::optional<std::string> organization_overview(const std::string& org);
    // Streams a file at `commit` into target (redirects and retries inside).
    void download(const RepoRef& repo, const std::string& commit, const std::string& path, http::BodyTarget& target);

    // Every thread's requests; per-call counts use http::requests_on_this_thread.
    std::uint64_t requests() const { return m_transport->requests(); }
    const std::string& endpoint() const { return m_endpoint; }
    http::Clock& clock() const { return m_transport->clock(); }

private:
    std::string api_url(const RepoRef& repo, const std::string& rest) const;
    std::string resolve_url(const RepoRef& repo, const std::string& commit, const std::string& path) const;
    std::string versions_hint(const RepoRef& repo);
    [[noreturn]] void fail(const http::Response& response, const RepoRef& repo, const std::string& what);

    std::string m_endpoint;
    std::unique_ptr<Transport> m_transport;
    bool m_has_token;
    HubLimits m_limits;
};

}  // namespace kernhub::hub
