// verify_bundle: the verification steps in the order sigstore.hpp lists them
// (docs/trust.md, "How signatures are verified"). Every check that reads the leaf
// certificate, the log entry or the trusted root lives here; the bundle's
// shape was checked by parse_bundle first.
#include <algorithm>
#include <climits>

#include "common/hint.hpp"
#include "common/lines.hpp"
#include "digest/digest.hpp"
#include "kernhub/error.hpp"
#include "sigstore/bundle.hpp"
#include "sigstore/detail.hpp"
#include "sigstore/transparency_log.hpp"

namespace kernhub::sigstore {

namespace {

constexpr const char* k_oid_issuer_v2 = "1.3.6.1.4.1.57264.1.8";
constexpr const char* k_oid_issuer_v1 = "1.3.6.1.4.1.57264.1.1";
constexpr const char* k_oid_repository = "1.3.6.1.4.1.57264.1.12";
constexpr const char* k_oid_sct_list = "1.3.6.1.4.1.11129.2.4.2";
// SCTs in one certificate's list.
constexpr std::size_t k_max_scts = 16;

struct StoreFree {
    void operator()(X509_STORE* store) const noexcept { crypto().store_free(store); }
};
struct StoreCtxFree {
    void operator()(X509_STORE_CTX* ctx) const noexcept { crypto().store_ctx_free(ctx); }
};
struct StackFree {
    void operator()(OPENSSL_STACK* stack) const noexcept { crypto().sk_free(stack); }
};

// ---- certificate-chain, certificate-validity -------------------------------

void check_validity(const X509* leaf, std::int64_t t) {
    auto from = not_before(leaf);
    auto to = not_after(leaf);
    if (!from || !to) fail("certificate-validity", "the leaf certificate's validity times cannot be read");
    if (t < *from || t > *to) {
        fail("certificate-validity", "the leaf certificate was valid from " + when(*from) + " to " + when(*to) +
                                         ", but the log integrated the entry at " + when(t) +
                                         "; the signature was not logged while its certificate was valid");
    }
}

// No CA of `root` issued the leaf: fail()'s "sigstore: STEP: " form, with
// the setting the advice names as the hint.
[[noreturn]] void fail_foreign_chain(const TrustedRoot& root, const std::string& reasons) {
    throw Error(ErrorCode::verification,
                "sigstore: certificate-chain: the leaf certificate does not chain to a Fulcio CA of " + root.origin +
                    " (" + reasons +
                    "); the bundle comes from another Sigstore instance (staging, private) or was altered: use that "
                    "instance's trusted root",
                hint::setting("sigstore_trusted_root"));
}

// The leaf chains to a Fulcio CA of the root valid at `t`, checked at time
// `t` (Fulcio certificates live minutes; the log's time is when they were
// used). Returns the certificate that issued the leaf.
std::shared_ptr<X509> verify_chain(X509* leaf, const TrustedRoot& root, std::int64_t t) {
    const std::uint32_t eku = crypto().extended_key_usage(leaf);
    if (eku == UINT32_MAX || (eku & XKU_CODE_SIGN) == 0) {
        fail("certificate-chain",
             "the leaf certificate is not for code signing (no codeSigning extended key "
             "usage); it is not a Fulcio signing certificate");
    }
    // A Fulcio leaf signs, and nothing else: a CA certificate, or one whose
    // key usage leaves out digital signatures, is not one even when a
    // trusted CA issued it.
    const std::uint32_t key_usage = crypto().key_usage(leaf);
    if ((crypto().extension_flags(leaf) & EXFLAG_CA) != 0 || key_usage == UINT32_MAX ||
        (key_usage & KU_DIGITAL_SIGNATURE) == 0) {
        fail("certificate-chain",
             "the leaf certificate is a CA certificate or lacks the digitalSignature key usage; it is not a "
             "Fulcio signing certificate");
    }
    std::string reasons;
    bool any_valid = false;
    for (const Authority& ca : root.cas) {
        if (!ca.valid.covers(t)) continue;
        any_valid = true;
        std::unique_ptr<X509_STORE, StoreFree> store(crypto().store_new());
        std::unique_ptr<OPENSSL_STACK, StackFree> untrusted(crypto().sk_new_null());
        std::unique_ptr<X509_STORE_CTX, StoreCtxFree> ctx(crypto().store_ctx_new());
        if (!store || !untrusted || !ctx || crypto().store_add_cert(store.get(), ca.chain.back().get()) != 1) {
            crypto().err_clear_error();
            throw Error(ErrorCode::internal, "OpenSSL could not set up a certificate check; check the installation");
        }
        for (std::size_t i = 0; i + 1 < ca.chain.size(); ++i) crypto().sk_push(untrusted.get(), ca.chain[i].get());
        if (crypto().store_ctx_init(ctx.get(), store.get(), leaf, reinterpret_cast<STACK_OF(X509)*>(untrusted.get())) !=
            1) {
            crypto().err_clear_error();
            throw Error(ErrorCode::internal, "OpenSSL could not set up a certificate check; check the installation");
        }
        crypto().store_ctx_set_time(ctx.get(), 0, static_cast<time_t>(t));
        if (crypto().verify_cert(ctx.get()) == 1) {
            const auto* chain = reinterpret_cast<const OPENSSL_STACK*>(crypto().store_ctx_get0_chain(ctx.get()));
            const void* issuer = crypto().sk_num(chain) > 1 ? crypto().sk_value(chain, 1) : nullptr;
            for (const auto& cert : ca.chain) {
                if (cert.get() == issuer) return cert;
            }
            throw Error(ErrorCode::internal, "the verified chain's issuer is not in the CA's chain; please report it");
        }
        const int error = crypto().store_ctx_get_error(ctx.get());
        crypto().err_clear_error();
        if (crypto().store_ctx_get_error_depth(ctx.get()) == 0 &&
            (error == X509_V_ERR_CERT_HAS_EXPIRED || error == X509_V_ERR_CERT_NOT_YET_VALID)) {
            check_validity(leaf, t);  // names both times
        }
        reasons += std::string(reasons.empty() ? "" : "; ") + (ca.uri.empty() ? "a CA" : ca.uri) + ": " +
                   crypto().verify_cert_error_string(error);
    }
    if (!any_valid) {
        fail("certificate-chain", "no certificate authority of " + root.origin + " was valid at the log time " +
                                      when(t) + "; use the trusted root of the instance that signed");
    }
    fail_foreign_chain(root, reasons);
}

// ---- sct -------------------------------------------------------------------

// A bounds-checked reader of big-endian TLS structures.
struct Reader {
    const std::uint8_t* p;
    const std::uint8_t* end;
    bool ok = true;

    std::uint64_t number(int bytes) {
        std::uint64_t v = 0;
        if (end - p < bytes) {
            ok = false;
            return 0;
        }
        for (int i = 0; i < bytes; ++i) v = (v << 8) | *p++;
        return v;
    }
    Bytes take(std::size_t n) {
        if (static_cast<std::size_t>(end - p) < n) {
            ok = false;
            return {};
        }
        Bytes out(p, p + n);
        p += n;
        return out;
    }
};

// The DER value of a TLV with tag `tag` spanning all of `der`.
std::optional<Bytes> der_value(const Bytes& der, std::uint8_t tag) {
    if (der.size() < 2 || der[0] != tag) return std::nullopt;
    std::size_t length = der[1];
    std::size_t header = 2;
    if (length == 0x81 || length == 0x82) {
        const std::size_t n = length - 0x80;
        if (der.size() < 2 + n) return std::nullopt;
        length = 0;
        for (std::size_t i = 0; i < n; ++i) length = (length << 8) | der[2 + i];
        header += n;
    } else if (length > 0x7f) {
        return std::nullopt;
    }
    if (der.size() != header + length) return std::nullopt;
    return Bytes(der.begin() + static_cast<std::ptrdiff_t>(header), der.end());
}

// The precertificate's TBSCertificate: the leaf's TBS without the SCT list.
Bytes precert_tbs(const X509* leaf) {
    Cert copy(crypto().x509_dup(leaf));
    if (!copy) throw Error(ErrorCode::internal, "OpenSSL could not copy a certificate; check the installation");
    const int index = crypto().get_ext_by_nid(copy.get(), NID_ct_precert_scts, -1);
    if (index >= 0) crypto().extension_free(crypto().delete_ext(copy.get(), index));
    const int length = crypto().i2d_re_tbs(copy.get(), nullptr);
    if (length <= 0) fail("sct", "the leaf certificate cannot be re-encoded without its SCT list");
    Bytes out(static_cast<std::size_t>(length));
    unsigned char* p = out.data();
    crypto().i2d_re_tbs(copy.get(), &p);
    return out;
}

Bytes key_hash(X509* issuer) {
    X509_PUBKEY* key = crypto().get_x509_pubkey(issuer);
    const int length = crypto().i2d_x509_pubkey(key, nullptr);
    if (length <= 0) fail("sct", "the issuing CA's public key cannot be encoded");
    Bytes der(static_cast<std::size_t>(length));
    unsigned char* p = der.data();
    crypto().i2d_x509_pubkey(key, &p);
    return sha256(der);
}

const EVP_MD* sct_hash(std::uint64_t id) {
    switch (id) {
        case 4:
            return crypto().sha256();
        case 5:
            return crypto().sha384();
        case 6:
            return crypto().sha512();
        default:
            return nullptr;
    }
}

// RFC 6962 section 3.2: the SCT signs the precertificate entry (issuer key
// hash and the TBS without the SCT list).
void verify_sct(X509* leaf, X509* issuer, const TrustedRoot& root) {
    auto ext = extension_value(leaf, k_oid_sct_list);
    auto list = ext ? der_value(*ext, 0x04) : std::nullopt;
    if (!list) fail("sct", "the leaf certificate carries no readable embedded SCT list; it was not logged to CT");
    Reader outer{list->data(), list->data() + list->size()};
    const std::uint64_t total = outer.number(2);
    if (!outer.ok || total != list->size() - 2) fail("sct", "the leaf certificate's SCT list is malformed");
    const Bytes tbs = precert_tbs(leaf);
    const Bytes issuer_hash = key_hash(issuer);
    std::string reasons;
    for (std::size_t n = 0; outer.p < outer.end && n < k_max_scts; ++n) {
        const std::uint64_t length = outer.number(2);
        Bytes one = outer.take(length);
        Reader r{one.data(), one.data() + one.size()};
        const std::uint64_t version = r.number(1);
        const Bytes log_id = r.take(32);
        const std::uint64_t timestamp_ms = r.number(8);
        const std::uint64_t ext_length = r.number(2);
        const Bytes extensions = r.take(ext_length);
        const std::uint64_t hash_id = r.number(1);
        r.number(1);  // the signature algorithm: the log's key decides
        const Bytes signature = r.take(r.number(2));
        if (!outer.ok || !r.ok || r.p != r.end || version != 0) {
            fail("sct", "the leaf certificate's SCT list is malformed");
        }
        const LogKey* log = nullptr;
        for (const auto& candidate : root.ctlogs) {
            if (candidate.key_id == log_id) log = &candidate;
        }
        const auto t = static_cast<std::int64_t>(timestamp_ms / 1000);
        if (log == nullptr) {
            reasons += "; SCT from unknown CT log " + hex(log_id);
            continue;
        }
        if (!log->valid.covers(t)) {
            reasons += "; CT log " + hex(log_id) + " was not valid at the SCT time " + when(t);
            continue;
        }
        Bytes signed_data{0, 0};  // version v1, signature_type certificate_timestamp
        for (int i = 7; i >= 0; --i) signed_data.push_back(static_cast<std::uint8_t>(timestamp_ms >> (8 * i)));
        signed_data.insert(signed_data.end(), {0, 1});  // entry_type precert_entry
        signed_data.insert(signed_data.end(), issuer_hash.begin(), issuer_hash.end());
        signed_data.push_back(static_cast<std::uint8_t>(tbs.size() >> 16));
        signed_data.push_back(static_cast<std::uint8_t>(tbs.size() >> 8));
        signed_data.push_back(static_cast<std::uint8_t>(tbs.size()));
        signed_data.insert(signed_data.end(), tbs.begin(), tbs.end());
        signed_data.push_back(static_cast<std::uint8_t>(extensions.size() >> 8));
        signed_data.push_back(static_cast<std::uint8_t>(extensions.size()));
        signed_data.insert(signed_data.end(), extensions.begin(), extensions.end());
        const EVP_MD* hash = log->hash == nullptr ? nullptr : sct_hash(hash_id);
        if ((log->hash == nullptr || hash != nullptr) &&
            verify_message(log->key.get(), hash, signature, signed_data.data(), signed_data.size())) {
            return;
        }
        reasons += "; the SCT signature of CT log " + hex(log_id) + " does not verify";
    }
    fail("sct", "no SCT of the leaf certificate verifies against a CT log of " + root.origin + " (" +
                    (reasons.empty() ? std::string("the list is empty") : reasons.substr(2)) +
                    "); the certificate was altered or comes from another Sigstore instance");
}

// ---- identity policy -------------------------------------------------------

std::optional<std::string> utf8_extension(const X509* leaf, const char* oid, const char* step) {
    auto raw = extension_value(leaf, oid);
    if (!raw) return std::nullopt;
    auto value = der_value(*raw, 0x0c);  // UTF8String
    if (!value) fail(step, std::string("the certificate's extension ") + oid + " is not a UTF8String");
    return std::string(value->begin(), value->end());
}

// The OIDC issuer: extension .1.8, or the legacy .1.1. A certificate with
// both must say the same in each (the Python kernels library requires both
// to match its issuer), or neither is believed.
std::string issuer_of(const X509* leaf) {
    const std::optional<std::string> v2 = utf8_extension(leaf, k_oid_issuer_v2, "issuer");
    std::optional<std::string> v1;
    if (auto raw = extension_value(leaf, k_oid_issuer_v1)) v1 = std::string(raw->begin(), raw->end());
    if (v1 && v2 && *v1 != *v2) {
        fail("issuer", "the certificate's two OIDC issuer extensions disagree (\"" + *v2 + "\" in " + k_oid_issuer_v2 +
                           ", \"" + *v1 + "\" in " + k_oid_issuer_v1 + "); it is not a Fulcio certificate");
    }
    return v2 ? *v2 : v1.value_or("");
}

std::vector<std::string> san_identities(X509* leaf) {
    std::vector<std::string> out;
    auto* names = static_cast<GENERAL_NAMES*>(crypto().get_ext_d2i(leaf, NID_subject_alt_name, nullptr, nullptr));
    if (names == nullptr) return out;
    const auto* stack = reinterpret_cast<const OPENSSL_STACK*>(names);
    // Fulcio puts exactly one name in a certificate; with several, which
    // one signed would be a guess.
    if (crypto().sk_num(stack) != 1) {
        const int count = crypto().sk_num(stack);
        crypto().general_names_free(names);
        fail("identity", "the certificate names " + std::to_string(count) +
                             " subject alternative names; a Fulcio certificate names exactly one identity");
    }
    for (int i = 0; i < crypto().sk_num(stack); ++i) {
        const auto* name = static_cast<const GENERAL_NAME*>(crypto().sk_value(stack, i));
        const ASN1_STRING* value = nullptr;
        if (name->type == GEN_URI) value = name->d.uniformResourceIdentifier;
        if (name->type == GEN_EMAIL) value = name->d.rfc822Name;
        if (value == nullptr) continue;
        const unsigned char* data = crypto().string_data(value);
        out.emplace_back(reinterpret_cast<const char*>(data), static_cast<std::size_t>(crypto().string_length(value)));
    }
    crypto().general_names_free(names);
    return out;
}

std::string joined(const std::vector<std::string>& items) {
    std::string out;
    for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
    return out.empty() ? "none" : out;
}

void apply_policy(X509* leaf, const Policy& policy, Verified& out) {
    out.issuer = issuer_of(leaf);
    if (policy.issuer.empty() || out.issuer != policy.issuer) {
        fail("issuer", "the certificate's OIDC issuer is \"" + out.issuer + "\", not the expected \"" + policy.issuer +
                           "\"; the signer logged in elsewhere than the policy allows");
    }
    const std::vector<std::string> sans = san_identities(leaf);
    for (const auto& san : sans) {
        if (std::find(policy.identities.begin(), policy.identities.end(), san) != policy.identities.end()) {
            out.identity = san;
            break;
        }
    }
    if (out.identity.empty()) {
        fail("identity", "the certificate's identity (" + joined(sans) + ") is none of the allowed (" +
                             joined(policy.identities) + "); the artifact was signed by someone else");
    }
    std::optional<std::string> repository;
    try {
        repository = utf8_extension(leaf, k_oid_repository, "repository");
    } catch (const Error&) {
        if (!policy.repository.empty()) throw;  // unreadable matters only when checked
    }
    out.repository = repository.value_or("");
    if (policy.repository.empty()) return;
    const std::string expected = policy.repository.find("://") != std::string::npos
                                     ? policy.repository
                                     : "https://github.com/" + policy.repository;
    if (out.repository != expected) {
        fail("repository", "the certificate's source repository is \"" + out.repository + "\", not \"" + expected +
                               "\"; the artifact was built from another repository");
    }
}

}  // namespace

Verified verify_bundle(std::string_view bundle_json, const ArtifactDigest& artifact, const TrustedRoot& root,
                       const Policy& policy) {
    if (artifact.sha256.size() != 32) {
        throw Error(ErrorCode::internal, "verify_bundle needs the artifact's SHA-256 (32 bytes); please report it");
    }
    const Bundle bundle = parse_bundle(bundle_json);
    Cert leaf = parse_cert(bundle.leaf_der);
    if (!leaf) fail("bundle", "the bundle's certificate is not a DER X.509 certificate");
    const TlogEntry& entry = bundle.entry;
    const std::int64_t t = entry.integrated_time;

    const std::shared_ptr<X509> issuer = verify_chain(leaf.get(), root, t);
    check_validity(leaf.get(), t);
    verify_sct(leaf.get(), issuer.get(), root);
    const LogKey& log = verify_set(entry, root);
    if (entry.proof) {
        verify_inclusion(entry);
        verify_checkpoint(entry, log);
    }
    check_body(bundle);
    // RFC 3161 timestamps next to a signed log entry are neither checked nor
    // relied on: every check above used the log's integrated time, which
    // the SET signs (docs/trust.md, "Signatures").
    EVP_PKEY* key = crypto().get0_pubkey(leaf.get());
    if (key == nullptr || !is_ec(key)) {
        fail("signature", "the leaf certificate's key is not an ECDSA key; kernhub verifies ECDSA signatures only");
    }
    if (!verify_prehashed(key, bundle.signature, bundle.digest)) {
        fail("signature",
             "the bundle's signature does not verify with the leaf certificate's key; the bundle "
             "was altered");
    }
    if (bundle.digest != artifact.sha256) {
        fail("artifact-digest", "the artifact's SHA-256 " + hex(artifact.sha256) + " is not the signed digest " +
                                    hex(bundle.digest) +
                                    "; the file was changed after signing, or the bundle "
                                    "belongs to another file");
    }
    Verified out;
    out.log_time = t;
    out.log_index = entry.log_index;
    out.log_id = hex(entry.log_id);
    apply_policy(leaf.get(), policy, out);
    return out;
}

}  // namespace kernhub::sigstore
