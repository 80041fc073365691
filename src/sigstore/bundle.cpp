// The Sigstore bundle document (media types v0.1, v0.2, v0.3): its shape is
// read into a Bundle before any cryptography runs; every refusal here is
// the `bundle` step.
#include "sigstore/bundle.hpp"
#include "common/strict_json.hpp"
#include "digest/digest.hpp"
#include "kernhub/error.hpp"

namespace kernhub::sigstore {

namespace {

constexpr const char* k_bundle_step = "bundle";
// Hashes in one inclusion proof: a tree of 2^64 leaves needs 64.
constexpr std::size_t k_max_proof_hashes = 64;
// Certificates in a v0.1/v0.2 x509CertificateChain.
constexpr std::size_t k_max_bundle_chain = 8;
constexpr std::size_t k_max_checkpoint_bytes = 16u << 10;

[[noreturn]] void bad(const std::string& what) {
    fail(k_bundle_step, what);
}

const nlohmann::json& member(const nlohmann::json& object, const char* key, const std::string& where) {
    if (!object.is_object() || !object.contains(key)) {
        bad(where + " has no \"" + key + "\"; the file is not a Sigstore message-signature bundle");
    }
    return object.at(key);
}

std::string text(const nlohmann::json& object, const char* key, const std::string& where) {
    const nlohmann::json& value = member(object, key, where);
    if (!value.is_string()) bad(where + "." + key + " is not a string");
    return value.get<std::string>();
}

Bytes base64(const nlohmann::json& object, const char* key, const std::string& where) {
    auto bytes = digest::from_base64(text(object, key, where));
    if (!bytes || bytes->empty()) bad(where + "." + key + " is not base64");
    return *bytes;
}

// Protobuf's JSON writes 64-bit integers as strings; accept either form.
std::int64_t integer(const nlohmann::json& object, const char* key, const std::string& where) {
    const nlohmann::json& value = member(object, key, where);
    if (value.is_number_unsigned()) {
        auto n = value.get<std::uint64_t>();
        if (n <= static_cast<std::uint64_t>(INT64_MAX)) return static_cast<std::int64_t>(n);
    } else if (value.is_string()) {
        const std::string s = value.get<std::string>();
        if (!s.empty() && s.size() <= 18 && s.find_first_not_of("0123456789") == std::string::npos) {
            return std::stoll(s);
        }
    }
    bad(where + "." + key + " is not a non-negative integer");
}

InclusionProof read_proof(const nlohmann::json& proof) {
    const std::string where = "tlogEntries[0].inclusionProof";
    InclusionProof out;
    out.log_index = integer(proof, "logIndex", where);
    out.tree_size = integer(proof, "treeSize", where);
    out.root_hash = base64(proof, "rootHash", where);
    const nlohmann::json& hashes = member(proof, "hashes", where);
    if (!hashes.is_array() || hashes.size() > k_max_proof_hashes) {
        bad(where + ".hashes is not a list of at most " + std::to_string(k_max_proof_hashes) +
            " hashes (k_max_proof_hashes)");
    }
    for (const auto& hash : hashes) {
        auto bytes = hash.is_string() ? digest::from_base64(hash.get<std::string>()) : std::nullopt;
        if (!bytes || bytes->size() != 32) bad(where + ".hashes holds an entry that is not a base64 SHA-256");
        out.hashes.push_back(*bytes);
    }
    out.checkpoint = text(member(proof, "checkpoint", where), "envelope", where + ".checkpoint");
    if (out.checkpoint.size() > k_max_checkpoint_bytes) {
        bad(where + ".checkpoint is over " + std::to_string(k_max_checkpoint_bytes) +
            " bytes (k_max_checkpoint_bytes)");
    }
    return out;
}

TlogEntry read_entry(const nlohmann::json& entry, const std::string& version) {
    const std::string where = "tlogEntries[0]";
    TlogEntry out;
    const nlohmann::json& kind_version = member(entry, "kindVersion", where);
    out.kind = text(kind_version, "kind", where + ".kindVersion");
    out.version = text(kind_version, "version", where + ".kindVersion");
    if (out.kind != "hashedrekord" || out.version != "0.0.1") {
        bad(where + " is a " + out.kind + " " + out.version +
            " entry; kernhub verifies hashedrekord 0.0.1 entries (Rekor v1) only, so Rekor v2 and other kinds "
            "are refused: sign with a Rekor v1 log");
    }
    if (!entry.contains("integratedTime")) {
        bad(where +
            " has no integratedTime (a Rekor v2 entry); kernhub takes the signing time from a Rekor v1 "
            "log's integrated time");
    }
    out.log_index = integer(entry, "logIndex", where);
    out.integrated_time = integer(entry, "integratedTime", where);
    out.log_id = base64(member(entry, "logId", where), "keyId", where + ".logId");
    out.body_base64 = text(entry, "canonicalizedBody", where);
    auto body = digest::from_base64(out.body_base64);
    if (!body || body->empty()) bad(where + ".canonicalizedBody is not base64");
    out.body = std::move(*body);
    // v0.1 carries the promise and may lack a proof; v0.2 and later must
    // carry the proof (the Sigstore bundle specification). kernhub takes
    // the signing time from the signed entry timestamp, so it needs the
    // promise in every version.
    if (!entry.contains("inclusionPromise")) {
        bad(where +
            " has no inclusionPromise (signed entry timestamp); kernhub needs it to trust the log's "
            "integrated time: re-create the bundle with a current Sigstore client");
    }
    out.set = base64(member(entry, "inclusionPromise", where), "signedEntryTimestamp", where + ".inclusionPromise");
    if (entry.contains("inclusionProof")) {
        out.proof = read_proof(entry.at("inclusionProof"));
    } else if (version != "0.1") {
        bad(where + " has no inclusionProof, which a v" + version +
            " bundle must carry; re-create the bundle with a current Sigstore client");
    }
    return out;
}

}  // namespace

nlohmann::json parse_bounded_json(std::string_view text, const char* step, const std::string& what) {
    strict_json::Limits limits;
    limits.max_depth = k_max_json_depth;
    limits.depth_name = "k_max_json_depth";
    limits.members = strict_json::MemberCap{k_max_json_members, "k_max_json_members", {}};
    strict_json::Parsed parsed = strict_json::parse(text, limits);
    if (!parsed.problem) return std::move(parsed.document);
    const strict_json::Problem& problem = *parsed.problem;
    switch (problem.kind) {
        case strict_json::Problem::Kind::syntax:
            fail(step, what + " is not valid JSON " + strict_json::syntax_position(problem, text) +
                           "; check that it is the right file");
        case strict_json::Problem::Kind::duplicate_key:
            // Two readers could take either value: no signature rests on that.
            fail(step, what + " is ambiguous: " + strict_json::describe(problem, text) +
                           "; it is not a well-formed Sigstore document");
        default:
            fail(step, what + ": " + strict_json::describe(problem, text) + "; it is not a Sigstore document");
    }
}

namespace {

// "0.1", "0.2" or "0.3" for the media types of the bundle versions kernhub reads.
std::string bundle_version(const std::string& media_type) {
    if (media_type == "application/vnd.dev.sigstore.bundle+json;version=0.1") return "0.1";
    if (media_type == "application/vnd.dev.sigstore.bundle+json;version=0.2") return "0.2";
    if (media_type == "application/vnd.dev.sigstore.bundle+json;version=0.3" ||
        media_type == "application/vnd.dev.sigstore.bundle.v0.3+json") {
        return "0.3";
    }
    bad("media type \"" + media_type +
        "\" is not a Sigstore bundle version kernhub reads (v0.1, v0.2, v0.3); check the file");
}

// The signing certificate: v0.3's single certificate, or the first of an
// older bundle's chain.
Bytes leaf_certificate(const nlohmann::json& material, const std::string& version) {
    const std::string vm = "verificationMaterial";
    if (material.contains("publicKey")) {
        bad("the bundle is signed with a public key, not a Fulcio certificate; kernhub verifies keyless "
            "(certificate) signatures only");
    }
    if (version == "0.3" || material.contains("certificate")) {
        return base64(member(material, "certificate", vm), "rawBytes", vm + ".certificate");
    }
    const nlohmann::json& certs =
        member(member(material, "x509CertificateChain", vm), "certificates", vm + ".x509CertificateChain");
    if (!certs.is_array() || certs.empty() || certs.size() > k_max_bundle_chain) {
        bad(vm + ".x509CertificateChain.certificates must list 1 to " + std::to_string(k_max_bundle_chain) +
            " certificates (k_max_bundle_chain)");
    }
    return base64(certs[0], "rawBytes", vm + ".x509CertificateChain.certificates[0]");
}

// The message digest and signature over the artifact.
void read_message_signature(const nlohmann::json& doc, Bundle& out) {
    const nlohmann::json& signature = member(doc, "messageSignature", "the bundle");
    const nlohmann::json& message_digest = member(signature, "messageDigest", "messageSignature");
    out.digest_algorithm = text(message_digest, "algorithm", "messageSignature.messageDigest");
    if (out.digest_algorithm != "SHA2_256") {
        bad("messageSignature.messageDigest.algorithm is " + out.digest_algorithm +
            "; kernhub verifies SHA2_256 message digests only");
    }
    out.digest = base64(message_digest, "digest", "messageSignature.messageDigest");
    if (out.digest.size() != 32) bad("messageSignature.messageDigest.digest is not a SHA-256 (32 bytes)");
    out.signature = base64(signature, "signature", "messageSignature");
}

}  // namespace

Bundle parse_bundle(std::string_view json) {
    if (json.size() > k_max_bundle_bytes) {
        bad("the bundle is " + std::to_string(json.size()) + " bytes, over the limit of " +
            std::to_string(k_max_bundle_bytes) + " bytes (k_max_bundle_bytes); check that it is the right file");
    }
    const nlohmann::json doc = parse_bounded_json(json, k_bundle_step, "the bundle");
    if (!doc.is_object()) bad("the bundle is not a JSON object");
    Bundle out;
    out.version = bundle_version(text(doc, "mediaType", "the bundle"));
    if (doc.contains("dsseEnvelope")) {
        bad("the bundle holds a DSSE envelope (an attestation); kernhub verifies message-signature bundles "
            "only: sign the artifact itself (cosign sign-blob, sigstore sign)");
    }
    const nlohmann::json& material = member(doc, "verificationMaterial", "the bundle");
    const std::string vm = "verificationMaterial";
    out.leaf_der = leaf_certificate(material, out.version);
    if (material.contains("timestampVerificationData")) {
        const nlohmann::json& data = material.at("timestampVerificationData");
        out.has_timestamps = data.is_object() && data.contains("rfc3161Timestamps") &&
                             data.at("rfc3161Timestamps").is_array() && !data.at("rfc3161Timestamps").empty();
    }
    const nlohmann::json& entries = member(material, "tlogEntries", vm);
    if (!entries.is_array() || entries.size() != 1) {
        bad(vm + ".tlogEntries lists " + std::to_string(entries.is_array() ? entries.size() : 0) +
            " entries; kernhub verifies bundles with exactly one transparency-log entry");
    }
    // A bundle whose signing time comes only from RFC 3161 timestamps (its
    // log entry has no signed entry timestamp) is refused by name: kernhub
    // takes the time from the log alone (docs/trust.md, "How signatures are verified").
    if (out.has_timestamps && entries[0].is_object() && !entries[0].contains("inclusionPromise")) {
        fail("timestamp",
             "the bundle's signing time comes only from RFC 3161 timestamps, which kernhub does not verify; "
             "it needs the transparency log's signed entry timestamp (inclusionPromise): re-create the bundle "
             "with a client that logs to Rekor v1");
    }
    out.entry = read_entry(entries[0], out.version);
    read_message_signature(doc, out);
    return out;
}

}  // namespace kernhub::sigstore
