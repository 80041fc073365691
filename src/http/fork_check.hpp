// The one check for use after fork(). What a Session keeps between calls
// (its idle easy handles, its engine and thread, its per-origin download
// counts) belongs to the process that made it. A child made by fork() has
// that memory but none of the parent's threads, and must neither speak on
// the parent's connections nor close them (a TLS close would go out on the
// parent's stream): the child's first use drops what it inherited, unclosed,
// and starts anew. Each piece of state carries a ForkCheck, read under the
// lock that guards the piece.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <memory>
#include <vector>

namespace kernhub::http {

class ForkCheck {
public:
    ForkCheck() noexcept : m_pid(::getpid()) {}

    // True in a process other than the one the state belongs to: a child
    // made by fork() that has not taken the state over.
    bool in_child() const noexcept { return ::getpid() != m_pid; }

    // True the first time it is called in such a child, which then owns the
    // state: the caller drops what it inherited (see abandon). False in the
    // owner, so later calls in that child are false too.
    bool take_over() noexcept {
        const pid_t self = ::getpid();
        if (self == m_pid) return false;
        m_pid = self;
        return true;
    }

private:
    pid_t m_pid;
};

// Lets go of an inherited object without destroying it: its destructor
// would close the parent's connections or join a thread that is not here.
template <class T>
void abandon(std::unique_ptr<T>& inherited) noexcept {
    static_cast<void>(inherited.release());
}

template <class T>
void abandon(std::vector<std::unique_ptr<T>>& inherited) noexcept {
    for (auto& item : inherited) static_cast<void>(item.release());
    inherited.clear();
}

}  // namespace kernhub::http
