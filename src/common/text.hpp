// Small ASCII text helpers shared by the modules that parse headers,
// environment values and uname(2) fields.
#pragma once

#include <string>
#include <string_view>

namespace kernhub {

// `text` without leading and trailing ASCII white space (space, \t, \n, \v,
// \f, \r). Locale-independent, unlike std::isspace, so that header values
// and environment values trim the same way everywhere.
std::string trim(std::string_view text);

// `text` with A-Z mapped to a-z and every other byte kept: header names,
// URL schemes and hosts, flag values and uname fields are ASCII, and a
// locale must not change how they compare.
std::string ascii_lowercase(std::string_view text);

}  // namespace kernhub
