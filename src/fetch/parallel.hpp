// Running independent pieces of one call on worker threads: the files of a
// variant, the kernels of a prewarm or lock, the variants of a mirrored
// kernel (docs/performance.md, "Connections and downloads").
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <limits>
#include <system_error>
#include <thread>
#include <vector>

#include "http/http.hpp"

namespace kernhub::fetch {

// Calls work(i) for every i below `count`, on up to `workers` threads (on
// the calling thread alone when that is 1 or count is 1, or when no thread
// can be started). After a failure no further piece starts and `*stop`
// (when given) is set, so that pieces in flight can give up early; then the
// exception of the piece that failed first is rethrown. The requests the
// workers sent are credited to the calling thread
// (http::requests_on_this_thread stays whole around the call).
template <typename Work>
void run_parallel(std::size_t count, int workers, const Work& work, std::atomic<bool>* stop = nullptr) {
    const std::size_t wanted = std::min<std::size_t>(static_cast<std::size_t>(std::max(workers, 1)), count);
    constexpr std::size_t k_none = std::numeric_limits<std::size_t>::max();
    std::vector<std::exception_ptr> errors(count);
    std::atomic<std::size_t> next{0};
    std::atomic<std::size_t> first_failure{k_none};
    std::atomic<std::uint64_t> requests{0};
    auto drain = [&] {
        for (std::size_t i = next++; i < count && first_failure.load() == k_none; i = next++) {
            try {
                work(i);
            } catch (...) {
                errors[i] = std::current_exception();
                std::size_t none = k_none;
                first_failure.compare_exchange_strong(none, i);
                if (stop != nullptr) stop->store(true);
            }
        }
    };
    std::vector<std::thread> pool;
    if (wanted > 1) {
        pool.reserve(wanted);
        for (std::size_t t = 0; t < wanted; ++t) {
            try {
                pool.emplace_back([&] {
                    const std::uint64_t before = http::requests_on_this_thread();
                    drain();
                    requests += http::requests_on_this_thread() - before;
                });
            } catch (const std::system_error&) {
                break;  // no more threads (a process or container limit): go on with those started
            }
        }
    }
    if (pool.empty()) drain();
    for (std::thread& thread : pool) thread.join();
    http::credit_requests_to_this_thread(requests.load());
    if (const std::size_t failed = first_failure.load(); failed != k_none) std::rethrow_exception(errors[failed]);
}

}  // namespace kernhub::fetch
