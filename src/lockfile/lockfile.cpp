#include "lockfile/lockfile.hpp"
#include "common/lines.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "common/hint.hpp"
#include "common/repo.hpp"
#include "common/strict_json.hpp"
#include "common/text.hpp"
#include "kernhub/error.hpp"

namespace kernhub::lockfile {

using nlohmann::json;

namespace {

constexpr int k_format = 1;
constexpr std::size_t k_max_name_length = 128;
constexpr std::size_t k_max_path_length = 4096;
constexpr std::size_t k_max_depth = 16;

[[noreturn]] void fail(const std::string& source, const std::string& problem, ErrorHint hint = {}) {
    throw Error(ErrorCode::usage, "lock file " + source + ": " + problem, std::move(hint));
}

std::string quote_json(const std::string& text) {
    return json(text).dump(-1, ' ', false, json::error_handler_t::replace);
}

// The cap on the members of the container at `path`, as the lock's two
// shapes nest them; every other container has the largest cap.
std::optional<strict_json::MemberCap> lock_cap(const std::vector<strict_json::Step>& path) {
    const auto key = [&](std::size_t i) -> const std::string& { return path[i].key; };
    const auto in = [&](std::size_t depth, const char* field) {
        return path.size() == depth && path[depth - 1].object && key(depth - 1) == field;
    };
    // The words name a kernel and a variant bounded: only a capped
    // container builds them.
    const auto kernel = [&] { return "kernel " + quoted_name(key(1)); };
    if (path.empty()) return strict_json::MemberCap{k_max_lock_kernels, "k_max_lock_kernels", "the lock"};
    if (in(1, "kernels")) return strict_json::MemberCap{k_max_lock_kernels, "k_max_lock_kernels", "\"kernels\""};
    if (path.size() == 2 && !path[0].object && in(2, "variants")) {
        return strict_json::MemberCap{k_max_lock_variants, "k_max_lock_variants", "an entry's \"variants\""};
    }
    if (path.size() < 3 || key(0) != "kernels") return std::nullopt;
    if (in(3, "variants") || in(3, "missing_targets")) {
        return strict_json::MemberCap{k_max_lock_variants, "k_max_lock_variants", kernel() + ", \"" + key(2) + "\""};
    }
    if (in(3, "kernel_depends")) {
        return strict_json::MemberCap{k_max_lock_kernels, "k_max_lock_kernels", kernel() + ", \"kernel_depends\""};
    }
    if (in(5, "files") && key(2) == "variants") {
        return strict_json::MemberCap{k_max_lock_files, "k_max_lock_files",
                                      kernel() + ", variant " + quoted_name(key(3)) + ", \"files\""};
    }
    return std::nullopt;
}

json parse_json(const std::string& text, const std::string& source, const std::atomic<bool>* cancel) {
    if (text.size() > k_max_lock_bytes) {
        fail(source, "is larger than " + std::to_string(k_max_lock_bytes) + " bytes (k_max_lock_bytes)");
    }
    strict_json::Limits limits;
    limits.max_depth = k_max_depth;
    limits.depth_name = "k_max_depth";
    limits.members = strict_json::MemberCap{k_max_lock_files, "k_max_lock_files", {}};
    limits.cap_at = lock_cap;
    limits.cancel = cancel;
    strict_json::Parsed parsed = strict_json::parse(text, limits);
    if (!parsed.problem) return std::move(parsed.document);
    if (parsed.problem->kind == strict_json::Problem::Kind::cancelled) {
        throw Error(ErrorCode::interrupted, "reading lock file " + source + " was interrupted");
    }
    if (parsed.problem->kind == strict_json::Problem::Kind::syntax) {
        fail(source, "is not valid JSON " + strict_json::syntax_position(*parsed.problem, text));
    }
    fail(source, strict_json::describe(*parsed.problem, text));
}

bool is_lower_hex(const std::string& text, std::size_t length) {
    return text.size() == length && std::all_of(text.begin(), text.end(), [](char c) {
               return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
           });
}

// Variant names become folder names in the cache.
bool safe_variant(const std::string& name) {
    return !name.empty() && name.size() <= k_max_name_length && name[0] != '.' &&
           std::all_of(name.begin(), name.end(), [](char c) {
               return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                      c == '_' || c == '-' || c == '+';
           });
}

// A path relative to the variant directory: no empty, "." or ".." part, no
// leading '/', no NUL or control character.
bool safe_relpath(const std::string& path) {
    if (path.empty() || path.size() > k_max_path_length || path.front() == '/') return false;
    if (std::any_of(path.begin(), path.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20; })) {
        return false;
    }
    std::size_t start = 0;
    while (start <= path.size()) {
        std::size_t end = path.find('/', start);
        if (end == std::string::npos) end = path.size();
        std::string part = path.substr(start, end - start);
        if (part.empty() || part == "." || part == "..") return false;
        start = end + 1;
    }
    return true;
}

// The object's keys must all be allowed and the required ones present.
void check_keys(const json& object, const std::vector<std::string>& required, const std::vector<std::string>& optional,
                const std::string& source, const std::string& where) {
    for (const auto& [key, value] : object.items()) {
        (void)value;
        bool known = std::find(required.begin(), required.end(), key) != required.end() ||
                     std::find(optional.begin(), optional.end(), key) != optional.end();
        if (!known) fail(source, where + ": unknown field " + quote_json(key));
    }
    for (const auto& key : required) {
        if (!object.contains(key)) fail(source, where + ": missing field " + quote_json(key));
    }
}

const std::string& string_field(const json& object, const char* key, const std::string& source,
                                const std::string& where) {
    const json& value = object.at(key);
    if (!value.is_string()) fail(source, where + ": field " + quote_json(key) + " must be a string");
    return value.get_ref<const std::string&>();
}

std::string checked_commit(const json& object, const char* key, const std::string& source, const std::string& where) {
    const std::string& commit = string_field(object, key, source, where);
    if (!is_commit_sha(commit)) {
        fail(source, where + ": field " + quote_json(key) +
                         " must be a full lowercase hex commit id (40 characters for SHA-1, 64 for SHA-256), got " +
                         quote_json(commit.substr(0, 80)));
    }
    return commit;
}

std::string checked_repo_id(const std::string& repo_id, const std::string& source, const std::string& where) {
    try {
        validate_repo_id(repo_id);
    } catch (const Error& e) {
        fail(source, where + ": " + e.plain_message(), e.hint());
    }
    return repo_id;
}

std::string checked_revision(const std::string& revision, const std::string& source, const std::string& where) {
    if (std::string problem = revision_problem(revision); !problem.empty()) {
        fail(source, where + ": revision " + quote_json(revision) + " " + problem);
    }
    return revision;
}

std::string checked_hash(const std::string& hash, const std::string& source, const std::string& where) {
    if (hash.rfind("sha256-", 0) != 0 || !is_lower_hex(hash.substr(7), 64)) {
        fail(source, where + ": hash must be \"sha256-\" and 64 lowercase hex characters, got " +
                         quote_json(hash.substr(0, 80)));
    }
    return hash;
}

LockedVariant parse_kernhub_variant(const json& value, const std::string& source, const std::string& where) {
    if (!value.is_object()) fail(source, where + ": must be an object");
    check_keys(value, {"hash", "files"}, {"signer"}, source, where);
    LockedVariant variant;
    variant.hash = checked_hash(string_field(value, "hash", source, where), source, where);
    if (value.contains("signer")) {
        const json& signer = value.at("signer");
        const std::string at = where + ", signer";
        if (!signer.is_object()) fail(source, at + ": must be an object");
        check_keys(signer, {"identity", "issuer"}, {}, source, at);
        LockedSigner locked{string_field(signer, "identity", source, at), string_field(signer, "issuer", source, at)};
        if (locked.identity.empty() || locked.issuer.empty() || locked.identity.size() > 1024 ||
            locked.issuer.size() > 1024) {
            fail(source, at + ": identity and issuer must be non-empty and at most 1024 bytes");
        }
        variant.signer = std::move(locked);
    }
    const json& files = value.at("files");
    if (!files.is_object()) fail(source, where + ": field \"files\" must be an object");
    for (const auto& [path, file] : files.items()) {
        const std::string at = where + ", file " + quote_json(path);
        if (!safe_relpath(path)) fail(source, at + ": not a plain relative path");
        if (!file.is_object()) fail(source, at + ": must be an object");
        check_keys(file, {"size", "sha256"}, {}, source, at);
        if (!file.at("size").is_number_unsigned()) fail(source, at + ": field \"size\" must be a non-negative integer");
        LockedFile locked;
        locked.size = file.at("size").get<std::uint64_t>();
        locked.sha256 = string_field(file, "sha256", source, at);
        if (!is_lower_hex(locked.sha256, 64)) fail(source, at + ": field \"sha256\" must be 64 lowercase hex");
        variant.files.emplace(path, std::move(locked));
    }
    return variant;
}

LockedKernel parse_kernhub_kernel(const json& value, const std::string& source, const std::string& where) {
    if (!value.is_object()) fail(source, where + ": must be an object");
    check_keys(value, {"repo_id", "repo_type", "revision", "commit", "symbol", "variants"},
               {"file", "missing_targets", "kernel_depends"}, source, where);
    LockedKernel kernel;
    kernel.repo_id = checked_repo_id(string_field(value, "repo_id", source, where), source, where);
    const std::string& type = string_field(value, "repo_type", source, where);
    if (type != "kernel" && type != "model") fail(source, where + ": repo_type must be \"kernel\" or \"model\"");
    kernel.repo_type = type == "kernel" ? RepoType::kernel : RepoType::model;
    kernel.revision = checked_revision(string_field(value, "revision", source, where), source, where);
    kernel.commit = checked_commit(value, "commit", source, where);
    kernel.symbol = string_field(value, "symbol", source, where);
    if (value.contains("file")) {
        kernel.file = string_field(value, "file", source, where);
        if (!safe_relpath(kernel.file)) fail(source, where + ": field \"file\" is not a plain relative path");
    }
    const json& variants = value.at("variants");
    if (!variants.is_object()) fail(source, where + ": field \"variants\" must be an object");
    for (const auto& [name, variant] : variants.items()) {
        const std::string at = where + ", variant " + quote_json(name);
        if (!safe_variant(name)) fail(source, at + ": not a valid variant name");
        kernel.variants.emplace(name, parse_kernhub_variant(variant, source, at));
    }
    if (value.contains("missing_targets")) {
        const json& missing = value.at("missing_targets");
        if (!missing.is_array()) fail(source, where + ": field \"missing_targets\" must be an array");
        for (const json& target : missing) {
            if (!target.is_string() || !safe_variant(target.get_ref<const std::string&>())) {
                fail(source, where + ": \"missing_targets\" holds something that is not a variant name");
            }
            const std::string& name = target.get_ref<const std::string&>();
            if (kernel.variants.count(name) != 0) {
                fail(source, where + ": variant " + quote_json(name) + " is both locked and in \"missing_targets\"");
            }
            kernel.missing_targets.insert(name);
        }
    }
    if (value.contains("kernel_depends")) {
        const json& depends = value.at("kernel_depends");
        if (!depends.is_array()) fail(source, where + ": field \"kernel_depends\" must be an array");
        for (const json& name : depends) {
            if (!name.is_string() || name.get_ref<const std::string&>().empty()) {
                fail(source, where + ": \"kernel_depends\" holds something that is not a kernel name");
            }
            kernel.kernel_depends.insert(name.get<std::string>());
        }
    }
    return kernel;
}

KernhubLock parse_kernhub(const json& document, const std::string& source) {
    check_keys(document, {"format", "kernels"}, {}, source, "top level");
    const json& format = document.at("format");
    if (!format.is_number_integer() || format != k_format) {
        fail(source, "unsupported \"format\" " + format.dump() + " (this kernhub reads format 1); lock again",
             hint::action("lock"));
    }
    const json& kernels = document.at("kernels");
    if (!kernels.is_object()) fail(source, "field \"kernels\" must be an object");
    KernhubLock lock;
    for (const auto& [name, value] : kernels.items()) {
        if (name.empty() || name.size() > k_max_name_length)
            fail(source, "kernel " + quote_json(name) + ": invalid name");
        lock.kernels.emplace(name, parse_kernhub_kernel(value, source, "kernel " + quote_json(name)));
    }
    for (const auto& [name, kernel] : lock.kernels) {
        for (const std::string& dependency : kernel.kernel_depends) {
            if (lock.kernels.count(dependency) == 0) {
                fail(source, "kernel " + quote_json(name) + ": \"kernel_depends\" names " + quote_json(dependency) +
                                 ", which is not a kernel of this lock");
            }
        }
    }
    return lock;
}

// kernels >= 0.17: [{"dependency": {"repo-id", "version"|"revision"}, "lock": {"commit"}}]
KernelsLockEntry parse_kernels_entry(const json& item, const std::string& source, const std::string& where) {
    check_keys(item, {"dependency", "lock"}, {}, source, where);
    const json& dependency = item.at("dependency");
    const json& pin = item.at("lock");
    if (!dependency.is_object() || !pin.is_object()) {
        fail(source, where + ": \"dependency\" and \"lock\" must be objects");
    }
    check_keys(dependency, {"repo-id"}, {"version", "revision"}, source, where + ", dependency");
    check_keys(pin, {"commit"}, {}, source, where + ", lock");
    KernelsLockEntry entry;
    entry.repo_id = checked_repo_id(string_field(dependency, "repo-id", source, where), source, where);
    const bool has_version = dependency.contains("version");
    if (has_version == dependency.contains("revision")) {
        fail(source, where + ": the dependency needs exactly one of \"version\" and \"revision\"");
    }
    if (has_version) {
        const json& version = dependency.at("version");
        if (!version.is_number_unsigned() || version.get<std::uint64_t>() > 1000000) {
            fail(source, where + ": \"version\" must be a non-negative integer");
        }
        entry.revision = "v" + std::to_string(version.get<std::uint64_t>());
    } else {
        entry.revision = checked_revision(string_field(dependency, "revision", source, where), source, where);
    }
    entry.commit = checked_commit(pin, "commit", source, where);
    return entry;
}

// kernels <= 0.16: [{"repo_id", "sha", "variants": {VARIANT: {"hash", "hash_type"}}}]
KernelsLockEntry parse_legacy_entry(const json& item, const std::string& source, const std::string& where) {
    check_keys(item, {"repo_id", "sha", "variants"}, {}, source, where);
    KernelsLockEntry entry;
    entry.repo_id = checked_repo_id(string_field(item, "repo_id", source, where), source, where);
    entry.commit = checked_commit(item, "sha", source, where);
    const json& variants = item.at("variants");
    if (!variants.is_object()) fail(source, where + ": \"variants\" must be an object");
    for (const auto& [name, value] : variants.items()) {
        const std::string at = where + ", variant " + quote_json(name);
        if (!safe_variant(name)) fail(source, at + ": not a valid variant name");
        if (!value.is_object()) fail(source, at + ": must be an object");
        check_keys(value, {"hash", "hash_type"}, {}, source, at);
        if (string_field(value, "hash_type", source, at) != "git_lfs_concat") {
            fail(source, at + ": unsupported hash_type (kernhub checks \"git_lfs_concat\")");
        }
        entry.variant_hashes.emplace(name, checked_hash(string_field(value, "hash", source, at), source, at));
    }
    return entry;
}

}  // namespace

AnyLock parse_lock(const std::string& text, const std::string& source, const std::atomic<bool>* cancel) {
    const json document = parse_json(text, source, cancel);
    AnyLock lock;
    if (document.is_object()) {
        lock.format = Format::kernhub_lock;
        lock.kernhub = parse_kernhub(document, source);
        return lock;
    }
    if (!document.is_array()) {
        fail(source, "is neither a kernhub.lock (an object) nor a kernels.lock (an array)");
    }
    // The first entry decides the format; every entry must then follow it.
    lock.format = Format::kernels_lock;
    if (!document.empty() && document[0].is_object() && document[0].contains("repo_id")) {
        lock.format = Format::kernels_lock_0_16;
    }
    std::set<std::string> seen;
    for (std::size_t i = 0; i < document.size(); ++i) {
        const std::string where = "entry " + std::to_string(i);
        if (!document[i].is_object()) fail(source, where + ": must be an object");
        KernelsLockEntry entry = lock.format == Format::kernels_lock ? parse_kernels_entry(document[i], source, where)
                                                                     : parse_legacy_entry(document[i], source, where);
        if (!seen.insert(entry.repo_id).second) {
            fail(source, where + ": " + quote_json(entry.repo_id) + " is locked twice; keep one");
        }
        lock.kernels.push_back(std::move(entry));
    }
    return lock;
}

std::string write_kernhub_lock(const KernhubLock& lock) {
    // nlohmann::json's object is a std::map: keys come out sorted.
    json kernels = json::object();
    for (const auto& [name, kernel] : lock.kernels) {
        json variants = json::object();
        for (const auto& [variant_name, variant] : kernel.variants) {
            json files = json::object();
            for (const auto& [path, file] : variant.files) {
                files[path] = {{"size", file.size}, {"sha256", file.sha256}};
            }
            variants[variant_name] = {{"hash", variant.hash}, {"files", std::move(files)}};
            if (variant.signer) {
                variants[variant_name]["signer"] = {{"identity", variant.signer->identity},
                                                    {"issuer", variant.signer->issuer}};
            }
        }
        json entry = {{"repo_id", kernel.repo_id},   {"repo_type", to_string(kernel.repo_type)},
                      {"revision", kernel.revision}, {"commit", kernel.commit},
                      {"symbol", kernel.symbol},     {"variants", std::move(variants)}};
        if (!kernel.file.empty()) entry["file"] = kernel.file;
        if (!kernel.missing_targets.empty()) entry["missing_targets"] = kernel.missing_targets;
        if (!kernel.kernel_depends.empty()) entry["kernel_depends"] = kernel.kernel_depends;
        kernels[name] = std::move(entry);
    }
    json document = {{"format", k_format}, {"kernels", std::move(kernels)}};
    return document.dump(2, ' ', false, json::error_handler_t::strict) + "\n";
}

std::string variant_hash(std::vector<std::pair<std::string, digest::Bytes>> files) {
    std::sort(files.begin(), files.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    digest::Hasher hasher(digest::Algorithm::sha256);
    for (const auto& [path, raw] : files) {
        hasher.update(path.data(), path.size());
        hasher.update(raw.data(), raw.size());
    }
    return "sha256-" + digest::to_hex(hasher.finish());
}

std::string line_diff(const std::string& before, const std::string& after, const std::string& before_label,
                      const std::string& after_label) {
    if (before == after) return {};
    std::vector<std::string> a = split_lines(before);
    std::vector<std::string> b = split_lines(after);
    // Common head and tail first: a re-lock usually changes a few lines, so
    // the quadratic table below stays small.
    std::size_t head = 0;
    while (head < a.size() && head < b.size() && a[head] == b[head]) ++head;
    std::size_t tail = 0;
    while (tail < a.size() - head && tail < b.size() - head && a[a.size() - 1 - tail] == b[b.size() - 1 - tail]) {
        ++tail;
    }
    const std::size_t n = a.size() - head - tail;
    const std::size_t m = b.size() - head - tail;
    std::vector<std::string> body;
    constexpr std::size_t k_max_table = 4u << 20;  // cells; beyond it, show all removed then all added
    if (n * m <= k_max_table) {
        std::vector<std::vector<std::uint32_t>> lcs(n + 1, std::vector<std::uint32_t>(m + 1, 0));
        for (std::size_t i = n; i-- > 0;) {
            for (std::size_t j = m; j-- > 0;) {
                lcs[i][j] = a[head + i] == b[head + j] ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
            }
        }
        std::size_t i = 0, j = 0;
        while (i < n || j < m) {
            if (i < n && j < m && a[head + i] == b[head + j]) {
                body.push_back(" " + a[head + i]);
                ++i;
                ++j;
            } else if (i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1])) {
                body.push_back("-" + a[head + i++]);  // removals before additions
            } else {
                body.push_back("+" + b[head + j++]);
            }
        }
    } else {
        for (std::size_t i = 0; i < n; ++i) body.push_back("-" + a[head + i]);
        for (std::size_t j = 0; j < m; ++j) body.push_back("+" + b[head + j]);
    }
    constexpr std::size_t k_context = 3;
    std::string out = "--- " + before_label + "\n+++ " + after_label + "\n";
    const std::size_t from = head > k_context ? head - k_context : 0;
    for (std::size_t i = from; i < head; ++i) out += " " + a[i] + "\n";
    for (const auto& line : body) out += line + "\n";
    for (std::size_t i = a.size() - tail; i < a.size() && i < a.size() - tail + k_context; ++i)
        out += " " + a[i] + "\n";
    return out;
}

}  // namespace kernhub::lockfile
