// What one Client (or one C API handle) resolved, by the reference that was
// asked for (docs/embedding.md "Threads"). Each owner has its own table:
// two Clients whose registries map one name to different kernels each keep
// their own. Filled by loads before any dispatch; a caller takes a copy of
// the address and calls through it, so the hot path never touches it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "kernhub/kernhub.hpp"

namespace kernhub::loader {

// Thread-safe. When loads of one key overlap, the one that started last
// wins, also when it ends first: a load that started earlier and ends
// later does not replace it (Client::loaded and kh_symbol follow this one
// rule).
class ResolvedTable {
public:
    // The number of a load that starts now, for publish. Never 0.
    std::uint64_t start() noexcept { return ++m_started; }
    // Records `result` under `key`, unless a load of `key` that started
    // after `started` has already been recorded.
    void publish(const std::string& key, const LoadResult& result, std::uint64_t started);
    // What the latest-started successful load of `key` resolved; nullopt
    // when none was recorded.
    std::optional<LoadResult> find(const std::string& key) const;
    std::size_t size() const;
    // For a fork handler (capi.cpp, LiveHandles): held across fork(), so a
    // child never inherits the table's mutex held by a thread it lacks.
    void lock_for_fork() const { m_mutex.lock(); }
    void unlock_after_fork() const { m_mutex.unlock(); }

private:
    struct Slot {
        LoadResult result;
        std::uint64_t started = 0;
    };
    std::atomic<std::uint64_t> m_started{0};
    mutable std::mutex m_mutex;
    std::unordered_map<std::string, Slot> m_table;
};

}  // namespace kernhub::loader
