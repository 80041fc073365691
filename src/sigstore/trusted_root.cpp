// trusted_root.json (Sigstore's format, media type
// application/vnd.dev.sigstore.trustedroot+json;version=0.1): Rekor logs,
// CT logs, Fulcio CAs and timestamp authorities with their validity windows.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "digest/digest.hpp"
#include "kernhub/error.hpp"
#include "sigstore/detail.hpp"

namespace kernhub::sigstore {

namespace {

constexpr const char* k_root_step = "trusted-root";
constexpr const char* k_root_media_type = "application/vnd.dev.sigstore.trustedroot+json;version=0.1";
// Entries per list (tlogs, ctlogs, CAs, TSAs) and certificates per chain.
constexpr std::size_t k_max_root_entries = 64;
constexpr std::size_t k_max_chain_length = 8;

struct RootReader {
    const std::string& origin;

    [[noreturn]] void bad(const std::string& what) const {
        fail(k_root_step, origin + ": " + what + "; use a trusted_root.json from the Sigstore instance that signed");
    }

    const nlohmann::json& member(const nlohmann::json& object, const char* key, const std::string& where) const {
        if (!object.is_object() || !object.contains(key)) bad(where + " has no \"" + key + "\"");
        return object.at(key);
    }

    std::string text(const nlohmann::json& object, const char* key, const std::string& where) const {
        const nlohmann::json& value = member(object, key, where);
        if (!value.is_string()) bad(where + "." + key + " is not a string");
        return value.get<std::string>();
    }

    Bytes base64(const nlohmann::json& object, const char* key, const std::string& where) const {
        auto bytes = digest::from_base64(text(object, key, where));
        if (!bytes || bytes->empty()) bad(where + "." + key + " is not base64");
        return *bytes;
    }

    Validity validity(const nlohmann::json& holder, const std::string& where) const {
        const nlohmann::json& valid_for = member(holder, "validFor", where);
        Validity out;
        auto start = parse_rfc3339(text(valid_for, "start", where + ".validFor"));
        if (!start) bad(where + ".validFor.start is not an RFC 3339 time");
        out.start = *start;
        if (valid_for.contains("end")) {
            auto end = parse_rfc3339(text(valid_for, "end", where + ".validFor"));
            if (!end) bad(where + ".validFor.end is not an RFC 3339 time");
            out.end = *end;
        }
        return out;
    }

    const nlohmann::json& list(const nlohmann::json& doc, const char* key) const {
        static const nlohmann::json empty = nlohmann::json::array();
        if (!doc.contains(key)) return empty;
        const nlohmann::json& value = doc.at(key);
        if (!value.is_array()) bad(std::string("\"") + key + "\" is not a list");
        if (value.size() > k_max_root_entries) {
            bad(std::string("\"") + key + "\" has " + std::to_string(value.size()) + " entries, over the limit of " +
                std::to_string(k_max_root_entries) + " (k_max_root_entries)");
        }
        return value;
    }

    LogKey log(const nlohmann::json& entry, const std::string& where) const {
        LogKey out;
        out.base_url = entry.contains("baseUrl") && entry["baseUrl"].is_string() ? entry["baseUrl"].get<std::string>()
                                                                                 : std::string();
        const nlohmann::json& public_key = member(entry, "publicKey", where);
        out.details = text(public_key, "keyDetails", where + ".publicKey");
        const Bytes raw = base64(public_key, "rawBytes", where + ".publicKey");
        // PKCS1_* keys are bare RSAPublicKey structures, the rest SubjectPublicKeyInfo.
        const bool pkcs1 = out.details.rfind("PKCS1_", 0) == 0;
        Pkey key = pkcs1 ? parse_rsa_public_key(raw) : parse_public_key(raw);
        if (!key) {
            bad(where + ".publicKey.rawBytes is not a DER " + (pkcs1 ? "RSAPublicKey" : "SubjectPublicKeyInfo"));
        }
        if (is_ed25519(key.get())) {
            out.hash = nullptr;
        } else if (out.details.find("SHA_384") != std::string::npos) {
            out.hash = crypto().sha384();
        } else if (out.details.find("SHA_512") != std::string::npos) {
            out.hash = crypto().sha512();
        } else {
            out.hash = crypto().sha256();
        }
        out.valid = validity(public_key, where + ".publicKey");
        out.key_id = base64(member(entry, "logId", where), "keyId", where + ".logId");
        out.key = std::shared_ptr<EVP_PKEY>(key.release(), PkeyFree{});
        return out;
    }

    Authority authority(const nlohmann::json& entry, const std::string& where) const {
        Authority out;
        out.uri = entry.contains("uri") && entry["uri"].is_string() ? entry["uri"].get<std::string>() : std::string();
        const nlohmann::json& certs = member(member(entry, "certChain", where), "certificates", where + ".certChain");
        if (!certs.is_array() || certs.empty() || certs.size() > k_max_chain_length) {
            bad(where + ".certChain.certificates must list 1 to " + std::to_string(k_max_chain_length) +
                " certificates (k_max_chain_length)");
        }
        for (std::size_t i = 0; i < certs.size(); ++i) {
            const std::string at = where + ".certChain.certificates[" + std::to_string(i) + "]";
            Cert cert = parse_cert(base64(certs[i], "rawBytes", at));
            if (!cert) bad(at + ".rawBytes is not a DER certificate");
            out.chain.emplace_back(cert.release(), X509Free{});
        }
        out.valid = validity(entry, where);
        return out;
    }
};

}  // namespace

std::optional<std::int64_t> parse_rfc3339(const std::string& text) {
    int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
    int used = 0;
    // NOLINTNEXTLINE(cert-err34-c): every field is range-checked below
    if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &year, &month, &day, &hour, &minute, &second, &used) !=
            6 ||
        used != 19) {
        return std::nullopt;
    }
    if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) {
        return std::nullopt;
    }
    std::size_t pos = 19;
    if (pos < text.size() && text[pos] == '.') {
        ++pos;
        std::size_t digits = 0;
        while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9' && digits < 12) ++pos, ++digits;
        if (digits == 0) return std::nullopt;
    }
    std::int64_t offset = 0;
    std::string zone = text.substr(pos);
    if (zone == "Z" || zone == "z") {
        offset = 0;
    } else if (zone.size() == 6 && (zone[0] == '+' || zone[0] == '-') && zone[3] == ':') {
        int zh = 0, zm = 0;
        // NOLINTNEXTLINE(cert-err34-c): range-checked below
        if (std::sscanf(zone.c_str() + 1, "%2d:%2d", &zh, &zm) != 2 || zh > 23 || zm > 59) return std::nullopt;
        offset = (std::int64_t{zh} * 3600 + std::int64_t{zm} * 60) * (zone[0] == '-' ? -1 : 1);
    } else {
        return std::nullopt;
    }
    return unix_time(year, month, day, hour, minute, second) - offset;
}

std::shared_ptr<const TrustedRoot> parse_trusted_root(std::string_view json, const std::string& origin) {
    if (json.size() > k_max_trusted_root_bytes) {
        fail(k_root_step, origin + " is " + std::to_string(json.size()) + " bytes, over the limit of " +
                              std::to_string(k_max_trusted_root_bytes) +
                              " (k_max_trusted_root_bytes); use a Sigstore trusted_root.json");
    }
    const RootReader read{origin};
    nlohmann::json doc = parse_bounded_json(json, k_root_step, origin);
    if (!doc.is_object()) read.bad("the document is not a JSON object");
    if (read.text(doc, "mediaType", "the root") != k_root_media_type) {
        read.bad("mediaType is not " + std::string(k_root_media_type));
    }
    auto root = std::make_shared<TrustedRoot>();
    root->origin = origin;
    const auto& tlogs = read.list(doc, "tlogs");
    for (std::size_t i = 0; i < tlogs.size(); ++i)
        root->tlogs.push_back(read.log(tlogs[i], "tlogs[" + std::to_string(i) + "]"));
    const auto& ctlogs = read.list(doc, "ctlogs");
    for (std::size_t i = 0; i < ctlogs.size(); ++i) {
        root->ctlogs.push_back(read.log(ctlogs[i], "ctlogs[" + std::to_string(i) + "]"));
    }
    const auto& cas = read.list(doc, "certificateAuthorities");
    for (std::size_t i = 0; i < cas.size(); ++i) {
        root->cas.push_back(read.authority(cas[i], "certificateAuthorities[" + std::to_string(i) + "]"));
    }
    const auto& tsas = read.list(doc, "timestampAuthorities");
    for (std::size_t i = 0; i < tsas.size(); ++i) {
        root->tsas.push_back(read.authority(tsas[i], "timestampAuthorities[" + std::to_string(i) + "]"));
    }
    if (root->tlogs.empty() || root->cas.empty()) read.bad("it lists no transparency log or no certificate authority");
    return root;
}

std::int64_t newest_key_start(const TrustedRoot& root) {
    std::int64_t newest = 0;
    for (const auto* logs : {&root.tlogs, &root.ctlogs}) {
        for (const auto& log : *logs) newest = std::max(newest, log.valid.start);
    }
    // Timestamp authorities are left out: kernhub never uses their keys, so
    // a fresh one must not hide stale CAs and logs.
    for (const auto& ca : root.cas) newest = std::max(newest, ca.valid.start);
    return newest;
}

std::string read_document(const std::filesystem::path& path, std::size_t cap, const char* cap_name, const char* step,
                          const char* what) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        int err = errno;
        ErrorCode code = err == ENOENT || err == ENOTDIR ? ErrorCode::not_found : ErrorCode::internal;
        throw Error(code, std::string(what) + " " + path.string() + " cannot be opened: " + std::strerror(err) +
                              "; check the path");
    }
    struct Closer {
        int fd;
        ~Closer() { ::close(fd); }
    } closer{fd};
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        throw Error(ErrorCode::not_found,
                    std::string(what) + " " + path.string() + " is not a regular file; name a file");
    }
    if (static_cast<std::uint64_t>(st.st_size) > cap) {
        fail(step, std::string(what) + " " + path.string() + " is " + std::to_string(st.st_size) +
                       " bytes, over the limit of " + std::to_string(cap) + " bytes (" + cap_name +
                       "); check that it is the right file");
    }
    std::string out(static_cast<std::size_t>(st.st_size), '\0');
    std::size_t done = 0;
    while (done < out.size()) {
        ssize_t n = ::read(fd, out.data() + done, out.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            throw Error(ErrorCode::internal, std::string("cannot read ") + what + " " + path.string() +
                                                 "; check that it is readable and not being written");
        }
        done += static_cast<std::size_t>(n);
    }
    return out;
}

std::string read_trusted_root_text(const std::filesystem::path& path) {
    return read_document(path, k_max_trusted_root_bytes, "k_max_trusted_root_bytes", k_root_step, "trusted root");
}

std::shared_ptr<const TrustedRoot> load_trusted_root(const std::filesystem::path& path) {
    return parse_trusted_root(read_trusted_root_text(path), path.string());
}

std::string read_bundle(const std::filesystem::path& path) {
    return read_document(path, k_max_bundle_bytes, "k_max_bundle_bytes", "bundle", "bundle");
}

}  // namespace kernhub::sigstore
