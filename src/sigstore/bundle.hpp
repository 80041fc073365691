// The parsed Sigstore bundle (bundle.cpp): only what verification reads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sigstore/detail.hpp"

namespace kernhub::sigstore {

struct InclusionProof {
    std::int64_t log_index = 0;  // the leaf's index in this tree (shard)
    std::int64_t tree_size = 0;
    Bytes root_hash;
    std::vector<Bytes> hashes;
    std::string checkpoint;  // the signed note's text
};

struct TlogEntry {
    std::int64_t log_index = 0;
    std::int64_t integrated_time = 0;
    Bytes log_id;
    std::string kind;
    std::string version;
    std::string body_base64;  // as in the bundle: the SET signs this text
    Bytes body;
    Bytes set;  // inclusionPromise.signedEntryTimestamp
    std::optional<InclusionProof> proof;
};

struct Bundle {
    std::string version;  // "0.1", "0.2" or "0.3"
    Bytes leaf_der;
    TlogEntry entry;
    bool has_timestamps = false;  // RFC 3161 timestamps present
    std::string digest_algorithm;
    Bytes digest;
    Bytes signature;
};

// Throws Error(verification) at step `bundle`.
Bundle parse_bundle(std::string_view json);

}  // namespace kernhub::sigstore
