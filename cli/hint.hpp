// How the command-line tool names the setting or operation an Error's
// advice refers to (kernhub::ErrorHint): a flag or a command.
#pragma once

#include <string>

#include "kernhub/error.hpp"

namespace kernhub::cli {

// "--offline", "`kernhub lock`"; the hint's own name for one this table
// lacks (a newer library's).
std::string hint_name(const ErrorHint& hint);

// Error::what() with its hint named as the command line does.
std::string describe(const Error& error);

}  // namespace kernhub::cli
