#include "cache/io_error.hpp"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <optional>
#include <vector>

#include "cache/cache.hpp"
#include "cache/posix_io.hpp"
#include "kernhub/error.hpp"

namespace kernhub::cache {

namespace {

// The login name of `uid`, or the number itself where the password
// database has no entry for it (a container's user often has none); chown
// takes either.
std::string user_name(uid_t uid) {
    const long hint = ::sysconf(_SC_GETPW_R_SIZE_MAX);
    std::vector<char> buffer(hint > 0 ? static_cast<std::size_t>(hint) : std::size_t{16384});
    struct passwd entry {};
    struct passwd* found = nullptr;
    int rc = 0;
    while ((rc = ::getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &found)) == ERANGE &&
           buffer.size() < (std::size_t{1} << 20)) {
        buffer.resize(buffer.size() * 2);
    }
    if (rc == 0 && found != nullptr && found->pw_name != nullptr && *found->pw_name != '\0') return found->pw_name;
    return std::to_string(uid);
}

struct Owned {
    fs::path entry;
    uid_t owner = 0;
};

// Who stood in the way of a change at `refused`: the entry itself when it
// exists (replacing or removing it may need it to be ours), else the
// nearest folder above it that exists (a new name needs write permission
// there). nullopt when that entry is this user's: the refusal is about
// its mode, not its owner.
std::optional<Owned> foreign_entry(const fs::path& refused) {
    const uid_t me = ::geteuid();
    fs::path at = refused;
    for (;;) {
        struct stat st {};
        if (::lstat(at.c_str(), &st) == 0) {
            if (st.st_uid != me) return Owned{at, st.st_uid};
            if (at != refused) return std::nullopt;
        }
        if (!at.has_relative_path()) return std::nullopt;
        at = at.parent_path();
    }
}

// The cache root above `path`: the folder holding the first `.locks` or
// repo folder (kernels--ORG--NAME, models--ORG--NAME) on the way up, a
// repo's folder of locks (.locks/kernels--ORG--NAME) counting as .locks.
std::optional<fs::path> cache_root_above(const fs::path& path) {
    for (fs::path at = path; at.has_relative_path(); at = at.parent_path()) {
        const std::string name = at.filename().string();
        if (name != ".locks" && !parse_repo_folder(name)) continue;
        fs::path root = at.parent_path();
        if (name != ".locks" && root.filename() == ".locks") root = root.parent_path();
        return root.empty() ? fs::path(".") : root;
    }
    return std::nullopt;
}

// `text` as one word for a POSIX shell: as it is when it holds only
// characters no shell treats specially, else in single quotes.
std::string shell_word(const std::string& text) {
    bool plain = !text.empty();
    for (char c : text) {
        const bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                          std::string("/._+-@%:,=").find(c) != std::string::npos;
        plain = plain && safe;
    }
    if (plain) return text;
    std::string out = "'";
    for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}

// The command that gives a cache back to `you`: the whole cache at once
// (one `sudo kernhub fetch` leaves root's entries all over it), or the cache
// folder made when it is missing. nullopt outside a cache, where no command
// fits every case: a chown of the folder above a new file can be a chown of
// /opt.
std::optional<std::string> repair_command(const fs::path& refused, const std::string& you) {
    const std::optional<fs::path> root = cache_root_above(refused);
    if (!root) return std::nullopt;
    struct stat st {};
    const bool missing = ::lstat(root->c_str(), &st) != 0 && errno == ENOENT;
    return (missing ? "sudo install -d -o " : "sudo chown -R ") + shell_word(you) + " " + shell_word(root->string());
}

}  // namespace

std::string refusal_advice(const fs::path& refused, int err, const std::string& advice) {
    if (err != EACCES && err != EPERM) return advice;
    const std::optional<Owned> blocker = foreign_entry(refused);
    if (!blocker) return advice;
    const std::string owner = user_name(blocker->owner);
    const uid_t me = ::geteuid();
    if (me == 0) {
        // Only a file system that refuses root (NFS with root squashing)
        // says no to root, so no chown would help.
        return blocker->entry.string() + " is owned by " + owner +
               ", and this file system refuses root there; run kernhub as " + owner;
    }
    const std::string you = user_name(me);
    const std::string whose = blocker->entry.string() + " is owned by " + owner + ", not " + you;
    const std::optional<std::string> command = repair_command(refused, you);
    return whose + "; " + (command ? "run: " + *command : advice);
}

void detail::throw_io_error(const std::string& action, const fs::path& path, int err, const std::string& advice,
                            const fs::path& refused) {
    throw Error(ErrorCode::internal, "cannot " + action + " " + path.string() + ": " + errno_text(err) + "; " +
                                         refusal_advice(refused.empty() ? path : refused, err, advice));
}

}  // namespace kernhub::cache
