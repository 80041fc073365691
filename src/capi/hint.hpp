// How the C API names the setting or operation an Error's advice refers to
// (kernhub::ErrorHint): a kh_hub_set key or a C function.
#pragma once

#include <string>

#include "kernhub/error.hpp"

namespace kernhub::capi {

// `kh_hub_set "offline"`, `kh_prewarm`; for what the C API does not offer
// (locking, cache management, mirrors), the C++ API's name.
std::string hint_name(const ErrorHint& hint);

}  // namespace kernhub::capi
