// Internals shared by the archive module's reader and writer: the RAII
// handle over libarchive's struct archive, and the wording of refusals.
#pragma once

#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <string>

#include "archive/archive.hpp"
#include "archive/libarchive.hpp"

namespace kernhub::archive::detail {

// Attempts to make a locked temporary (unpack folder, export temp) before
// giving up on a cleaner that keeps removing them.
inline constexpr int k_locked_temp_attempts = 8;

// Takes flock(LOCK_EX) on `fd`, the descriptor of an entry just made under
// a fresh temp name, and checks that the entry still has a link. 0 when it
// is locked and linked; else the errno. ENOENT and EWOULDBLOCK mean that a
// cleaner found it between its creation and the lock (it holds the lock or
// has unlinked it): make another.
int lock_fresh_temp(int fd);
inline bool cleaner_raced(int err) {
    return err == ENOENT || err == EWOULDBLOCK;
}

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
