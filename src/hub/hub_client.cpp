#include "hub/hub_client.hpp"

#include <nlohmann/json.hpp>

#include "common/strict_json.hpp"
#include "common/text.hpp"
#include "kernhub/error.hpp"

namespace kernhub::hub {

using nlohmann::json;

std::string url_quote(const std::string& text, bool keep_slash) {
    static const char* k_hex = "0123456789ABCDEF";
    std::string out;
    for (unsigned char c : text) {
        bool unreserved = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                          c == '.' || c == '_' || c == '~' || (keep_slash && c == '/');
        if (unreserved) {
            out.push_back(static_cast<char>(c));
        } else {
            out.push_back('%');
            out.push_back(k_hex[c >> 4]);
            out.push_back(k_hex[c & 15]);
        }
    }
    return out;
}

static std::string repo_label(const RepoRef& repo) {
    return repo.type == RepoType::kernel ? "kernel repo " + repo.repo_id : "model repo " + repo.repo_id;
}

namespace {

// The revision and refs answers hold more than kernhub reads (a revision
// lists every file of the repo). Only the fields kernhub uses are kept,
// read without building a document, so an answer costs its own bytes and
// no more however it is shaped.
constexpr std::size_t k_max_answer_depth = 64;
// A revision answer lists every file of the repo: about 100 bytes each, so
// 16 MiB is a repo of over 100,000 files. Bounds what parsing may cost.
constexpr std::size_t k_max_revision_answer_bytes = 16u << 20;
// Version branches ("vN") kept of a refs answer; the others are read past.
constexpr std::size_t k_max_branch_names = 10000;

class AnswerFields final : public json::json_sax_t {
public:
    explicit AnswerFields(std::string source) : m_source(std::move(source)) {}

    std::optional<std::string> sha;  // the top-level "sha" string
    // "branches"[*] named "v" and digits: each one's "name" and
    // "targetCommit" strings, at most k_max_branch_names of them
    // (versions_cut when the answer holds more).
    std::vector<VersionBranch> branches;
    bool versions_cut = false;

    bool null() override { return value(); }
    bool boolean(bool) override { return value(); }
    bool number_integer(json::number_integer_t) override { return value(); }
    bool number_unsigned(json::number_unsigned_t) override { return value(); }
    bool number_float(json::number_float_t, const json::string_t&) override { return value(); }
    bool binary(json::binary_t&) override { return value(); }
    bool string(json::string_t& text) override {
        if (m_depth == 1 && m_key == "sha") sha = text;
        if (m_depth == 3 && m_in_branch && m_key == "name") branches.back().name = text;
        if (m_depth == 3 && m_in_branch && m_key == "targetCommit") branches.back().commit = text;
        return value();
    }
    bool key(json::string_t& name) override {
        m_key = m_depth <= 3 ? name : std::string();
        return true;
    }
    bool start_object(std::size_t) override {
        if (m_depth == 2 && m_in_branches) {
            m_in_branch = true;
            branches.emplace_back();
        }
        return enter();
    }
    bool start_array(std::size_t) override {
        if (m_depth == 1 && m_key == "branches") m_in_branches = true;
        return enter();
    }
    bool end_object() override { return leave(); }
    bool end_array() override { return leave(); }
    bool parse_error(std::size_t, const std::string&, const json::exception& e) override {
        throw Error(ErrorCode::network, "hub sent malformed JSON for " + m_source + "; check the endpoint", e.what());
    }

private:
    bool value() {
        m_key.clear();  // a value belongs to the key right before it only
        return true;
    }
    bool enter() {
        m_key.clear();
        if (++m_depth > k_max_answer_depth) {
            throw Error(ErrorCode::network, "hub answer for " + m_source + " is nested deeper than " +
                                                std::to_string(k_max_answer_depth) +
                                                " levels (k_max_answer_depth); check the endpoint");
        }
        return true;
    }
    bool leave() {
        m_key.clear();
        if (--m_depth == 2 && m_in_branch) {
            // A branch that names no version is not kept, so that other
            // branches, however many, cost no memory and crowd none out.
            m_in_branch = false;
            if (!version_key(branches.back().name)) {
                branches.pop_back();
            } else if (branches.size() > k_max_branch_names) {
                branches.pop_back();
                versions_cut = true;
            }
        }
        if (m_depth == 1) m_in_branches = false;
        return true;
    }

    std::string m_source;
    std::string m_key;
    std::size_t m_depth = 0;
    bool m_in_branches = false;
    bool m_in_branch = false;  // inside an object of "branches" that is kept
};

AnswerFields read_answer(const std::string& text, const std::string& source) {
    AnswerFields fields(source);
    json::sax_parse(text, &fields);
    return fields;
}

}  // namespace

HubClient::HubClient(std::string endpoint, std::unique_ptr<Transport> transport, bool has_token, HubLimits limits)
    : m_endpoint(std::move(endpoint)), m_transport(std::move(transport)), m_has_token(has_token), m_limits(limits) {}

std::string HubClient::api_url(const RepoRef& repo, const std::string& rest) const {
    const char* kind = repo.type == RepoType::kernel ? "/api/kernels/" : "/api/models/";
    return m_endpoint + kind + repo.repo_id + "/" + rest;
}

std::string HubClient::resolve_url(const RepoRef& repo, const std::string& commit, const std::string& path) const {
    const char* prefix = repo.type == RepoType::kernel ? "/kernels/" : "/";
    return m_endpoint + prefix + repo.repo_id + "/resolve/" + commit + "/" + url_quote(path, true);
}

// The "vN" branches of the repo, for a helpful message; empty on any error.
std::string HubClient::versions_hint(const RepoRef& repo) {
    try {
        http::GetLimits limits;
        limits.max_body = k_max_revision_answer_bytes;
        http::Response response = m_transport->get(api_url(repo, "refs"), limits);
        if (response.status != 200) return {};
        AnswerFields refs = read_answer(response.body, "refs");
        // Every kept branch names a version; a message names 20 at most.
        constexpr std::size_t k_named = 20;
        std::string names;
        for (std::size_t i = 0; i < refs.branches.size() && i < k_named; ++i) {
            names += (names.empty() ? "" : ", ") + refs.branches[i].name;
        }
        if (refs.branches.size() > k_named) names += " and " + std::to_string(refs.branches.size() - k_named) + " more";
        return names.empty() ? "; the repo has no vN version branches" : "; available versions: " + names;
    } catch (const std::exception&) {
        return {};
    }
}

std::string HubClient::resolve_revision(const RepoRef& repo, const std::string& revision) {
    std::string url = api_url(repo, "revision/" + url_quote(revision, false));
    http::GetLimits limits;
    limits.max_body = k_max_revision_answer_bytes;
    limits.over_body_message = "the hub's answer for revision " + quoted_name(revision) + " of " + repo_label(repo) +
                               " is larger than " + std::to_string(k_max_revision_answer_bytes) +
                               " bytes (k_max_revision_answer_bytes); check the endpoint";
    http::Response response = m_transport->get(url, limits);
    if (response.status != 200) {
        const bool version = version_number(revision).has_value();
        // A static hub answers a bare 404 where the real one says RevisionNotFound.
        const std::string code = response.header("x-error-code");
        if (version && (code == "RevisionNotFound" || (code.empty() && response.status == 404))) {
            throw Error(ErrorCode::not_found, "version " + revision.substr(1) + " (branch " + revision +
                                                  ") not found in " + repo_label(repo) + versions_hint(repo));
        }
        fail(response, repo, "revision '" + revision + "'");
    }
    AnswerFields body = read_answer(response.body, http::redact(url));
    if (!body.sha) {
        throw Error(ErrorCode::network, "hub answer for " + http::redact(url) + " lacks a commit \"sha\"");
    }
    std::string sha = std::move(*body.sha);
    if (!is_commit_sha(sha))
        throw Error(ErrorCode::network, "hub sent an invalid commit id '" + sha + "' for " + repo.repo_id);
    return sha;
}

std::optional<VersionBranch> HubClient::latest_version(const RepoRef& repo) {
    const std::string url = api_url(repo, "refs");
    http::GetLimits limits;
    limits.max_body = k_max_revision_answer_bytes;
    limits.over_body_message = "the hub's refs of " + repo_label(repo) + " are larger than " +
                               std::to_string(k_max_revision_answer_bytes) +
                               " bytes (k_max_revision_answer_bytes); check the endpoint";
    http::Response response = m_transport->get(url, limits);
    if (response.status != 200) fail(response, repo, "the refs");
    AnswerFields refs = read_answer(response.body, http::redact(url));
    if (refs.versions_cut) {
        throw Error(ErrorCode::network, "the hub's refs of " + repo_label(repo) + " list more than " +
                                            std::to_string(k_max_branch_names) +
                                            " version branches (k_max_branch_names); check the endpoint");
    }
    std::optional<VersionBranch> latest;
    std::string highest;
    for (VersionBranch& branch : refs.branches) {
        const std::optional<std::string> number = version_key(branch.name);
        // As the kernels library's dict of versions: a later branch of the
        // same number replaces an earlier one.
        if (!number || (latest && version_key_less(*number, highest))) continue;
        highest = *number;
        latest = std::move(branch);
    }
    // Only the chosen branch's commit is used, so only it must be one.
    if (latest && !is_commit_sha(latest->commit)) {
        throw Error(ErrorCode::network, "hub sent an invalid commit id " + quoted_name(latest->commit) +
                                            " for branch " + quoted_name(latest->name) + " of " + repo.repo_id);
    }
    return latest;
}

std::optional<std::string> HubClient::organization_overview(const std::string& org) {
    const std::string url = m_endpoint + "/api/organizations/" + url_quote(org, false) + "/overview";
    http::GetLimits limits;
    limits.max_body = k_max_overview_bytes;
    limits.deadline = clock().now() + m_limits.api_timeout;
    limits.over_body_message = "the hub's overview of organisation " + quoted_name(org) + " is larger than " +
                               std::to_string(k_max_overview_bytes) + " bytes (k_max_overview_bytes)";
    http::Response response = m_transport->get(url, limits);
    // 404, or 401/403 for an overview the hub will not show: the hub has
    // none to give. Anything else that is not 200 (429 and 5xx after the
    // transport's retries, an odd status) is a failure to get an answer.
    if (response.status == 404 || response.status == 401 || response.status == 403) return std::nullopt;
    if (response.status != 200) {
        throw Error(ErrorCode::network, "the hub answered HTTP " + std::to_string(response.status) + " for " +
                                            http::redact(url) + "; try again later");
    }
    return std::move(response.body);
}

bool is_trusted_publisher(const std::string& overview, const std::string& source) {
    const nlohmann::json doc = strict_json::parse_or_discard(overview);
    if (doc.is_discarded() || !doc.is_object()) {
        throw Error(ErrorCode::verification, "the organisation overview from " + source + " is not a JSON object");
    }
    const auto field = doc.find("trustedKernelPublisher");
    if (field == doc.end() || field->is_null()) return false;
    if (!field->is_boolean()) {
        throw Error(ErrorCode::verification, "the organisation overview from " + source +
                                                 " has a \"trustedKernelPublisher\" that is not true "
                                                 "or false");
    }
    return field->get<bool>();
}

static std::string next_link(const std::string& link) {
    // Link: <https://host/api/...&cursor=...>; rel="next"
    auto rel = link.find("rel=\"next\"");
    if (rel == std::string::npos) return {};
    auto close = link.rfind('>', rel);
    auto open = link.rfind('<', close);
    if (open == std::string::npos || close == std::string::npos) return {};
    return link.substr(open + 1, close - open - 1);
}

// Pages are parsed one at a time into the entries kept, so memory is one
// page's body (at most the bytes left under the limit) plus the files kept.
std::vector<TreeEntry> HubClient::list_tree(const RepoRef& repo, const std::string& commit, const std::string& path) {
    std::string url = api_url(repo, "tree/" + commit + "/" + url_quote(path, true) + "?recursive=true");
    const std::string listing = "the hub's listing of " + repo_label(repo) + " at " + commit;
    http::GetLimits limits;
    limits.deadline = clock().now() + m_limits.api_timeout;
    limits.over_body_message = listing + " is larger than " + std::to_string(m_limits.max_listing_bytes) +
                               " bytes over all its pages (KERNHUB_MAX_LISTING_BYTES); check the endpoint, or raise "
                               "KERNHUB_MAX_LISTING_BYTES (Options::max_listing_bytes)";
    PageFilter filter;
    filter.files_only = true;
    filter.keep_prefix = path.empty() ? std::string() : path + "/";
    std::vector<TreeEntry> all;
    std::size_t bytes = 0;
    std::size_t entries = 0;
    for (int page = 0; !url.empty(); ++page) {
        if (page >= k_max_listing_pages) {
            throw Error(ErrorCode::network, listing + " goes on past " + std::to_string(k_max_listing_pages) +
                                                " pages (k_max_listing_pages); check the endpoint");
        }
        limits.max_body = m_limits.max_listing_bytes - bytes;
        http::Response response = m_transport->get(url, limits);
        if (response.status != 200) fail(response, repo, "folder '" + path + "' at " + commit);
        bytes += response.body.size();
        filter.max_entries = m_limits.max_listing_entries - entries;
        entries += parse_tree_page_into(response.body, http::redact(url), filter, all);
        if (entries > m_limits.max_listing_entries) {
            throw Error(ErrorCode::network, listing + " has more than " + std::to_string(m_limits.max_listing_entries) +
                                                " entries (KERNHUB_MAX_LISTING_ENTRIES); check the endpoint, or raise "
                                                "KERNHUB_MAX_LISTING_ENTRIES (Options::max_listing_entries)");
        }
        url = next_link(response.header("link"));
        if (!url.empty() && !http::same_origin(url, m_endpoint)) {
            throw Error(ErrorCode::network,
                        "hub pagination for " + repo.repo_id + " points to another host: " + http::redact(url));
        }
    }
    return all;
}

void HubClient::download(const RepoRef& repo, const std::string& commit, const std::string& path,
                         http::BodyTarget& target) {
    http::Response response = m_transport->download(resolve_url(repo, commit, path), target);
    // A 416 to a resumed download whose kept bytes are already the whole
    // file: nothing was left to fetch, and the caller verifies the bytes.
    if (http::is_complete_416(response, target)) return;
    if (response.status != 200 && response.status != 206) fail(response, repo, "file '" + path + "' at " + commit);
}

void HubClient::fail(const http::Response& response, const RepoRef& repo, const std::string& what) {
    const std::string code = response.header("x-error-code");
    const std::string url = http::redact(response.url);
    const std::string token_hint = m_has_token ? "check that your token can read it" : "set HF_TOKEN if it is private";
    if (code == "RepoNotFound" || (code.empty() && response.status == 401)) {
        throw Error(ErrorCode::not_found, repo_label(repo) + " not found at " + http::redact(m_endpoint) +
                                              "; check the repo id, or " + token_hint);
    }
    if (code == "GatedRepo") {
        throw Error(ErrorCode::not_found,
                    repo_label(repo) + " is gated: accept its conditions on the hub and set HF_TOKEN");
    }
    if (code == "RevisionNotFound") {
        throw Error(ErrorCode::not_found,
                    what + " not found in " + repo_label(repo) + "; check the revision or version");
    }
    if (code == "EntryNotFound") {
        throw Error(ErrorCode::not_found, what + " not found in " + repo_label(repo));
    }
    if (response.status == 404) {
        throw Error(ErrorCode::not_found,
                    what + " of " + repo_label(repo) + " not found at " + url + "; check the repo id and revision");
    }
    if (response.status == 429) {
        std::string asked;
        if (auto wait = http::requested_wait(response, clock())) {
            asked = " and asked to wait " + std::to_string((wait->count() + 999) / 1000) + " s";
        }
        throw Error(ErrorCode::network, "the hub rate-limited requests for " + url + asked +
                                            "; wait and retry, or share a cache between ranks");
    }
    std::string detail = response.header("x-error-message");
    if (http::is_retryable_status(response.status)) {
        throw Error(
            ErrorCode::network,
            "hub answered HTTP " + std::to_string(response.status) + " for " + url + " after retries; try again later",
            detail);
    }
    // Not a passing fault: retrying the same request will not help.
    const std::string next = response.status == 403 ? "; " + token_hint : "; check the endpoint and the repo";
    throw Error(ErrorCode::network, "hub answered HTTP " + std::to_string(response.status) + " for " + url + next,
                detail);
}

}  // namespace kernhub::hub
