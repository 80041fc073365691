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
    std::string text;
    std::string path;
    std::uint64_t done = 0;
    std::uint64_t total = 0;
};

// Called from the thread that runs the library call. Implementations must
// not throw. A Client shared by several threads calls its sink from each of
// them, possibly at the same time: such a sink must be thread-safe (events
// of one call arrive in order on that call's thread).
class KERNHUB_API EventSink {
public:
    virtual ~EventSink();
    virtual void on_event(const Event& event) noexcept = 0;
};

}  // namespace kernhub
