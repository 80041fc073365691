// Small ASCII text helpers shared by the modules that parse headers,
// environment values and uname(2) fields, and by anything that shows text
// from outside.
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

// `text` with ASCII control characters (terminal escapes, newlines) shown
// as '?': paths, names and messages can carry whatever a hub, a registry
// file or a cache entry held, and what reaches a terminal must stay one
// harmless line.
std::string printable(std::string_view text);

}  // namespace kernhub
