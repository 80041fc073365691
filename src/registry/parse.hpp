// Internal to the registry module: turning one registry document into
// validated entries. Registry (registry.cpp) only stacks what this returns.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "registry/registry.hpp"

namespace kernhub::registry::detail {

// Parses and validates a whole document before returning anything, so a bad
// file never leaves half of its entries behind. Every entry's `source` is set.
// Throws Error(usage) as described on Registry::add_json.
std::map<std::string, KernelSpec> parse_document(const std::string& text, const std::string& source);

// Validates one value of "kernels" (the name is already checked).
KernelSpec parse_entry(const std::string& name, const nlohmann::json& value, const std::string& source);

// Throws Error(usage, "registry <source>: <problem>"). Every registry error
// goes through here so they all start the same way and stay on one line.
[[noreturn]] void fail(const std::string& source, const std::string& problem);

// `text` as a JSON string literal: quoted, with control characters escaped,
// so names and keys from the file cannot break a one-line message.
std::string in_quotes(const std::string& text);

// A short description of a JSON value for "got ..." in messages.
std::string describe(const nlohmann::json& value);

// The allowed keys as "a, b, c", plus `; did you mean "x"?` when one of them
// is a likely typo of `key`.
std::string allowed_hint(const std::string& key, const std::vector<std::string>& allowed);

}  // namespace kernhub::registry::detail
