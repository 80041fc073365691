// The names an ErrorHint (kernhub/error.hpp) may carry, and how the C++ API
// names each: every message that refers to a setting or an operation
// builds its hint here, so that each interface can name all of them (the C
// API in src/capi/hint.cpp, the command-line tool in cli/hint.cpp).
#pragma once

#include <string>
#include <vector>

#include "kernhub/error.hpp"

namespace kernhub::hint {

// A known name, with the C++ API's name for it: an Options field
// ("Options::offline"), an operation's option ("MirrorOptions::to") or a
// Client method ("Client::fetch").
struct Known {
    ErrorHint::Kind kind;
    const char* name;
    const char* cpp;
};

// Every name the library gives a hint, settings first.
const std::vector<Known>& known();

// The hint for `name` (one of known()); the name is kept as given.
ErrorHint setting(const char* name);
ErrorHint action(const char* name);

// The C++ API's name for `hint`: known()'s, or the hint's own name when it
// is not a known one. Empty for Kind::none.
std::string cpp_name(const ErrorHint& hint);

}  // namespace kernhub::hint
