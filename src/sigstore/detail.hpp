// Internals of the sigstore module shared by its .cpp files: the libcrypto
// table (bound at run time, common/dynlib.hpp), owning handles, the parsed
// trusted root, and the step-naming failure helper.
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

#include "sigstore/sigstore.hpp"

namespace kernhub::sigstore {

using Bytes = std::vector<std::uint8_t>;

// libcrypto, bound on the first verification. Macros of OpenSSL's headers
// (sk_X509_*) are reached through the functions they expand to (OPENSSL_sk_*).
struct CryptoApi {
    decltype(&::EVP_MD_CTX_new) md_ctx_new = nullptr;
    decltype(&::EVP_MD_CTX_free) md_ctx_free = nullptr;
    decltype(&::EVP_DigestVerifyInit) digest_verify_init = nullptr;
    decltype(&::EVP_DigestVerify) digest_verify = nullptr;
    decltype(&::EVP_Digest) digest = nullptr;
    decltype(&::EVP_sha256) sha256 = nullptr;
    decltype(&::EVP_sha384) sha384 = nullptr;
    decltype(&::EVP_sha512) sha512 = nullptr;
    decltype(&::EVP_PKEY_CTX_new) pkey_ctx_new = nullptr;
    decltype(&::EVP_PKEY_CTX_free) pkey_ctx_free = nullptr;
    decltype(&::EVP_PKEY_verify_init) pkey_verify_init = nullptr;
    decltype(&::EVP_PKEY_verify) pkey_verify = nullptr;
    decltype(&::EVP_PKEY_free) pkey_free = nullptr;
    decltype(&::EVP_PKEY_up_ref) pkey_up_ref = nullptr;
    decltype(&::d2i_PUBKEY) d2i_pubkey = nullptr;
    decltype(&::d2i_PublicKey) d2i_public_key = nullptr;
    // EVP_PKEY_get_base_id in OpenSSL 3, EVP_PKEY_base_id in 1.1.
    int (*pkey_base_id)(const EVP_PKEY*) = nullptr;
    decltype(&::d2i_X509) d2i_x509 = nullptr;
    decltype(&::X509_free) x509_free = nullptr;
    decltype(&::X509_dup) x509_dup = nullptr;
    decltype(&::X509_get0_notBefore) get0_not_before = nullptr;
    decltype(&::X509_get0_notAfter) get0_not_after = nullptr;
    decltype(&::ASN1_TIME_to_tm) asn1_time_to_tm = nullptr;
    decltype(&::X509_get0_pubkey) get0_pubkey = nullptr;
    decltype(&::X509_get_X509_PUBKEY) get_x509_pubkey = nullptr;
    decltype(&::i2d_X509_PUBKEY) i2d_x509_pubkey = nullptr;
    decltype(&::X509_get_ext_count) get_ext_count = nullptr;
    decltype(&::X509_get_ext) get_ext = nullptr;
    decltype(&::X509_get_ext_by_NID) get_ext_by_nid = nullptr;
    decltype(&::X509_delete_ext) delete_ext = nullptr;
    decltype(&::X509_EXTENSION_free) extension_free = nullptr;
    decltype(&::X509_EXTENSION_get_object) extension_object = nullptr;
    decltype(&::X509_EXTENSION_get_data) extension_data = nullptr;
    decltype(&::OBJ_obj2txt) obj2txt = nullptr;
    decltype(&::ASN1_STRING_get0_data) string_data = nullptr;
    decltype(&::ASN1_STRING_length) string_length = nullptr;
    decltype(&::X509_get_ext_d2i) get_ext_d2i = nullptr;
    decltype(&::GENERAL_NAMES_free) general_names_free = nullptr;
    decltype(&::X509_get_extended_key_usage) extended_key_usage = nullptr;
    decltype(&::X509_get_key_usage) key_usage = nullptr;
    decltype(&::X509_get_extension_flags) extension_flags = nullptr;
    decltype(&::i2d_re_X509_tbs) i2d_re_tbs = nullptr;
    decltype(&::X509_STORE_new) store_new = nullptr;
    decltype(&::X509_STORE_free) store_free = nullptr;
    decltype(&::X509_STORE_add_cert) store_add_cert = nullptr;
    decltype(&::X509_STORE_CTX_new) store_ctx_new = nullptr;
    decltype(&::X509_STORE_CTX_free) store_ctx_free = nullptr;
    decltype(&::X509_STORE_CTX_init) store_ctx_init = nullptr;
    decltype(&::X509_STORE_CTX_set_time) store_ctx_set_time = nullptr;
    decltype(&::X509_STORE_CTX_get_error) store_ctx_get_error = nullptr;
    decltype(&::X509_STORE_CTX_get_error_depth) store_ctx_get_error_depth = nullptr;
    decltype(&::X509_STORE_CTX_get0_chain) store_ctx_get0_chain = nullptr;
    decltype(&::X509_verify_cert) verify_cert = nullptr;
    decltype(&::X509_verify_cert_error_string) verify_cert_error_string = nullptr;
    decltype(&::OPENSSL_sk_new_null) sk_new_null = nullptr;
    decltype(&::OPENSSL_sk_push) sk_push = nullptr;
    decltype(&::OPENSSL_sk_free) sk_free = nullptr;
    decltype(&::OPENSSL_sk_num) sk_num = nullptr;
    decltype(&::OPENSSL_sk_value) sk_value = nullptr;
    decltype(&::ERR_clear_error) err_clear_error = nullptr;
};

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
inline constexpr int k_max_json_depth = 32;

// Parses `text` as JSON with nesting bounded; on failure throws at `step`
// naming `what`.
nlohmann::json parse_bounded_json(std::string_view text, const char* step, const std::string& what);

// The text of the trusted_root.json at `path`, read as load_trusted_root
// reads it (a regular file, capped); root_document.cpp digests it.
std::string read_trusted_root_text(const std::filesystem::path& path);

}  // namespace kernhub::sigstore
