// The fetch pipeline for one kernel: revision -> commit -> listing ->
// variant choice -> verified download into the cache -> record. Composes the
// hub client, the store, the digests and the variant selection.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "hub/hub_client.hpp"
#include "kernhub/events.hpp"
#include "select/variant.hpp"

namespace kernhub::hub {

struct Expectation;

struct FetchRequest {
    RepoRef repo;
    std::string revision;       // branch, tag, "vN" or a 40-hex commit
    std::string required_file;  // the registry's "file", may be empty
    select::HostFacts host;
    bool offline = false;
};

struct FetchedFile {
    std::string path;  // relative to the variant directory
    std::uint64_t size = 0;
    std::string sha256;
};

struct VariantChoice {
    std::string commit;
    std::vector<select::Candidate> candidates;
    select::Selection selection;
};

struct FetchOutcome {
    std::string commit;
    std::string variant;
    std::filesystem::path variant_dir;  // snapshots/<commit>/build/<variant>
    std::vector<FetchedFile> files;
    std::uint64_t bytes_downloaded = 0;
};

class Fetcher {
public:
    // `client` may be null when offline.
    Fetcher(std::filesystem::path cache_root, HubClient* client, EventSink* events);

    // Commit and variant choice without downloading variant files.
    VariantChoice choose(const FetchRequest& request);
    // choose(), then make sure every file of the chosen variant is in the
    // cache and verified. Error(not_found) listing each rejected variant when
    // nothing fits; Error(offline) when offline and something is missing.
    FetchOutcome fetch(const FetchRequest& request);

private:
    std::string resolve_commit(const FetchRequest& request);
    std::vector<TreeEntry> listing(const FetchRequest& request, const std::string& commit);
    FetchOutcome download_variant(const FetchRequest& request, const std::string& commit, const std::string& variant,
                                  const std::vector<const TreeEntry*>& entries);
    // Makes blobs/<etag> exist and verified (downloading under the blob lock
    // unless another process already did), links it into the snapshot and
    // returns the file's SHA-256 hex.
    std::string ensure_file(const FetchRequest& request, const std::string& commit, const Expectation& expect,
                            std::uint64_t& bytes_downloaded);
    void emit(Event::Kind kind, const std::string& text, const std::string& path = {}, std::uint64_t done = 0,
              std::uint64_t total = 0);

    std::filesystem::path m_root;
    HubClient* m_client;
    EventSink* m_events;
    std::vector<TreeEntry> m_last_listing;
    bool m_listing_from_disk = false;  // rebuilt from snapshot links: only what is cached
};

// "name: reason; name: reason" for error messages.
std::string describe_rejections(const select::Selection& selection);

}  // namespace kernhub::hub
