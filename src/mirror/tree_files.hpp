// Where things live in a static hub tree and how its documents are read and
// written; shared by the tree writer and the nginx configuration.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hub/hub_client.hpp"

namespace kernhub::mirror::detail {

namespace fs = std::filesystem;

// "kernels" or "models": the API prefix of the repo type.
const char* api_kind(RepoType type);
// api/{kernels|models}/<org>/<name>
fs::path api_dir(const fs::path& root, const hub::RepoRef& repo);
// The URL path (no leading '/') under which a repo's files resolve:
// "kernels/<org>/<name>" or "<org>/<name>".
std::string resolve_prefix(const hub::RepoRef& repo);

// A document of the tree, at most k_max_tree_document_bytes; nullopt when
// absent. Error(verification) naming the path when it is not a readable
// regular file within the limit.
std::optional<std::string> read_document(const fs::path& path);

// The files the tree lists for `commit`, by path: tree/<commit>.json, or for
// a tree laid out by make_hub.py, tree/<commit>/build. Directory entries are
// dropped. Empty when the tree has no listing of the commit.
std::map<std::string, hub::TreeEntry> read_listing(const fs::path& root, const hub::RepoRef& repo,
                                                   const std::string& commit);

// The revision names under revision/ (nested folders for names with '/')
// and the file of each; at most k_max_repo_revisions.
std::vector<std::pair<std::string, fs::path>> revision_files(const fs::path& dir);

// The commit a revision document names; Error(verification) when it names none.
std::string revision_commit(const fs::path& path, const std::string& text);

// A listing in the hub's tree format, files only, with the LFS pointer size
// huggingface_hub expects on LFS entries.
std::string listing_json(const std::vector<hub::TreeEntry>& entries);

}  // namespace kernhub::mirror::detail
