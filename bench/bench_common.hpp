// Shared helpers for the kernhub benchmarks: scratch directories, a scrubbed
// environment, a cache warmed once from the demo hub, and a main() that
// scrubs the environment before Google Benchmark runs.
//
// Every benchmark binary reports its kernhub timings next to a baseline
// timed in the same run; bench/ratios.py prints the ratios. Nothing asserts
// on time.
#pragma once

#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/utsname.h>

#include <cstdlib>
#include <exception>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>

#include "kernhub/kernhub.hpp"

namespace khbench {

namespace fs = std::filesystem;

// A fresh directory under $TMPDIR (or /tmp), removed recursively at the end.
class ScratchDir {
public:
    explicit ScratchDir(const std::string& tag = "bench") {
        const char* tmp = std::getenv("TMPDIR");
        std::string pattern =
            std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/kernhub-" + tag + "-XXXXXX";
        if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + pattern);
        m_path = pattern;
    }
    ~ScratchDir() {
        std::error_code ec;
        fs::remove_all(m_path, ec);
    }
    ScratchDir(const ScratchDir&) = delete;
    ScratchDir& operator=(const ScratchDir&) = delete;

    const fs::path& path() const { return m_path; }

private:
    fs::path m_path;
};

// Empties a directory (the cache root of a "cold" iteration) without
// removing the directory itself.
inline void empty_directory(const fs::path& dir) {
    for (const auto& entry : fs::directory_iterator(dir)) fs::remove_all(entry.path());
}

// Variables that would change what is measured: registries, offline mode,
// endpoints, tokens, verification, proxies. Options set everything else.
inline void scrub_environment() {
    for (const char* name :
         {"KERNHUB_OFFLINE", "HF_HUB_OFFLINE", "KERNHUB_REGISTRY", "KERNHUB_VERIFY_ON_LOAD", "KERNHUB_ENDPOINT",
          "HF_ENDPOINT", "HF_TOKEN", "KERNHUB_RETRIES", "KERNHUB_CACHE", "KERNELS_CACHE", "HF_HUB_CACHE", "http_proxy",
          "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"}) {
        ::unsetenv(name);
    }
}

// The host's native CPU variant, e.g. "native-cpu-x86_64-linux".
inline std::string host_cpu_variant() {
    utsname names{};
    ::uname(&names);
    std::string machine = names.machine;
    if (machine == "arm64") machine = "aarch64";
    return "native-cpu-" + machine + "-linux";
}

// Options for a client on the default registry ("vector-add" is
// kernhub-demo/vector-add there) with an empty project directory, so a
// kernhub.json in the working directory cannot change the result.
inline kernhub::Options client_options(const fs::path& cache, const fs::path& project, bool offline,
                                       const std::string& endpoint = {}) {
    kernhub::Options options;
    options.endpoint = endpoint;
    options.cache_dir = cache.string();
    options.project_dir = project.string();
    options.offline = offline;
    options.verify_on_load = false;
    options.token = std::string();
    options.retries = 0;
    return options;
}

// A cache holding the demo kernel, fetched once from the demo hub's
// file:// endpoint. Built on first use, so --benchmark_list_tests is free.
struct DemoCache {
    ScratchDir cache{"cache"};
    ScratchDir project{"project"};
    fs::path so_path;  // the cached libvector_add.so (a snapshot symlink)

    DemoCache() {
        kernhub::Client online(
            client_options(cache.path(), project.path(), false, std::string("file://") + KERNHUB_BENCH_DEMO_HUB));
        kernhub::FetchResult fetched = online.fetch("vector-add");
        so_path = fs::path(fetched.path) / "libvector_add.so";
    }
    kernhub::Options offline_options() const { return client_options(cache.path(), project.path(), true); }
};

inline DemoCache& demo_cache() {
    static DemoCache cache;
    return cache;
}

// `symbol` of the demo kernel, dlopen'ed from the warmed cache with no
// kernhub in between: the plain-pointer baseline. Throws when it is missing.
template <class Fn>
Fn* demo_function(const char* symbol) {
    void* handle = ::dlopen(demo_cache().so_path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) throw std::runtime_error(std::string("dlopen: ") + ::dlerror());
    auto* fn = reinterpret_cast<Fn*>(::dlsym(handle, symbol));
    if (fn == nullptr) throw std::runtime_error(std::string("dlsym ") + symbol + " failed");
    return fn;
}

// Runs body(); turns an exception into SkipWithError so one failing case
// does not hide the others. Returns false when it failed.
template <class Body>
bool guarded(benchmark::State& state, Body&& body) {
    try {
        body();
        return true;
    } catch (const kernhub::Error& e) {
        state.SkipWithError((std::string("kernhub::Error: ") + e.what()).c_str());
    } catch (const std::exception& e) {
        state.SkipWithError(e.what());
    }
    return false;
}

inline benchmark::Counter per_iteration(double total) {
    return benchmark::Counter(total, benchmark::Counter::kAvgIterations);
}

}  // namespace khbench

// main(): scrub the environment, then run Google Benchmark as usual.
#define KHBENCH_MAIN()                                                    \
    int main(int argc, char** argv) {                                     \
        khbench::scrub_environment();                                     \
        benchmark::Initialize(&argc, argv);                               \
        if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1; \
        benchmark::RunSpecifiedBenchmarks();                              \
        benchmark::Shutdown();                                            \
        return 0;                                                         \
    }
