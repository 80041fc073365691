// The transparency-log steps of verify_bundle (docs/trust.md,
// "How signatures are verified"): the log entry's signed entry timestamp, its inclusion
// proof and signed checkpoint, and its body against the bundle.
#include <algorithm>
#include <climits>

#include "common/lines.hpp"
#include "digest/digest.hpp"
#include "kernhub/error.hpp"
#include "sigstore/bundle.hpp"
#include "sigstore/detail.hpp"
#include "sigstore/transparency_log.hpp"

namespace kernhub::sigstore {

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

}  // namespace kernhub::sigstore
