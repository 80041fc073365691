#include "digest/libcrypto.hpp"

#include "common/dynlib.hpp"
#include "kernhub/error.hpp"

namespace kernhub::digest {

namespace {

// Resolves the entry points only verification uses. A library that lacks
// one still hashes: the first lacking symbol's Error is kept for
// libcrypto_for_verification to throw, and the rest are not looked up.
class VerificationResolver {
public:
    explicit VerificationResolver(const dynlib::Library& library) : m_library(library) {
        m_library.needed_for = "to verify Sigstore signatures";
    }

    template <class Fn>
    void operator()(const char* symbol, Fn& slot) {
        if (m_missing) return;
        try {
            dynlib::resolve(m_library, symbol, slot);
        } catch (const Error&) {
            m_missing = std::current_exception();
        }
    }

    // A symbol OpenSSL 3 renamed: the new name first, then the 1.1 one.
    template <class Fn>
    void renamed(const char* name3, const char* name11, Fn& slot) {
        if (m_missing || dynlib::resolve_optional(m_library, name3, slot)) return;
        (*this)(name11, slot);
    }

    std::exception_ptr missing() const { return m_missing; }

private:
    dynlib::Library m_library;
    std::exception_ptr m_missing;
};

void bind_hashing(const dynlib::Library& lib, LibCrypto& api) {
    dynlib::resolve(lib, "EVP_MD_CTX_new", api.md_ctx_new);
    dynlib::resolve(lib, "EVP_MD_CTX_free", api.md_ctx_free);
    dynlib::resolve(lib, "EVP_DigestInit_ex", api.digest_init);
    dynlib::resolve(lib, "EVP_DigestUpdate", api.digest_update);
    dynlib::resolve(lib, "EVP_DigestFinal_ex", api.digest_final);
    dynlib::resolve(lib, "EVP_sha1", api.sha1);
    dynlib::resolve(lib, "EVP_sha256", api.sha256);
    dynlib::resolve(lib, "EVP_sha512", api.sha512);
    dynlib::resolve(lib, "ERR_get_error", api.err_get_error);
    dynlib::resolve(lib, "ERR_error_string", api.err_error_string);
    dynlib::resolve(lib, "ERR_clear_error", api.err_clear_error);
}

void bind_signatures(VerificationResolver& resolve, LibCrypto& api) {
    resolve("EVP_Digest", api.digest);
    resolve("EVP_sha384", api.sha384);
    resolve("EVP_DigestVerifyInit", api.digest_verify_init);
    resolve("EVP_DigestVerify", api.digest_verify);
    resolve("EVP_PKEY_CTX_new", api.pkey_ctx_new);
    resolve("EVP_PKEY_CTX_free", api.pkey_ctx_free);
    resolve("EVP_PKEY_verify_init", api.pkey_verify_init);
    resolve("EVP_PKEY_verify", api.pkey_verify);
    resolve("EVP_PKEY_free", api.pkey_free);
    resolve("d2i_PUBKEY", api.d2i_pubkey);
    resolve("d2i_PublicKey", api.d2i_public_key);
    resolve.renamed("EVP_PKEY_get_base_id", "EVP_PKEY_base_id", api.pkey_base_id);
}

void bind_certificates(VerificationResolver& resolve, LibCrypto& api) {
    resolve("d2i_X509", api.d2i_x509);
    resolve("X509_free", api.x509_free);
    resolve("X509_dup", api.x509_dup);
    resolve("X509_get0_notBefore", api.get0_not_before);
    resolve("X509_get0_notAfter", api.get0_not_after);
    resolve("ASN1_TIME_to_tm", api.asn1_time_to_tm);
    resolve("X509_get0_pubkey", api.get0_pubkey);
    resolve("X509_get_X509_PUBKEY", api.get_x509_pubkey);
    resolve("i2d_X509_PUBKEY", api.i2d_x509_pubkey);
    resolve("X509_get_ext_count", api.get_ext_count);
    resolve("X509_get_ext", api.get_ext);
    resolve("X509_get_ext_by_NID", api.get_ext_by_nid);
    resolve("X509_delete_ext", api.delete_ext);
    resolve("X509_EXTENSION_free", api.extension_free);
    resolve("X509_EXTENSION_get_object", api.extension_object);
    resolve("X509_EXTENSION_get_data", api.extension_data);
    resolve("OBJ_obj2txt", api.obj2txt);
    resolve("ASN1_STRING_get0_data", api.string_data);
    resolve("ASN1_STRING_length", api.string_length);
    resolve("X509_get_ext_d2i", api.get_ext_d2i);
    resolve("GENERAL_NAMES_free", api.general_names_free);
    resolve("X509_get_extended_key_usage", api.extended_key_usage);
    resolve("X509_get_key_usage", api.key_usage);
    resolve("X509_get_extension_flags", api.extension_flags);
    resolve("i2d_re_X509_tbs", api.i2d_re_tbs);
}

void bind_chains(VerificationResolver& resolve, LibCrypto& api) {
    resolve("X509_STORE_new", api.store_new);
    resolve("X509_STORE_free", api.store_free);
    resolve("X509_STORE_add_cert", api.store_add_cert);
    resolve("X509_STORE_CTX_new", api.store_ctx_new);
    resolve("X509_STORE_CTX_free", api.store_ctx_free);
    resolve("X509_STORE_CTX_init", api.store_ctx_init);
    resolve("X509_STORE_CTX_set_time", api.store_ctx_set_time);
    resolve("X509_STORE_CTX_get_error", api.store_ctx_get_error);
    resolve("X509_STORE_CTX_get_error_depth", api.store_ctx_get_error_depth);
    resolve("X509_STORE_CTX_get0_chain", api.store_ctx_get0_chain);
    resolve("X509_verify_cert", api.verify_cert);
    resolve("X509_verify_cert_error_string", api.verify_cert_error_string);
    resolve("OPENSSL_sk_new_null", api.sk_new_null);
    resolve("OPENSSL_sk_push", api.sk_push);
    resolve("OPENSSL_sk_free", api.sk_free);
    resolve("OPENSSL_sk_num", api.sk_num);
    resolve("OPENSSL_sk_value", api.sk_value);
}

LibCrypto bind_libcrypto() {
    const dynlib::Library lib = dynlib::open_first(
        {"libcrypto.so.3", "libcrypto.so.1.1"}, "to hash downloads and verify cached files and Sigstore signatures",
        "install OpenSSL's libcrypto (libssl3 on Debian, openssl-libs elsewhere)");
    LibCrypto api;
    bind_hashing(lib, api);
    VerificationResolver resolve(lib);
    bind_signatures(resolve, api);
    bind_certificates(resolve, api);
    bind_chains(resolve, api);
    api.verification_missing = resolve.missing();
    return api;
}

}  // namespace

const LibCrypto& libcrypto() {
    return dynlib::bound<LibCrypto, bind_libcrypto>();
}

const LibCrypto& libcrypto_for_verification() {
    const LibCrypto& api = libcrypto();
    if (api.verification_missing) std::rethrow_exception(api.verification_missing);
    return api;
}

}  // namespace kernhub::digest
