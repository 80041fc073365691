// The text kh_last_error() returns (include/kernhub/kernhub.h): each
// thread's last failure on each handle.
#pragma once

#include <list>
#include <memory>
#include <string>
#include <string_view>

namespace kernhub::capi {

// Lives exactly as long as one handle. The error texts refer to a handle
// through a weak pointer to its HandleLife, never through its address: a
// handle allocated where a freed one was is another handle, with no error.
struct HandleLife {};
using HandleToken = std::shared_ptr<const HandleLife>;

// One thread's last failures, one entry per handle whose latest call from
// this thread failed.
//
// Why per thread, and not a map inside the handle keyed by thread id: the
// entries then die with their thread (a program that starts a thread per
// request would otherwise grow the map of a long-lived handle without
// bound, and a new thread reusing a dead thread's id would inherit its
// text), reading and writing them needs no lock, and a handle freed
// elsewhere is seen through its expired HandleLife. Entries of freed
// handles are dropped when the thread next records a failure, so a thread
// holds at most one entry per live handle it failed on, plus those of
// handles freed since its last failure.
class ThreadErrors {
public:
    // The calling thread's errors.
    static ThreadErrors& current() noexcept;

    // Records "<kind of code>: <message>" (made printable) as the handle's
    // last failure. Out of memory, the failure is still recorded, as
    // "internal error: out of memory".
    void failed(const HandleToken& handle, int code, std::string_view message) noexcept;
    // Clears the handle's last failure.
    void succeeded(const HandleToken& handle) noexcept;
    // The handle's last failure, or nullptr after a success. The text stays
    // put until this thread's next failed() or succeeded() for the handle.
    const char* last(const HandleToken& handle) const noexcept;

private:
    struct Entry {
        std::weak_ptr<const HandleLife> handle;
        std::string text;  // empty: the text could not be allocated
    };

    // A list, so that recording or dropping one handle's text never moves
    // the text kh_last_error() handed out for another.
    std::list<Entry> m_entries;
    // The handle whose failure found no memory even for its entry.
    std::weak_ptr<const HandleLife> m_unrecorded;
};

}  // namespace kernhub::capi
