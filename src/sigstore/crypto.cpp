// Small helpers over libcrypto for the sigstore module (digests, keys,
// signatures, certificate times and extensions); the table is the digest
// module's (digest/libcrypto.hpp).
#include <openssl/err.h>

#include <ctime>

#include "digest/digest.hpp"
#include "kernhub/error.hpp"
#include "sigstore/detail.hpp"

namespace kernhub::sigstore {

namespace {

struct MdCtxFree {
    void operator()(EVP_MD_CTX* ctx) const noexcept { crypto().md_ctx_free(ctx); }
};
struct PkeyCtxFree {
    void operator()(EVP_PKEY_CTX* ctx) const noexcept { crypto().pkey_ctx_free(ctx); }
};

}  // namespace

const CryptoApi& crypto() {
    return digest::libcrypto_for_verification();
}

// Only a bound libcrypto ever made these objects, so crypto() cannot throw here.
void PkeyFree::operator()(EVP_PKEY* key) const noexcept {
    if (key != nullptr) crypto().pkey_free(key);
}

void X509Free::operator()(X509* cert) const noexcept {
    if (cert != nullptr) crypto().x509_free(cert);
}

void fail(const char* step, const std::string& what) {
    throw Error(ErrorCode::verification, std::string("sigstore: ") + step + ": " + what);
}

Bytes sha256(const void* data, std::size_t size) {
    Bytes out(EVP_MAX_MD_SIZE);
    unsigned int length = 0;
    if (crypto().digest(data, size, out.data(), &length, crypto().sha256(), nullptr) != 1) {
        crypto().err_clear_error();
        throw Error(ErrorCode::internal, "OpenSSL could not compute a SHA-256; check the OpenSSL installation");
    }
    out.resize(length);
    return out;
}

Cert parse_cert(const Bytes& der) {
    const unsigned char* p = der.data();
    Cert cert(crypto().d2i_x509(nullptr, &p, static_cast<long>(der.size())));
    if (!cert || p != der.data() + der.size()) {
        crypto().err_clear_error();
        return nullptr;
    }
    return cert;
}

Pkey parse_public_key(const Bytes& der) {
    const unsigned char* p = der.data();
    Pkey key(crypto().d2i_pubkey(nullptr, &p, static_cast<long>(der.size())));
    if (!key || p != der.data() + der.size()) {
        crypto().err_clear_error();
        return nullptr;
    }
    return key;
}

Pkey parse_rsa_public_key(const Bytes& der) {
    const unsigned char* p = der.data();
    Pkey key(crypto().d2i_public_key(EVP_PKEY_RSA, nullptr, &p, static_cast<long>(der.size())));
    if (!key || p != der.data() + der.size()) {
        crypto().err_clear_error();
        return nullptr;
    }
    return key;
}

bool is_ed25519(const EVP_PKEY* key) {
    return crypto().pkey_base_id(key) == EVP_PKEY_ED25519;
}

bool is_ec(const EVP_PKEY* key) {
    return crypto().pkey_base_id(key) == EVP_PKEY_EC;
}

bool verify_message(EVP_PKEY* key, const EVP_MD* hash, const Bytes& signature, const void* message, std::size_t size) {
    std::unique_ptr<EVP_MD_CTX, MdCtxFree> ctx(crypto().md_ctx_new());
    bool ok = ctx && crypto().digest_verify_init(ctx.get(), nullptr, hash, nullptr, key) == 1 &&
              crypto().digest_verify(ctx.get(), signature.data(), signature.size(),
                                     static_cast<const unsigned char*>(message), size) == 1;
    crypto().err_clear_error();
    return ok;
}

bool verify_prehashed(EVP_PKEY* key, const Bytes& signature, const Bytes& digest) {
    std::unique_ptr<EVP_PKEY_CTX, PkeyCtxFree> ctx(crypto().pkey_ctx_new(key, nullptr));
    bool ok = ctx && crypto().pkey_verify_init(ctx.get()) == 1 &&
              crypto().pkey_verify(ctx.get(), signature.data(), signature.size(), digest.data(), digest.size()) == 1;
    crypto().err_clear_error();
    return ok;
}

std::int64_t unix_time(int year, int month, int day, int hour, int minute, int second) {
    // Days from the civil date (proleptic Gregorian), after H. Hinnant's algorithm.
    const int y = year - (month <= 2 ? 1 : 0);
    const int era = (y >= 0 ? y : y - 399) / 400;
    const int yoe = y - era * 400;
    const int doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1;
    const int doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    const std::int64_t days = std::int64_t{era} * 146097 + doe - 719468;
    return days * 86400 + std::int64_t{hour} * 3600 + std::int64_t{minute} * 60 + second;
}

std::string when(std::int64_t unix_seconds) {
    return format_time(unix_seconds) + " (" + std::to_string(unix_seconds) + ")";
}

std::string hex(const Bytes& bytes) {
    return digest::to_hex(bytes);
}

std::string format_time(std::int64_t unix_seconds) {
    std::time_t t = static_cast<std::time_t>(unix_seconds);
    std::tm tm{};
    if (gmtime_r(&t, &tm) == nullptr) return std::to_string(unix_seconds);
    char text[32];
    if (std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0) return std::to_string(unix_seconds);
    return text;
}

static std::optional<std::int64_t> asn1_unix(const ASN1_TIME* time) {
    std::tm tm{};
    if (time == nullptr || crypto().asn1_time_to_tm(time, &tm) != 1) {
        crypto().err_clear_error();
        return std::nullopt;
    }
    return unix_time(tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

std::optional<std::int64_t> not_before(const X509* cert) {
    return asn1_unix(crypto().get0_not_before(cert));
}

std::optional<std::int64_t> not_after(const X509* cert) {
    return asn1_unix(crypto().get0_not_after(cert));
}

std::optional<Bytes> extension_value(const X509* cert, const char* oid) {
    const int count = crypto().get_ext_count(cert);
    for (int i = 0; i < count; ++i) {
        X509_EXTENSION* ext = crypto().get_ext(cert, i);
        char text[80];
        int n = crypto().obj2txt(text, sizeof text, crypto().extension_object(ext), 1);
        if (n <= 0 || static_cast<std::size_t>(n) >= sizeof text || std::string_view(text) != oid) continue;
        const ASN1_OCTET_STRING* data = crypto().extension_data(ext);
        const unsigned char* bytes = crypto().string_data(data);
        return Bytes(bytes, bytes + crypto().string_length(data));
    }
    return std::nullopt;
}

}  // namespace kernhub::sigstore
