#include "capi/hint.hpp"

#include "api/setting_table.hpp"
#include "common/hint.hpp"

namespace kernhub::capi {

namespace {

struct CName {
    ErrorHint::Kind kind;
    const char* name;  // hint::known()'s
    const char* c;
};

// What has no key of kh_hub_set; a setting's key comes from the table
// (src/api/setting_table.cpp), which names a list by one of its values
// ("target", not "targets").
constexpr CName k_c_names[] = {
    {ErrorHint::Kind::setting, "load.op", "the registry's \"op\""},
    {ErrorHint::Kind::action, "fetch", "kh_prewarm"},
};

const api::SettingSpec* setting_of_field(const std::string& field) {
    for (const api::SettingSpec& spec : api::setting_table()) {
        if (spec.field == field) return &spec;
    }
    return nullptr;
}

}  // namespace

std::string hint_name(const ErrorHint& hint) {
    if (hint.kind == ErrorHint::Kind::setting) {
        if (const api::SettingSpec* spec = setting_of_field(hint.name); spec != nullptr && !spec->c_key.empty()) {
            return "kh_hub_set \"" + std::string(spec->c_key) + "\"";
        }
    }
    for (const CName& entry : k_c_names) {
        if (entry.kind == hint.kind && hint.name == entry.name) return entry.c;
    }
    return hint::cpp_name(hint);
}

}  // namespace kernhub::capi
