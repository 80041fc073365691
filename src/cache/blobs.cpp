// The blobs of a repo folder: a verified file placed under its name, and
// the partial downloads a resumed transfer continues (docs/cache-format.md,
// "Cache layout").
#include "cache/cache.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "cache/io_error.hpp"
#include "cache/posix_io.hpp"
#include "common/text.hpp"
#include "kernhub/error.hpp"

namespace kernhub::cache {

namespace {

// Marks the root as a cache (CACHEDIR.TAG), so backup tools skip it.
const char k_cachedir_tag[] =
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by kernhub.\n"
    "# For information about cache directory tags, see:\n"
    "#\thttps://bford.info/cachedir/\n";

// blobs/ as a real folder of the repo folder: a link there (or anything
// else that is not a folder) is removed, never what it points to, so no
// blob is written or found outside the repo folder. Returns an errno.
int make_real_blobs_folder(const fs::path& blobs) {
    struct stat st {};
    if (::lstat(blobs.c_str(), &st) == 0 && !S_ISDIR(st.st_mode) && ::unlink(blobs.c_str()) != 0 && errno != ENOENT) {
        return errno;
    }
    return detail::make_directories(blobs);
}

}  // namespace

IncompleteBlob RepoCache::begin_blob(const std::string& etag) const {
    fs::path final_path = blob_path(etag);
    fs::path blobs = final_path.parent_path();
    if (int err = make_real_blobs_folder(blobs); err != 0) {
        detail::throw_io_error("create", blobs, err, "check permissions and free space");
    }
    fs::path tag = m_root / "CACHEDIR.TAG";
    std::error_code ec;
    if (!fs::exists(fs::symlink_status(tag, ec))) write_file_atomic(tag, k_cachedir_tag);
    fs::path temp = blobs / (etag + "." + detail::random_hex(16) + ".incomplete");
    return IncompleteBlob(temp, final_path);
}

bool RepoCache::adopt_blob(const std::string& etag, const fs::path& verified) const {
    if (has_blob(etag)) return false;
    const fs::path final_path = blob_path(etag);
    int err = make_real_blobs_folder(final_path.parent_path());
    std::error_code ec;
    if (err == 0 && !fs::exists(fs::symlink_status(m_root / "CACHEDIR.TAG", ec))) {
        write_file_atomic(m_root / "CACHEDIR.TAG", k_cachedir_tag);
    }
    const int fd = err == 0 ? ::open(verified.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW) : -1;
    if (err == 0 && fd < 0) err = errno;
    // Read-only and on disk before the name appears, as a download's commit.
    if (err == 0 && (::fchmod(fd, 0444) != 0 || ::fsync(fd) != 0)) err = errno;
    if (fd >= 0) ::close(fd);
    if (err == 0 && ::rename(verified.c_str(), final_path.c_str()) != 0) err = errno;
    if (err == 0) err = detail::fsync_directory(final_path.parent_path());
    if (err != 0) {
        detail::throw_io_error("place", final_path, err, "check permissions and free space");
    }
    return true;
}

struct Partial {
    fs::path path;
    std::uint64_t size = 0;
    fs::file_time_type written;
    bool ours = false;  // a plain file of this user with no other name
};

// Partial files of one blob: "<etag>.<anything>.incomplete" directly in
// blobs/, as kernhub and huggingface_hub name them. Only regular files count
// (never followed through a symlink).
static std::vector<Partial> partials_of(const fs::path& blobs, const std::string& etag) {
    std::vector<Partial> out;
    const std::string prefix = etag + ".";
    const std::string suffix = ".incomplete";
    std::error_code ec;
    fs::directory_iterator it(blobs, ec), end;
    for (; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (name.size() <= prefix.size() + suffix.size() || name.rfind(prefix, 0) != 0 ||
            name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
            continue;
        }
        struct stat st {};
        if (::lstat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
        std::error_code time_ec;
        Partial partial{it->path(), static_cast<std::uint64_t>(st.st_size), fs::last_write_time(it->path(), time_ec),
                        st.st_nlink == 1 && st.st_uid == ::geteuid()};
        if (!time_ec) out.push_back(std::move(partial));
    }
    return out;
}

IncompleteBlob RepoCache::open_partial(const std::string& etag, bool adopt) const {
    const fs::path blobs = blob_path(etag).parent_path();
    std::vector<Partial> partials = partials_of(blobs, etag);
    std::error_code ec;
    if (!adopt) {
        // Without a lock that excludes, a partial may belong to a live
        // download: only an old one is known to be abandoned.
        const auto now = fs::file_time_type::clock::now();
        for (const auto& partial : partials) {
            if (now - partial.written > k_stale_partial_age) fs::remove(partial.path, ec);
        }
        return begin_blob(etag);
    }
    // The caller holds the blob's lock, so no live process writes any of
    // these: keep the largest one of our own, drop the rest. Another user's
    // partial cannot be continued (nor made read-only) by us.
    const Partial* best = nullptr;
    for (const auto& partial : partials) {
        if (partial.ours && partial.size > 0 && (best == nullptr || partial.size > best->size)) best = &partial;
    }
    for (const auto& partial : partials) {
        if (&partial != best) fs::remove(partial.path, ec);
    }
    if (best == nullptr) return begin_blob(etag);
    try {
        return IncompleteBlob::reopen(best->path, blob_path(etag));
    } catch (const Error&) {
        return begin_blob(etag);  // changed under us: start afresh
    }
}

void RepoCache::remove_blob(const std::string& etag) const {
    const fs::path path = blob_path(etag);
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
        const int err = errno;
        detail::throw_io_error("remove the damaged blob", path, err, "remove it by hand and fetch again");
    }
}

// The link target climbs out of snapshots/<commit>/<dirs of relpath>: one
// "../" per path part plus one for the commit folder, as huggingface_hub
// does, so the cache stays valid when the root is moved or mounted elsewhere.
}  // namespace kernhub::cache
