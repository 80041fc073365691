// The one wording of the store's I/O failures (refusal_advice in
// cache/cache.hpp says what a refusal by permissions adds). Internal to
// store.
#pragma once

#include <filesystem>
#include <string>

namespace kernhub::cache::detail {

// Throws Error(internal): "cannot <action> <path>: <errno text>; " and
// cache::refusal_advice(refused, err, advice). `refused` is the entry the failing
// call was refused at, when that is not `path` itself (a temp file, the
// staging folder); empty means `path`.
[[noreturn]] void throw_io_error(const std::string& action, const std::filesystem::path& path, int err,
                                 const std::string& advice, const std::filesystem::path& refused = {});

}  // namespace kernhub::cache::detail
