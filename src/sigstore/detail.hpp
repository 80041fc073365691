// Internals of the sigstore module shared by its .cpp files: the libcrypto
// table (the digest module's, digest/libcrypto.hpp), owning handles, the
// parsed trusted root, and the step-naming failure helper.
#pragma once

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "digest/libcrypto.hpp"
#include "sigstore/sigstore.hpp"

namespace kernhub::sigstore {

using Bytes = std::vector<std::uint8_t>;

// libcrypto's one table, owned and bound by the digest module
// (digest/libcrypto.hpp), on the first hash or verification.
using CryptoApi = digest::LibCrypto;

// The table with every entry point verification uses; throws
// Error(internal) naming the library and what it lacks when it cannot.
const CryptoApi& crypto();

struct PkeyFree {
    void operator()(EVP_PKEY* key) const noexcept;
};
struct X509Free {
    void operator()(X509* cert) const noexcept;
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyFree>;
using Cert = std::unique_ptr<X509, X509Free>;

// Throws Error(verification) "sigstore: <step>: <what>".
[[noreturn]] void fail(const char* step, const std::string& what);

// ---- crypto helpers (crypto.cpp) -------------------------------------------

Bytes sha256(const void* data, std::size_t size);
inline Bytes sha256(const Bytes& data) {
    return sha256(data.data(), data.size());
}
inline Bytes sha256(std::string_view data) {
    return sha256(data.data(), data.size());
}
// nullptr when `der` is not exactly one DER certificate / SubjectPublicKeyInfo.
Cert parse_cert(const Bytes& der);
Pkey parse_public_key(const Bytes& der);
// A bare PKCS#1 RSAPublicKey (keyDetails PKCS1_RSA_*).
Pkey parse_rsa_public_key(const Bytes& der);
bool is_ed25519(const EVP_PKEY* key);
bool is_ec(const EVP_PKEY* key);
// Signature over `message` with the hash `hash` (nullptr for Ed25519).
bool verify_message(EVP_PKEY* key, const EVP_MD* hash, const Bytes& signature, const void* message, std::size_t size);
// Signature over an already computed digest (ECDSA).
bool verify_prehashed(EVP_PKEY* key, const Bytes& signature, const Bytes& digest);
// The certificate's time as Unix seconds; nullopt when unreadable.
std::optional<std::int64_t> not_before(const X509* cert);
std::optional<std::int64_t> not_after(const X509* cert);
// DER value of the extension with this dotted OID, or nullopt.
std::optional<Bytes> extension_value(const X509* cert, const char* oid);
// Unix seconds from a civil UTC date and time.
std::int64_t unix_time(int year, int month, int day, int hour, int minute, int second);
// "2024-03-19T22:41:16Z".
std::string format_time(std::int64_t unix_seconds);
// A time for messages: the date and the Unix seconds.
std::string when(std::int64_t unix_seconds);
// Bytes as lowercase hex, for messages (log ids, hashes).
std::string hex(const Bytes& bytes);

// ---- the trusted root (trusted_root.cpp) -----------------------------------

struct Validity {
    std::int64_t start = 0;
    std::optional<std::int64_t> end;  // none: still valid
    bool covers(std::int64_t t) const { return t >= start && (!end || t <= *end); }
};

struct LogKey {
    Bytes key_id;  // logId.keyId
    std::string base_url;
    std::shared_ptr<EVP_PKEY> key;
    const EVP_MD* hash = nullptr;  // nullptr: Ed25519
    std::string details;
    Validity valid;
};

struct Authority {
    std::string uri;
    std::vector<std::shared_ptr<X509>> chain;  // leaf-most first, root last
    Validity valid;
};

}  // namespace kernhub::sigstore

namespace kernhub::sigstore {

class TrustedRoot {
public:
    std::string origin;
    std::vector<LogKey> tlogs;
    std::vector<LogKey> ctlogs;
    std::vector<Authority> cas;
    std::vector<Authority> tsas;
};

// Unix seconds of an RFC 3339 time ("2022-04-13T20:06:15Z", fractions and
// offsets allowed); nullopt when malformed.
std::optional<std::int64_t> parse_rfc3339(const std::string& text);

// A regular file of at most `cap` bytes (named `cap_name` in the error,
// at `step`). Missing: Error(not_found); `what` names it ("bundle").
std::string read_document(const std::filesystem::path& path, std::size_t cap, const char* cap_name, const char* step,
                          const char* what);

// ---- JSON bounds (bundle.cpp) ----------------------------------------------

// Nesting allowed in a bundle or trusted root.
inline constexpr std::size_t k_max_json_depth = 32;
// Members of one object or array of a Sigstore document.
inline constexpr std::size_t k_max_json_members = 4096;

// Parses `text` as JSON with nesting and members bounded and a key twice in
// one object refused (common/strict_json.hpp); on failure throws at `step`
// naming `what`.
nlohmann::json parse_bounded_json(std::string_view text, const char* step, const std::string& what);

// The text of the trusted_root.json at `path`, read as load_trusted_root
// reads it (a regular file, capped); root_document.cpp digests it.
std::string read_trusted_root_text(const std::filesystem::path& path);

}  // namespace kernhub::sigstore
