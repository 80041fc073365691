// A fresh directory per test, removed with everything in it.
#pragma once

#include <filesystem>

namespace kernhub::test {

// Creates $TMPDIR/kernhub-test-XXXXXX (or under /tmp) and removes it
// recursively on destruction, even when a test made parts of it read-only.
// Throws std::runtime_error when the directory cannot be created.
class TempDir {
public:
    TempDir();
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;

    const std::filesystem::path& path() const { return m_path; }

private:
    std::filesystem::path m_path;
};

}  // namespace kernhub::test
