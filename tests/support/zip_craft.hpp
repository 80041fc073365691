// Zips made with libarchive's writer, for the tests of the zip build layout
// (a kernel's Python package as <id>.zip): real zip files, deflated, with
// any members, the same name twice included.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace kernhub::test {

// The bytes of a zip holding `members` (path, content) in order.
std::string make_zip(const std::vector<std::pair<std::string, std::string>>& members);

}  // namespace kernhub::test
