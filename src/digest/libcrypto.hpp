// libcrypto, the one binding of OpenSSL in kernhub. The digest module owns
// it; the sigstore module verifies through the same table
// (sigstore/detail.hpp). Bound at run time on first use (common/dynlib.hpp):
// a process that neither hashes nor verifies never maps libcrypto
// (docs/embedding.md, "Start-up cost and the network stack"). The
// pointer types come from OpenSSL's headers (decltype(&::NAME)), so they
// cannot drift from the library's signatures; macros of those headers
// (sk_X509_*) are reached through the functions they expand to
// (OPENSSL_sk_*).
#pragma once

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <exception>

namespace kernhub::digest {

struct LibCrypto {
    // ---- hashing and the error queue: every function here has had this
    // signature since OpenSSL 1.1.0, so 1.1 serves as well as 3.
    decltype(&::EVP_MD_CTX_new) md_ctx_new = nullptr;
    decltype(&::EVP_MD_CTX_free) md_ctx_free = nullptr;
    decltype(&::EVP_DigestInit_ex) digest_init = nullptr;
    decltype(&::EVP_DigestUpdate) digest_update = nullptr;
    decltype(&::EVP_DigestFinal_ex) digest_final = nullptr;
    decltype(&::EVP_sha1) sha1 = nullptr;
    decltype(&::EVP_sha256) sha256 = nullptr;
    decltype(&::EVP_sha512) sha512 = nullptr;
    decltype(&::ERR_get_error) err_get_error = nullptr;
    decltype(&::ERR_error_string) err_error_string = nullptr;
    decltype(&::ERR_clear_error) err_clear_error = nullptr;

    // ---- verification (sigstore): present when verification_missing is
    // null (libcrypto_for_verification checks it).
    // Digests and signatures.
    decltype(&::EVP_Digest) digest = nullptr;
    decltype(&::EVP_sha384) sha384 = nullptr;
    decltype(&::EVP_DigestVerifyInit) digest_verify_init = nullptr;
    decltype(&::EVP_DigestVerify) digest_verify = nullptr;
    decltype(&::EVP_PKEY_CTX_new) pkey_ctx_new = nullptr;
    decltype(&::EVP_PKEY_CTX_free) pkey_ctx_free = nullptr;
    decltype(&::EVP_PKEY_verify_init) pkey_verify_init = nullptr;
    decltype(&::EVP_PKEY_verify) pkey_verify = nullptr;
    // Keys.
    decltype(&::EVP_PKEY_free) pkey_free = nullptr;
    decltype(&::d2i_PUBKEY) d2i_pubkey = nullptr;
    decltype(&::d2i_PublicKey) d2i_public_key = nullptr;
    // EVP_PKEY_get_base_id in OpenSSL 3, EVP_PKEY_base_id in 1.1.
    int (*pkey_base_id)(const EVP_PKEY*) = nullptr;
    // Certificates, their times and extensions.
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
    // Chains.
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

    // The Error(internal) naming the first verification entry point the
    // library lacks (OpenSSL 1.1.0 has no ASN1_TIME_to_tm, for one); null
    // when it has them all. Such a library still hashes.
    std::exception_ptr verification_missing;
};

// The table, bound on the first call of the process: libcrypto.so.3, else
// libcrypto.so.1.1. Throws Error(internal) naming the sonames tried and
// what to install when neither opens, or the hashing entry point the
// library lacks; the same Error on every later call.
const LibCrypto& libcrypto();

// libcrypto() with every verification entry point present; throws
// verification_missing otherwise.
const LibCrypto& libcrypto_for_verification();

}  // namespace kernhub::digest
