// Progress and status events. The library never prints: it reports what it is
// doing to an EventSink the caller passes in, and the caller renders it.
#pragma once

#include <cstdint>
#include <string>

#include "kernhub/export.hpp"

namespace kernhub {

struct Event {
    enum class Kind {
        info,            // a one-line status message (text)
        download_start,  // path, total (bytes expected)
        download_bytes,  // path, done, total; emitted as bytes arrive
        download_done,   // path, total
        retry,           // text says what is retried and why
        // Once per variant, before its first download: text = the variant,
        // done = how many files will be downloaded, total = their bytes (the
        // sizes the hub listing gives). Files found damaged in the cache may
        // still be downloaded beyond it.
        download_plan,
    };
    Kind kind = Kind::info;
    // At most 4 KiB, also once escaped: a longer text (it may quote what a
    // hub sent) loses the middle of words over 512 bytes, from the first,
    // then its own middle, with a marker saying how many bytes were cut at
    // each place; no cut splits a UTF-8 character. Texts quoting a hub's
    // answer or a path arrive escaped; others are kernhub's own words. A
    // sink that writes to a terminal escapes all the same
    // (kernhub::printable).
    std::string text;
    std::string path;
    // Download events: the repo the file belongs to ("org/name"); two
    // kernels fetched side by side may both have build/<variant>/metadata.json.
    std::string repo;
    std::uint64_t done = 0;
    std::uint64_t total = 0;
};

// Called from the thread that runs the library call, or from worker
// threads of that call (a fetch downloads several files at once, see
// Options::max_connections). Implementations must not throw, must return
// quickly (byte events are sent from inside the transfers, and every thread
// of the Client waits while one event is delivered) and must not call the
// Client. A Client never calls its sink from two threads at the same time:
// the events of all its calls are delivered one after another, so a sink
// need not be thread-safe unless it is shared by several Clients. Events
// about one file arrive in order; events of different files interleave.
// No lock is held while the sink runs: a child that fork() makes meanwhile
// on another thread may use the Client. A child made in the sink itself
// must exec or _exit before returning from it: one that returns into the
// parent's call is ended at once with _exit(1), after one line on stderr
// (docs/embedding.md, "Threads").
class KERNHUB_API EventSink {
public:
    virtual ~EventSink();
    virtual void on_event(const Event& event) noexcept = 0;
};

}  // namespace kernhub
