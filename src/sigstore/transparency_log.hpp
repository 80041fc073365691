// The transparency-log steps of verify_bundle. Internal to sigstore.
#pragma once

#include "sigstore/bundle.hpp"
#include "sigstore/detail.hpp"

namespace kernhub::sigstore {

// The transparency-log steps of verify_bundle (transparency_log.cpp), in
// the order sigstore.hpp lists them: the signed entry timestamp against the
// trusted root's log key (returns that log), the inclusion proof, the
// signed checkpoint, and the entry's body against the bundle.
const LogKey& verify_set(const TlogEntry& entry, const TrustedRoot& root);
void verify_inclusion(const TlogEntry& entry);
void verify_checkpoint(const TlogEntry& entry, const LogKey& log);
void check_body(const Bundle& bundle);

}  // namespace kernhub::sigstore
