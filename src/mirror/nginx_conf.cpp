// The nginx server block for a static hub tree (docs/ci-images.md,
// "How a mirror tree is written"). A stock static server is enough for
// kernhub, which asks only for files by commit and reads hashes from the
// listing; huggingface_hub also needs per-file headers a static server cannot know (ETag = the hub's
// id of the file, X-Linked-Size, X-Repo-Commit) and asks for files by
// revision name and for tree/<commit>, a folder in a static tree. All of
// that is generated here from the tree's own listings and revision files,
// as exact-match locations (no map hash sizes to tune at the http level).
#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <string_view>

#include "common/hint.hpp"
#include "kernhub/error.hpp"
#include "mirror/mirror.hpp"
#include "mirror/tree_files.hpp"

namespace kernhub::mirror {

using namespace detail;

namespace {

struct RepoInTree {
    hub::RepoRef repo;
    std::map<std::string, std::map<std::string, hub::TreeEntry>> commits;  // commit -> path -> entry
    std::map<std::string, std::string> revisions;                          // name -> commit
};

bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '-';
}

// A string as one nginx configuration token: double-quoted, with '"' and '\'
// escaped. Control characters cannot be written safely and are refused.
std::string nginx_quoted(const std::string& text) {
    std::string out = "\"";
    for (char c : text) {
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
            throw Error(ErrorCode::usage,
                        "cannot write '" + text + "' into an nginx configuration: it holds a control character");
        }
        if (c == '"' || c == '\\') out.push_back('\\');
        out.push_back(c);
    }
    return out + "\"";
}

// nginx expands variables in `root` (and has no escape for '$'): a tree
// path holding one would let a request header choose the served folder.
std::string root_path(const fs::path& root) {
    std::string text = root.string();
    if (text.find('$') != std::string::npos) {
        throw Error(ErrorCode::usage, "cannot serve " + text +
                                          " with nginx: its path holds '$', which nginx reads as a variable; "
                                          "move the tree to a path without '$'");
    }
    return text;
}

// Sub-folders of `dir` whose names are org or repo name parts.
std::vector<std::string> name_folders(const fs::path& dir) {
    std::vector<std::string> out;
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (it->is_directory(ec) && !name.empty() && name[0] != '.' &&
            std::all_of(name.begin(), name.end(), is_name_char)) {
            out.push_back(name);
        }
    }
    std::sort(out.begin(), out.end());
    return out;
}

// The commits a repo's tree/ folder has listings for.
std::set<std::string> listed_commits(const fs::path& tree) {
    std::set<std::string> out;
    std::error_code ec;
    for (fs::directory_iterator it(tree, ec), end; !ec && it != end; it.increment(ec)) {
        std::string name = it->path().filename().string();
        constexpr std::string_view k_json = ".json";
        if (name.size() > k_json.size() && name.compare(name.size() - k_json.size(), k_json.size(), k_json) == 0) {
            name.resize(name.size() - k_json.size());
        }
        if (is_commit_sha(name)) out.insert(name);
    }
    return out;
}

std::vector<RepoInTree> scan_tree(const fs::path& root) {
    std::vector<RepoInTree> repos;
    std::size_t files = 0;
    for (RepoType type : {RepoType::kernel, RepoType::model}) {
        const fs::path kind_dir = root / "api" / api_kind(type);
        for (const std::string& org : name_folders(kind_dir)) {
            for (const std::string& name : name_folders(kind_dir / org)) {
                RepoInTree found;
                found.repo = hub::RepoRef{type, org + "/" + name};
                const fs::path api = api_dir(root, found.repo);
                for (const std::string& commit : listed_commits(api / "tree")) {
                    found.commits[commit] = read_listing(root, found.repo, commit);
                    files += found.commits[commit].size();
                    if (files > k_max_conf_files) {
                        throw Error(ErrorCode::usage,
                                    "the hub tree " + root.string() + " lists more than k_max_conf_files (" +
                                        std::to_string(k_max_conf_files) + ") files; split it into several trees");
                    }
                }
                for (const auto& [revision, path] : revision_files(api / "revision")) {
                    if (is_commit_sha(revision)) continue;
                    if (std::optional<std::string> text = read_document(path)) {
                        found.revisions[revision] = revision_commit(path, *text);
                    }
                }
                if (!found.commits.empty()) repos.push_back(std::move(found));
            }
        }
    }
    return repos;
}

void write_repo(std::ostream& out, const RepoInTree& repo) {
    const std::string api = std::string("/api/") + api_kind(repo.repo.type) + "/" + repo.repo.repo_id + "/";
    const std::string resolve = "/" + resolve_prefix(repo.repo) + "/resolve/";
    out << "\n    # ---- " << to_string(repo.repo.type) << " repo " << repo.repo.repo_id << "\n"
        << "    location = " << nginx_quoted(api + "refs") << " {\n"
        << "        default_type application/json;\n"
        << "        add_header Cache-Control no-cache;\n"
        << "    }\n"
        << "    location ^~ " << nginx_quoted(api + "revision/") << " {\n"
        << "        default_type application/json;\n"
        << "        add_header Cache-Control no-cache;\n"
        << "        try_files $uri @kernhub_revision_not_found;\n"
        << "    }\n"
        << "    location ^~ " << nginx_quoted(api + "tree/") << " {\n"
        << "        default_type application/json;\n"
        << "        # huggingface_hub lists the whole repo at tree/<commit>, a folder in the tree.\n"
        << "        rewrite \"^(.*/tree/([0-9a-f]{40}|[0-9a-f]{64}))$\" $1.json break;\n"
        << "        try_files $uri @kernhub_entry_not_found;\n"
        << "    }\n"
        << "    location ^~ " << nginx_quoted(resolve) << " {\n"
        << "        add_header X-Error-Code RevisionNotFound always;\n"
        << "        return 404;\n"
        << "    }\n";
    for (const auto& [revision, commit] : repo.revisions) {
        const std::string prefix = resolve + revision + "/";
        const auto parts = std::count(prefix.begin(), prefix.end(), '/') - 1;
        out << "    location ^~ " << nginx_quoted(prefix) << " {\n"
            << "        rewrite \"^/(?:[^/]+/){" << parts << "}(.*)$\" " << resolve << commit << "/$1 last;\n"
            << "    }\n";
    }
    for (const auto& [commit, files] : repo.commits) {
        out << "    location ^~ " << nginx_quoted(resolve + commit + "/") << " {\n"
            << "        add_header X-Repo-Commit " << commit << " always;\n"
            << "        add_header X-Error-Code EntryNotFound always;\n"
            << "        return 404;\n"
            << "    }\n";
        for (const auto& [path, entry] : files) {
            out << "    location = " << nginx_quoted(resolve + commit + "/" + path) << " {\n"
                << "        add_header X-Repo-Commit " << commit << ";\n"
                << "        add_header ETag '\"" << entry.etag() << "\"';\n"
                << "        add_header X-Linked-Etag '\"" << entry.etag() << "\"';\n"
                << "        add_header X-Linked-Size " << entry.size << ";\n"
                << "        add_header Cache-Control \"public, max-age=31536000, immutable\";\n"
                << "    }\n";
        }
    }
}

}  // namespace

void check_listen(const std::string& listen) {
    const auto colon = listen.rfind(':');
    const std::string port = colon == std::string::npos ? listen : listen.substr(colon + 1);
    std::string host = colon == std::string::npos ? std::string() : listen.substr(0, colon);
    bool host_ok = std::all_of(host.begin(), host.end(),
                               [](char c) { return is_name_char(c) || c == ':' || c == '[' || c == ']' || c == '*'; });
    if (colon != std::string::npos && host.empty()) host_ok = false;
    bool port_ok = !port.empty() && port.size() <= 5 &&
                   std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
                   std::stoul(port) >= 1 && std::stoul(port) <= 65535;
    if (!host_ok || !port_ok) {
        throw Error(ErrorCode::usage,
                    "the address to listen on, '" + listen +
                        "', is not PORT, HOST:PORT or [IPv6]:PORT, such as 127.0.0.1:8080; check the one given",
                    hint::setting("mirror.listen"));
    }
}

std::string nginx_conf(const fs::path& root, const std::string& listen) {
    check_listen(listen);
    const std::vector<RepoInTree> repos = scan_tree(root);
    if (repos.empty()) {
        throw Error(ErrorCode::usage,
                    root.string() +
                        " holds no mirrored repo (no api/*/ORG/NAME/tree listings); "
                        "mirror kernels into it first",
                    hint::action("mirror"));
    }
    std::ostringstream out;
    out << "# nginx server block for the static hub tree " << root.string() << ",\n"
        << "# written by kernhub's mirror. Include it inside http { }; write it again\n"
        << "# after adding to the tree. Files resolve by the commits and revision names\n"
        << "# below, with the headers huggingface_hub needs (docs/ci-images.md,\n"
        << "# \"How a mirror tree is written\").\n"
        << "server {\n"
        << "    listen " << listen << ";\n"
        << "    root " << nginx_quoted(root_path(root)) << ";\n"
        << "    # Each file's ETag is the hub's id of it (set below), not nginx's mtime-size.\n"
        << "    etag off;\n"
        << "    # huggingface_hub checks Content-Length against the file size.\n"
        << "    gzip off;\n"
        << "    default_type application/octet-stream;\n"
        << "\n"
        << "    # Anything not below is not in this mirror.\n"
        << "    location / {\n"
        << "        add_header X-Error-Code RepoNotFound always;\n"
        << "        return 404;\n"
        << "    }\n"
        << "    location @kernhub_revision_not_found {\n"
        << "        add_header X-Error-Code RevisionNotFound always;\n"
        << "        return 404;\n"
        << "    }\n"
        << "    location @kernhub_entry_not_found {\n"
        << "        add_header X-Error-Code EntryNotFound always;\n"
        << "        return 404;\n"
        << "    }\n"
        << "    # Organisation overviews as the hub answered them (trusted kernel publishers).\n"
        << "    location ~ \"^/api/organizations/[A-Za-z0-9._-]+/overview$\" {\n"
        << "        default_type application/json;\n"
        << "        add_header Cache-Control no-cache;\n"
        << "        try_files $uri =404;\n"
        << "    }\n";
    for (const RepoInTree& repo : repos) write_repo(out, repo);
    out << "}\n";
    return out.str();
}

}  // namespace kernhub::mirror
