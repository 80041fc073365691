// Building hub trees for tests with examples/hub/make_hub.py.
#pragma once

#include <filesystem>

#include <nlohmann/json.hpp>

namespace kernhub::test {

// A spec without "organizations" gets every organisation of its repos as a
// trusted kernel publisher (an overview saying so).
// Lays out the static hub tree described by spec (the make_hub.py spec
// format) at out, replacing what was there. The spec is written to a
// temporary file first, so "path" sources must be absolute. Fails the
// current test, showing make_hub.py's stderr, when the script fails.
void make_hub(const nlohmann::json& spec, const std::filesystem::path& out);

}  // namespace kernhub::test
