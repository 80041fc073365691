// kh_hub_set's keys and values (include/kernhub/kernhub.h): parsed,
// bounded, and applied to kernhub::Options.
#include "capi/setting.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/setting_table.hpp"
#include "common/text.hpp"

namespace kernhub::capi {
namespace {

// A setting value is a path, a URL, a token or a variant name: 4096 bytes
// (PATH_MAX on Linux) holds any of them.
constexpr std::size_t k_max_setting_bytes = 4096;

constexpr int k_usage = static_cast<int>(ErrorCode::usage);

}  // namespace

void apply_setting(Options& options, const char* key, const char* value) {
    if (strnlen(value, k_max_setting_bytes + 1) > k_max_setting_bytes) {
        throw Refusal{k_usage, "the value of setting " + quoted_name(key) + " is longer than " +
                                   std::to_string(k_max_setting_bytes) + " bytes (k_max_setting_bytes)"};
    }
    // The keys come from the one table of settings (src/api/setting_table.cpp).
    const api::SettingSpec* spec = api::setting_for_c_key(key);
    if (spec == nullptr || spec->apply == nullptr) {
        std::string known;
        for (const api::SettingSpec& each : api::setting_table()) {
            if (each.c_key.empty()) continue;
            known += (known.empty() ? "" : ", ") + std::string(each.c_key);
        }
        const std::string nearest = api::nearest_c_key(key);
        throw Refusal{k_usage, "unknown setting " + quoted_name(key) +
                                   (nearest.empty() ? "" : " (did you mean '" + nearest + "'?)") +
                                   "; the settings are " + known};
    }
    spec->apply(options, key, value);
}

}  // namespace kernhub::capi
