// Running independent pieces of one call on worker threads: the files of a
// variant, the kernels of a prewarm, lock or mirror (docs/ARCHITECTURE.md,
// "Threads").
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <thread>
#include <vector>

#include "http/http.hpp"

namespace kernhub::hub {

// Calls work(i) for every i below `count`, on up to `workers` threads (on
// the calling thread alone when that is 1 or count is 1). After a failure
// no further piece starts; those in flight finish. The requests the workers
// sent are credited to the calling thread (http::requests_on_this_thread
// stays whole around the call). Rethrows the exception of the lowest i that
// failed.
template <typename Work>
void run_parallel(std::size_t count, int workers, const Work& work) {
    const std::size_t threads = std::min<std::size_t>(static_cast<std::size_t>(std::max(workers, 1)), count);
    if (threads <= 1) {
        for (std::size_t i = 0; i < count; ++i) work(i);
        return;
    }
    std::vector<std::exception_ptr> errors(count);
    std::atomic<std::size_t> next{0};
    std::atomic<bool> failed{false};
    std::atomic<std::uint64_t> requests{0};
    std::vector<std::thread> pool;
    pool.reserve(threads);
    for (std::size_t t = 0; t < threads; ++t) {
        pool.emplace_back([&] {
            const std::uint64_t before = http::requests_on_this_thread();
            for (std::size_t i = next++; i < count && !failed.load(); i = next++) {
                try {
                    work(i);
                } catch (...) {
                    errors[i] = std::current_exception();
                    failed = true;
                }
            }
            requests += http::requests_on_this_thread() - before;
        });
    }
    for (std::thread& thread : pool) thread.join();
    http::credit_requests_to_this_thread(requests.load());
    for (const std::exception_ptr& error : errors) {
        if (error) std::rethrow_exception(error);
    }
}

}  // namespace kernhub::hub
