// The one declaration of every setting: its environment variable, its
// Options field, its kh_hub_set key, type, range, default and a line of
// documentation. resolve_settings reads the ranges and names from it,
// kh_hub_set parses its keys with it, docs/configuration.md's table is
// rendered from it (tests/api/test_setting_table.cpp fails when they
// differ), and unknown KERNHUB_* variables and C keys are told the nearest
// name in it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kernhub/kernhub.hpp"

namespace kernhub::api {

enum class SettingType {
    text,     // any text; "" is unset
    path,     // a file or folder
    url,      // http://, https:// or file://
    list,     // repeatable (C key: one value per call, "" clears)
    names,    // names separated by commas
    flag,     // 1/true/yes/on, else off
    strict,   // 1/true/yes/on or 0/false/no/off/empty, anything else refused
    integer,  // decimal digits within [min, max]
    bytes,    // decimal digits, at least min
};

struct SettingSpec {
    std::string_view field;  // the Options field; "" for an environment-only setting
    std::string_view env;    // the environment variable; "" for none
    std::string_view c_key;  // the kh_hub_set key; "" for none
    SettingType type;
    std::int64_t min = 0;       // integer and bytes
    std::int64_t max = 0;       // integer
    std::int64_t fallback = 0;  // integer: the default
    // For the documentation: the range of a non-integer setting and the
    // default when it is not a number ("" for an integer: computed).
    std::string_view range;
    std::string_view fallback_text;
    std::string_view doc;
    // kh_hub_set: applies `value` to `options`; throws Error(usage) naming
    // `key` for a bad value. Null when there is no C key.
    void (*apply)(Options& options, const char* key, const char* value) = nullptr;
};

// Every setting, in the order the documentation lists them.
const std::vector<SettingSpec>& setting_table();
// The row of an Options field; std::logic_error for a name the table lacks
// (a programming error, caught by the tests).
const SettingSpec& setting_for_field(std::string_view field);
// The row of a kh_hub_set key, or null.
const SettingSpec* setting_for_c_key(std::string_view key);
// The row of an environment variable, or null.
const SettingSpec* setting_for_env(std::string_view name);

// The range and default as the documentation shows them.
std::string setting_range_text(const SettingSpec& spec);
std::string setting_default_text(const SettingSpec& spec);

// The kh_hub_set key meant by `wanted`: the nearest key, or the key of the
// setting whose Options field or variable `wanted` is (or is near:
// "project_dir", "ref_ttl_seconds"); "" when none is close.
std::string nearest_c_key(std::string_view wanted);
// The same for a variable: "KERNHUB_REF_TTL_SECONDS" (the field's name in
// upper case) gives KERNHUB_REF_TTL.
std::string nearest_variable(std::string_view wanted);

// Variables named KERNHUB_* in `environment` (NAME=VALUE strings) that are
// no setting, each with the nearest setting's variable ("" when none is
// close, and for all after the first k_max_named_variables: a few lines
// say enough, and thousands would bury a command's output). KERNHUB_TEST_*
// is the test suite's and never reported.
constexpr std::size_t k_max_named_variables = 16;
struct UnknownVariable {
    std::string name;
    std::string nearest;
};
std::vector<UnknownVariable> unknown_variables(const char* const* environment);

}  // namespace kernhub::api
