#include "capi/hint.hpp"

#include "common/hint.hpp"

namespace kernhub::capi {

namespace {

struct CName {
    ErrorHint::Kind kind;
    const char* name;  // hint::known()'s
    const char* c;
};

// The keys are kh_hub_set's (src/capi/setting.cpp), which name a list by
// one of its values ("target", not "targets").
constexpr CName k_c_names[] = {
    {ErrorHint::Kind::setting, "offline", "kh_hub_set \"offline\""},
    {ErrorHint::Kind::setting, "targets", "kh_hub_set \"target\""},
    {ErrorHint::Kind::setting, "cache_dir", "kh_hub_set \"cache_dir\""},
    {ErrorHint::Kind::setting, "project_dir", "kh_hub_set \"project\""},
    {ErrorHint::Kind::setting, "endpoint", "kh_hub_set \"endpoint\""},
    {ErrorHint::Kind::setting, "sigstore_trusted_root", "kh_hub_set \"sigstore_trusted_root\""},
    {ErrorHint::Kind::setting, "host", "kh_hub_set \"host\""},
    {ErrorHint::Kind::setting, "backend", "kh_hub_set \"backend\""},
    {ErrorHint::Kind::setting, "local_kernels", "kh_hub_set \"local_kernels\""},
    {ErrorHint::Kind::setting, "trust_remote_code", "kh_hub_set \"trust_remote_code\""},
    {ErrorHint::Kind::setting, "load.op", "the registry's \"op\""},
    {ErrorHint::Kind::action, "fetch", "kh_prewarm"},
};

}  // namespace

std::string hint_name(const ErrorHint& hint) {
    for (const CName& entry : k_c_names) {
        if (entry.kind == hint.kind && hint.name == entry.name) return entry.c;
    }
    return hint::cpp_name(hint);
}

}  // namespace kernhub::capi
