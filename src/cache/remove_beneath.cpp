// Removing a cache entry without following a link on the way: every folder
// from the base down is opened relative to its parent with O_NOFOLLOW, and
// a folder's contents are removed through descriptors, so a folder swapped
// for a link while the removal runs is never entered (docs/cache-format.md,
// "Cache invariants").
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <string>
#include <vector>

#include "cache/cache.hpp"
#include "cache/io_error.hpp"
#include "cache/posix_io.hpp"
#include "kernhub/error.hpp"

namespace kernhub::cache {

namespace {

// Folders deeper than this are not removed (a cache never holds them).
constexpr int k_max_remove_depth = 64;

using Fd = detail::UniqueFd;

int open_folder(int parent, const char* name) {
    return ::openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

// Removes everything inside the folder `dir` (a descriptor this call may
// use up), then nothing else. Returns 0 or an errno.
int empty_folder(int dir, int depth) {
    if (depth > k_max_remove_depth) return ELOOP;
    DIR* stream = ::fdopendir(dir);
    if (stream == nullptr) {
        const int err = errno;
        ::close(dir);
        return err;
    }
    std::vector<std::string> names;
    std::vector<bool> folders;
    errno = 0;
    while (const dirent* entry = ::readdir(stream)) {
        const std::string name = entry->d_name;
        if (name == "." || name == "..") continue;
        struct stat st {};
        if (::fstatat(::dirfd(stream), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
        names.push_back(name);
        folders.push_back(S_ISDIR(st.st_mode));
    }
    int err = 0;
    for (std::size_t i = 0; i < names.size() && err == 0; ++i) {
        if (folders[i]) {
            const int child = open_folder(::dirfd(stream), names[i].c_str());
            if (child < 0) {
                if (errno != ENOENT) err = errno;
                continue;
            }
            err = empty_folder(child, depth + 1);
            if (err == 0 && ::unlinkat(::dirfd(stream), names[i].c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
                err = errno;
            }
        } else if (::unlinkat(::dirfd(stream), names[i].c_str(), 0) != 0 && errno != ENOENT) {
            err = errno;
        }
    }
    ::closedir(stream);
    return err;
}

}  // namespace

void remove_beneath(const fs::path& base, const fs::path& relative) {
    const auto fail = [&](int err) {
        detail::throw_io_error("remove", base / relative, err, "check permissions on the cache");
    };
    std::vector<std::string> parts;
    for (const auto& part : relative) {
        const std::string name = part.string();
        if (name.empty() || name == "." || name == ".." || name == "/") fail(EINVAL);
        parts.push_back(name);
    }
    if (parts.empty()) fail(EINVAL);
    Fd current(::open(base.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (current.get() < 0) {
        if (errno == ENOENT) return;
        fail(errno);
    }
    Fd* parent = &current;
    std::vector<std::unique_ptr<Fd>> held;
    for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
        const int next = open_folder(parent->get(), parts[i].c_str());
        if (next < 0) {
            if (errno == ENOENT) return;                                 // gone already
            fail(errno == ELOOP || errno == ENOTDIR ? ENOTDIR : errno);  // a link on the way: never followed
        }
        held.push_back(std::make_unique<Fd>(next));
        parent = held.back().get();
    }
    const std::string& leaf = parts.back();
    struct stat st {};
    if (::fstatat(parent->get(), leaf.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT) return;
        fail(errno);
    }
    if (S_ISDIR(st.st_mode)) {
        const int folder = open_folder(parent->get(), leaf.c_str());
        if (folder < 0) fail(errno);
        if (int err = empty_folder(folder, 0); err != 0) fail(err);
        if (::unlinkat(parent->get(), leaf.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) fail(errno);
        return;
    }
    if (::unlinkat(parent->get(), leaf.c_str(), 0) != 0 && errno != ENOENT) fail(errno);
}

}  // namespace kernhub::cache
