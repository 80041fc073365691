// Internals shared by the archive module's reader and writer: the RAII
// handle over libarchive's struct archive, and the wording of refusals.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "archive/archive.hpp"
#include "archive/libarchive.hpp"

namespace kernhub::archive::detail {

// Owns one libarchive read or write handle.
class Handle {
public:
    enum class Kind { read, write };
    explicit Handle(Kind kind);
    ~Handle();
    Handle(const Handle&) = delete;
    Handle& operator=(const Handle&) = delete;

    struct archive* get() const noexcept {
        return m_archive;
    }
    // libarchive's text for the last failure, made one printable line.
    std::string error_text() const;

private:
    Kind m_kind;
    struct archive* m_archive = nullptr;
};

// "8 GiB", "512 MiB", "1000 bytes": limits as people write them.
std::string size_text(std::uint64_t bytes);

// 'value', cut to a length that keeps a message one readable line, with
// control characters shown as '?'.
std::string quoted(const std::string& value);

// The one wording of a refusal: Error(verification) naming the archive, the
// entry and why (which names the limit when one was hit).
[[noreturn]] void refuse(const std::filesystem::path& file, const std::string& entry, const std::string& why);

// The entry's path as the policy sees it (see Entry), or the reason it is
// unacceptable: absolute, empty parts, "." or "..", too long.
struct NormalizedPath {
    std::string path;
    std::string problem;        // empty when path is usable
    bool archive_root = false;  // "." or "./": the archive's top folder itself
};
NormalizedPath normalize_path(const std::string& raw, bool directory, const ExtractionPolicy& policy);

}  // namespace kernhub::archive::detail
