#include "cache/place_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "cache/io_error.hpp"
#include "cache/posix_io.hpp"
#include "kernhub/error.hpp"

namespace kernhub::cache {

namespace fs = std::filesystem;

namespace {

[[noreturn]] void fail(const fs::path& path, int err, const fs::path& refused = {}) {
    detail::throw_io_error("write", path, err, "check permissions and free space", refused);
}

// Copies source into the new file `temp`, fsynced and read-only. Returns 0
// or the errno that stopped it; `temp` is removed on failure.
int copy_into(const fs::path& source, const fs::path& temp) {
    const int in = ::open(source.c_str(), O_RDONLY | O_CLOEXEC);
    if (in < 0) return errno;
    const int out = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
    if (out < 0) {
        int err = errno;
        ::close(in);
        return err;
    }
    int err = 0;
    char buffer[1 << 16];
    for (;;) {
        ssize_t n = ::read(in, buffer, sizeof buffer);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) err = errno;
        if (n <= 0) break;
        err = detail::write_all(out, buffer, static_cast<std::size_t>(n));
        if (err != 0) break;
    }
    if (err == 0 && ::fsync(out) != 0) err = errno;
    if (::close(out) != 0 && err == 0) err = errno;
    ::close(in);
    if (err != 0) ::unlink(temp.c_str());
    return err;
}

}  // namespace

Placed place_file(const fs::path& source, const fs::path& target, const fs::path& temp_dir) {
    const fs::path dir = target.parent_path();
    if (int err = detail::make_directories(dir); err != 0) fail(target, err, dir);
    if (int err = detail::make_directories(temp_dir); err != 0) fail(target, err, temp_dir);
    const fs::path temp = temp_dir / (".place." + detail::random_hex(16) + ".tmp");  // fits any name

    Placed placed = Placed::linked;
    if (::link(source.c_str(), temp.c_str()) != 0) {
        // EXDEV: another filesystem; EPERM: protected_hardlinks or a
        // filesystem without links; EMLINK: the blob has too many names.
        const int err = errno;
        if (err != EXDEV && err != EPERM && err != EMLINK && err != ENOTSUP) fail(target, err);
        if (int copy_err = copy_into(source, temp); copy_err != 0) fail(target, copy_err, temp);
        placed = Placed::copied;
    }
    int err = ::rename(temp.c_str(), target.c_str()) != 0 ? errno : 0;
    if (err == 0) err = detail::fsync_directory(dir);
    if (err != 0) {
        ::unlink(temp.c_str());
        fail(target, err);
    }
    return placed;
}

}  // namespace kernhub::cache
