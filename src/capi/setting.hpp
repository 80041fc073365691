// The settings of a C API handle (include/kernhub/kernhub.h, kh_hub_set):
// one key and value applied to kernhub::Options.
#pragma once

#include <string>

#include "kernhub/kernhub.hpp"

namespace kernhub::capi {

// Thrown inside the C API only: a refusal of that layer (bad argument, name
// not loaded) that becomes the return code and the message.
struct Refusal {
    int code;
    std::string message;
};

// Applies key = value to `options`; throws Refusal (code 2) and changes
// nothing on a bad key or value. Never quotes a token.
void apply_setting(Options& options, const char* key, const char* value);

}  // namespace kernhub::capi
