// A second user for tests that need two (a cache's owner and root): uid
// 65534, "nobody" on most systems, which a test running as root switches
// to (setpriv for a program, setresuid in a forked child).
#pragma once

#include <pwd.h>
#include <sys/types.h>

#include <string>
#include <vector>

namespace kernhub::test {

inline constexpr uid_t k_other_uid = 65534;

// The login name of `uid` as kernhub's messages give it: the number where
// the password database has no entry.
inline std::string login_name(uid_t uid) {
    std::vector<char> buffer(16384);
    struct passwd entry {};
    struct passwd* found = nullptr;
    if (::getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &found) == 0 && found != nullptr) {
        return found->pw_name;
    }
    return std::to_string(uid);
}

}  // namespace kernhub::test
