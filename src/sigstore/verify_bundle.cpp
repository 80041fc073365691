// verify_bundle: the verification steps in the order sigstore.hpp lists them
// (docs/ARCHITECTURE.md, "Signatures"). Every check that reads the leaf
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

namespace kernhub::sigstore {

namespace {

constexpr const char* k_oid_issuer_v2 = "1.3.6.1.4.1.57264.1.8";
constexpr const char* k_oid_issuer_v1 = "1.3.6.1.4.1.57264.1.1";
constexpr const char* k_oid_repository = "1.3.6.1.4.1.57264.1.12";
constexpr const char* k_oid_sct_list = "1.3.6.1.4.1.11129.2.4.2";
// SCTs in one certificate's list.
constexpr std::size_t k_max_scts = 16;

std::string hex(const Bytes& bytes) {
    return digest::to_hex(bytes);
}

std::string when(std::int64_t t) {
    return format_time(t) + " (" + std::to_string(t) + ")";
}

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
    // fail()'s "sigstore: STEP: " form, with the setting the advice names.
    throw Error(ErrorCode::verification,
                "sigstore: certificate-chain: the leaf certificate does not chain to a Fulcio CA of " + root.origin +
                    " (" + reasons +
                    "); the bundle comes from another Sigstore instance (staging, private) or was altered: use that "
                    "instance's trusted root",
                hint::setting("sigstore_trusted_root"));
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

// ---- tlog-entry ------------------------------------------------------------

const LogKey& verify_set(const TlogEntry& entry, const TrustedRoot& root) {
    const LogKey* log = nullptr;
    for (const auto& candidate : root.tlogs) {
        if (candidate.key_id == entry.log_id) log = &candidate;
    }
    if (log == nullptr) {
        fail("tlog-entry", "the entry's log " + hex(entry.log_id) + " is not a transparency log of " + root.origin +
                               "; use the trusted root of the instance that signed");
    }
    if (!log->valid.covers(entry.integrated_time)) {
        fail("tlog-entry", "the log " + hex(entry.log_id) + " of " + root.origin + " was not valid at " +
                               when(entry.integrated_time) + "; the entry's time is outside its key's validity");
    }
    const nlohmann::json payload = {{"body", entry.body_base64},
                                    {"integratedTime", entry.integrated_time},
                                    {"logID", hex(entry.log_id)},
                                    {"logIndex", entry.log_index}};
    const std::string text = payload.dump();  // sorted keys, no spaces: the canonical form Rekor signed
    if (!verify_message(log->key.get(), log->hash, entry.set, text.data(), text.size())) {
        fail("tlog-entry", "the signed entry timestamp of log entry " + std::to_string(entry.log_index) +
                               " does not verify with the key of log " + hex(entry.log_id) +
                               "; the entry was altered or swapped");
    }
    return *log;
}

// ---- inclusion-proof, checkpoint -------------------------------------------

Bytes node_hash(const Bytes& left, const Bytes& right) {
    Bytes data{1};
    data.insert(data.end(), left.begin(), left.end());
    data.insert(data.end(), right.begin(), right.end());
    return sha256(data);
}

// RFC 9162 section 2.1.3.2.
void verify_inclusion(const TlogEntry& entry) {
    const InclusionProof& proof = *entry.proof;
    if (proof.log_index >= proof.tree_size) {
        fail("inclusion-proof", "the proof's leaf index " + std::to_string(proof.log_index) +
                                    " is not inside its tree of size " + std::to_string(proof.tree_size));
    }
    Bytes leaf{0};
    leaf.insert(leaf.end(), entry.body.begin(), entry.body.end());
    Bytes r = sha256(leaf);
    auto fn = static_cast<std::uint64_t>(proof.log_index);
    auto sn = static_cast<std::uint64_t>(proof.tree_size - 1);
    for (const Bytes& p : proof.hashes) {
        if (sn == 0) fail("inclusion-proof", "the proof has more hashes than its tree needs");
        if ((fn & 1) != 0 || fn == sn) {
            r = node_hash(p, r);
            while ((fn & 1) == 0 && fn != 0) {
                fn >>= 1;
                sn >>= 1;
            }
        } else {
            r = node_hash(r, p);
        }
        fn >>= 1;
        sn >>= 1;
    }
    if (sn != 0 || r != proof.root_hash) {
        fail("inclusion-proof", "the audit path of log entry " + std::to_string(entry.log_index) +
                                    " does not hash to the proof's root hash " + hex(proof.root_hash) +
                                    "; the entry or the proof was altered");
    }
}

// A signed note: body lines, a blank line, "— <name> <base64(key hint || signature)>" lines.
void verify_checkpoint(const TlogEntry& entry, const LogKey& log) {
    const InclusionProof& proof = *entry.proof;
    const std::string& note = proof.checkpoint;
    const std::size_t blank = note.find("\n\n");
    if (blank == std::string::npos) fail("checkpoint", "the checkpoint is not a signed note (no blank line)");
    const std::string body = note.substr(0, blank + 1);
    const std::vector<std::string> lines = split_lines(body);
    if (lines.size() < 3) fail("checkpoint", "the checkpoint has fewer than three lines (origin, size, root hash)");
    const std::string size_text = std::to_string(proof.tree_size);
    if (lines[1] != size_text) {
        fail("checkpoint", "the checkpoint's tree size " + lines[1] + " is not the proof's " + size_text);
    }
    auto root_hash = digest::from_base64(lines[2]);
    if (!root_hash || *root_hash != proof.root_hash) {
        fail("checkpoint", "the checkpoint's root hash " + lines[2] + " is not the proof's root hash");
    }
    static const std::string dash = "\xE2\x80\x94 ";  // U+2014 EM DASH, then a space
    for (const std::string& line : split_lines(note.substr(blank + 2))) {
        if (line.compare(0, dash.size(), dash) != 0) continue;
        const std::size_t space = line.rfind(' ');
        auto raw = digest::from_base64(line.substr(space + 1));
        if (!raw || raw->size() <= 4 || log.key_id.size() < 4 ||
            !std::equal(raw->begin(), raw->begin() + 4, log.key_id.begin())) {
            continue;  // another signer's line
        }
        const Bytes signature(raw->begin() + 4, raw->end());
        if (verify_message(log.key.get(), log.hash, signature, body.data(), body.size())) return;
        fail("checkpoint", "the checkpoint's signature does not verify with the key of log " + hex(log.key_id) +
                               "; the checkpoint was altered");
    }
    fail("checkpoint", "the checkpoint carries no signature by log " + hex(log.key_id) +
                           "; the proof does not come from the log that holds the entry");
}

// ---- tlog-body --------------------------------------------------------------

std::optional<Bytes> pem_certificate(const std::string& pem) {
    static const std::string begin = "-----BEGIN CERTIFICATE-----";
    static const std::string end = "-----END CERTIFICATE-----";
    const std::size_t from = pem.find(begin);
    const std::size_t to = pem.find(end);
    if (from == std::string::npos || to == std::string::npos || to < from) return std::nullopt;
    std::string text;
    for (std::size_t i = from + begin.size(); i < to; ++i) {
        if (pem[i] != '\n' && pem[i] != '\r' && pem[i] != ' ') text.push_back(pem[i]);
    }
    return digest::from_base64(text);
}

// The body Rekor logged must be about this signature, digest and
// certificate; otherwise a valid entry for something else vouches for it
// (CVE-2022-36056).
void check_body(const Bundle& bundle) {
    const TlogEntry& entry = bundle.entry;
    const nlohmann::json body =
        parse_bounded_json(std::string_view(reinterpret_cast<const char*>(entry.body.data()), entry.body.size()),
                           "tlog-body", "the log entry's body");
    auto field = [&](std::initializer_list<const char*> path) -> std::string {
        const nlohmann::json* at = &body;
        for (const char* key : path) {
            if (!at->is_object() || !at->contains(key)) return {};
            at = &at->at(key);
        }
        return at->is_string() ? at->get<std::string>() : std::string();
    };
    if (field({"kind"}) != entry.kind || field({"apiVersion"}) != entry.version) {
        fail("tlog-body", "the log entry's body is a " + field({"kind"}) + " " + field({"apiVersion"}) + ", not the " +
                              entry.kind + " " + entry.version + " the bundle names");
    }
    if (field({"spec", "data", "hash", "algorithm"}) != "sha256" ||
        field({"spec", "data", "hash", "value"}) != hex(bundle.digest)) {
        fail("tlog-body", "the log entry is for the artifact digest " + field({"spec", "data", "hash", "value"}) +
                              ", not the bundle's " + hex(bundle.digest) +
                              "; the log entry belongs to another signature");
    }
    auto signature = digest::from_base64(field({"spec", "signature", "content"}));
    if (!signature || *signature != bundle.signature) {
        fail("tlog-body",
             "the log entry holds another signature than the bundle's; the log entry belongs to "
             "another signature");
    }
    auto pem = digest::from_base64(field({"spec", "signature", "publicKey", "content"}));
    auto der = pem ? pem_certificate(std::string(pem->begin(), pem->end())) : std::nullopt;
    if (!der || *der != bundle.leaf_der) {
        fail("tlog-body",
             "the log entry holds another certificate than the bundle's leaf; the log entry belongs "
             "to another signature (CVE-2022-36056)");
    }
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
    // the SET signs (README, "Signatures").
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
