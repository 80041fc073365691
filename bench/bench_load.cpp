// Start-up cost: what it costs to get a kernel's function pointer with
// kernhub, next to a bare dlopen + dlsym of the same cached file.
//
// The cache is warmed once from the demo hub (file:// endpoint); every
// kernhub case below then runs offline, so no network and no hub access.
//
// dlopen deduplicates: when the object is already loaded, glibc first
// compares the requested name with the names of loaded objects (no system
// call), and on a miss opens the file and compares device and inode with the
// loaded ones before mapping anything. kernhub never dlcloses a kernel, so
// after its first load in a process every later load is the "already open"
// case. Both cases are measured:
//
//   BM_Load_BareDlopen_AlreadyOpen   dlopen(same path) + dlsym; refcount bump
//   BM_Load_BareDlopen_OtherPath     dlopen(the blob the snapshot symlink points
//                                    at) + dlsym: same inode, different name.
//                                    Only the first call with a new name opens
//                                    the file; glibc then adds the name to the
//                                    object, so later calls equal AlreadyOpen
//   BM_Load_BareDlopen_NewName       the inode match itself: every iteration
//                                    dlopens a name never used before (a hard
//                                    link to a loaded private copy): open, read
//                                    the ELF header, fstat, close, refcount bump
//   BM_Load_BareDlopen_FirstOpen     dlopen + dlsym of a private copy that is
//                                    dlclosed (outside the timing) after each
//                                    iteration, so every iteration maps it anew
//   BM_Load_BareDlopen_FirstOpenNewFile  the same on a new copy per iteration
//                                    (made outside the timing): a never-opened
//                                    inode, as Kernhub_FirstOpen sees
//   BM_Load_Kernhub_Warm             Client::load("vector-add"): registry lookup,
//                                    cache check (ref, tree, variant record,
//                                    snapshot), ELF header check, dlopen (already
//                                    open), dlsym, resolved-table insert
//   BM_Load_Kernhub_FirstOpen        Client::load on a fresh copy of the cache
//                                    (new inodes), so dlopen really maps; the copy
//                                    and the Client are made outside the timing
//   BM_Load_Kernhub_FreshClient      Client construction + load: a process's
//                                    whole start-up for one kernel (already open)
//   BM_Fetch_Kernhub_WarmOffline     Client::fetch("vector-add"): the cache check alone
//   BM_Client_Construct              kernhub::Client construction alone (settings,
//                                    default registry parse, host detection)
//   BM_Load_Padded_BareDlopen/N      dlopen + dlsym (dlclose outside the timing) of
//                                    the demo kernel padded with zeros to N MiB
//   BM_Load_Padded_Verified/N        what verify_on_load does with the same file:
//                                    open once, copy into a memfd while hashing,
//                                    seal, dlopen /proc/self/fd/<memfd>, dlsym.
//                                    (Verified - BareDlopen) / N is the cost per MiB
//   BM_Registry_JsonParse/N          nlohmann::json::parse of a registry with N
//                                    entries: the baseline
//   BM_Registry_Parse/N              kernhub's registry parse of the same text
//                                    (duplicate keys refused, every field
//                                    checked); its ratio to the baseline stays
//                                    flat as N grows when the parse is linear
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_common.hpp"
#include "digest/digest.hpp"
#include "loader/sealed_image.hpp"
#include "loader/verified_load.hpp"
#include "registry/parse.hpp"

namespace {

using Clock = std::chrono::steady_clock;
constexpr const char* k_symbol = "kh_vector_add";

void* open_and_resolve(const char* path) {
    void* handle = ::dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) throw std::runtime_error(std::string("dlopen: ") + ::dlerror());
    void* address = ::dlsym(handle, k_symbol);
    if (address == nullptr) throw std::runtime_error(std::string("dlsym: ") + k_symbol + " not found");
    return handle;
}

// dlopen + dlsym of `path` per iteration while `path` is already loaded.
void already_open(benchmark::State& state, const std::string& path) {
    for (auto _ : state) {
        void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
        void* address = ::dlsym(handle, k_symbol);
        benchmark::DoNotOptimize(address);
        // No dlclose: kernhub does not close either, and the loaded object
        // stays pinned by the first open, so nothing is ever unmapped.
    }
}

void BM_Load_BareDlopen_AlreadyOpen(benchmark::State& state) {
    std::string path;
    if (!khbench::guarded(state, [&] {
            path = khbench::demo_cache().so_path.string();
            open_and_resolve(path.c_str());  // pin it
        })) {
        return;
    }
    already_open(state, path);
}

void BM_Load_BareDlopen_OtherPath(benchmark::State& state) {
    std::string blob;
    if (!khbench::guarded(state, [&] {
            const auto& link = khbench::demo_cache().so_path;
            open_and_resolve(link.c_str());  // loaded under the snapshot name
            blob = khbench::fs::canonical(link).string();
        })) {
        return;
    }
    already_open(state, blob);
}

void BM_Load_BareDlopen_NewName(benchmark::State& state) {
    khbench::ScratchDir dir("names");
    const auto count = static_cast<std::size_t>(state.max_iterations);
    std::vector<std::string> names;
    if (!khbench::guarded(state, [&] {
            const khbench::fs::path pinned = dir.path() / "pinned.so";
            khbench::fs::copy_file(khbench::fs::canonical(khbench::demo_cache().so_path), pinned);
            open_and_resolve(pinned.c_str());
            for (std::size_t i = 0; i < count; ++i) {
                khbench::fs::create_hard_link(pinned, dir.path() / std::to_string(i));
                names.push_back("./" + std::to_string(i));
            }
        })) {
        return;
    }
    // Every new name is appended to the object's name list, which each later
    // lookup walks with strcmp; relative names ("./17") that differ in their
    // first bytes keep that walk negligible. Hence the chdir, undone below.
    int cwd = ::open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (cwd < 0 || ::chdir(dir.path().c_str()) != 0) {
        if (cwd >= 0) ::close(cwd);
        state.SkipWithError("cannot chdir into the scratch directory");
        return;
    }
    std::size_t next = 0;
    for (auto _ : state) {
        auto start = Clock::now();
        void* handle = ::dlopen(names[next++].c_str(), RTLD_NOW | RTLD_LOCAL);
        void* address = ::dlsym(handle, k_symbol);
        auto stop = Clock::now();
        benchmark::DoNotOptimize(address);
        state.SetIterationTime(std::chrono::duration<double>(stop - start).count());
    }
    if (::fchdir(cwd) != 0) state.SkipWithError("cannot return to the working directory");
    ::close(cwd);
}

void BM_Load_BareDlopen_FirstOpen(benchmark::State& state) {
    khbench::ScratchDir dir("dlopen");
    const khbench::fs::path copy = dir.path() / "libvector_add_private.so";
    if (!khbench::guarded(state, [&] {
            khbench::fs::copy_file(khbench::fs::canonical(khbench::demo_cache().so_path), copy);
            ::dlclose(open_and_resolve(copy.c_str()));
            // The copy must really be gone after dlclose, or this would
            // measure the already-open case.
            if (::dlopen(copy.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD) != nullptr) {
                throw std::runtime_error("dlclose did not unload the private copy");
            }
        })) {
        return;
    }
    for (auto _ : state) {
        auto start = Clock::now();
        void* handle = ::dlopen(copy.c_str(), RTLD_NOW | RTLD_LOCAL);
        void* address = ::dlsym(handle, k_symbol);
        auto stop = Clock::now();
        benchmark::DoNotOptimize(address);
        ::dlclose(handle);
        state.SetIterationTime(std::chrono::duration<double>(stop - start).count());
    }
}

void BM_Load_BareDlopen_FirstOpenNewFile(benchmark::State& state) {
    khbench::ScratchDir dir("dlopen-new");
    khbench::fs::path source;
    if (!khbench::guarded(state, [&] { source = khbench::fs::canonical(khbench::demo_cache().so_path); })) return;
    std::size_t index = 0;
    for (auto _ : state) {
        const khbench::fs::path copy = dir.path() / (std::to_string(index++) + ".so");
        khbench::fs::copy_file(source, copy);
        auto start = Clock::now();
        void* handle = ::dlopen(copy.c_str(), RTLD_NOW | RTLD_LOCAL);
        void* address = ::dlsym(handle, k_symbol);
        auto stop = Clock::now();
        benchmark::DoNotOptimize(address);
        if (handle != nullptr) ::dlclose(handle);
        khbench::fs::remove(copy);
        state.SetIterationTime(std::chrono::duration<double>(stop - start).count());
    }
}

void BM_Load_Kernhub_Warm(benchmark::State& state) {
    khbench::guarded(state, [&] {
        kernhub::Client client(khbench::demo_cache().offline_options());
        for (auto _ : state) {
            kernhub::LoadResult loaded = client.load("vector-add");
            benchmark::DoNotOptimize(loaded.address);
        }
    });
}

void BM_Load_Kernhub_FirstOpen(benchmark::State& state) {
    khbench::guarded(state, [&] {
        const auto& demo = khbench::demo_cache();
        khbench::ScratchDir copies("copies");
        std::size_t index = 0;
        for (auto _ : state) {
            // Outside the timing: a fresh copy of the cache (new inodes, so
            // glibc cannot find it loaded) and a client pointing at it.
            auto cache = copies.path() / std::to_string(index++);
            khbench::fs::copy(demo.cache.path(), cache,
                              khbench::fs::copy_options::recursive | khbench::fs::copy_options::copy_symlinks);
            kernhub::Client client(khbench::client_options(cache, demo.project.path(), true));
            auto start = Clock::now();
            kernhub::LoadResult loaded = client.load("vector-add");
            auto stop = Clock::now();
            benchmark::DoNotOptimize(loaded.address);
            state.SetIterationTime(std::chrono::duration<double>(stop - start).count());
        }
    });
}

void BM_Load_Kernhub_FreshClient(benchmark::State& state) {
    khbench::guarded(state, [&] {
        const kernhub::Options options = khbench::demo_cache().offline_options();
        for (auto _ : state) {
            kernhub::Client client(options);
            kernhub::LoadResult loaded = client.load("vector-add");
            benchmark::DoNotOptimize(loaded.address);
        }
    });
}

void BM_Fetch_Kernhub_WarmOffline(benchmark::State& state) {
    khbench::guarded(state, [&] {
        kernhub::Client client(khbench::demo_cache().offline_options());
        for (auto _ : state) {
            kernhub::FetchResult fetched = client.fetch("vector-add");
            benchmark::DoNotOptimize(fetched.path.data());
        }
    });
}

void BM_Client_Construct(benchmark::State& state) {
    khbench::guarded(state, [&] {
        const kernhub::Options options = khbench::demo_cache().offline_options();
        for (auto _ : state) {
            kernhub::Client client(options);
            benchmark::DoNotOptimize(&client);
        }
    });
}

// The demo kernel followed by zeros up to `mib` MiB: the dynamic loader
// maps only its segments, while verify_on_load copies and hashes it all,
// as it would a kernel of that size.
struct PaddedKernel {
    khbench::ScratchDir dir{"padded"};
    kernhub::loader::VerifiedSource source;
};

const PaddedKernel& padded_kernel(std::int64_t mib) {
    static std::map<std::int64_t, std::unique_ptr<PaddedKernel>> made;
    auto& slot = made[mib];
    if (slot) return *slot;
    slot = std::make_unique<PaddedKernel>();
    const khbench::fs::path file = slot->dir.path() / "libvector_add_padded.so";
    khbench::fs::copy_file(khbench::fs::canonical(khbench::demo_cache().so_path), file);
    khbench::fs::resize_file(file, static_cast<std::uintmax_t>(mib) << 20);
    slot->source.blob = file;
    slot->source.label = file;
    slot->source.sha256 = kernhub::digest::sha256_file_hex(file);
    slot->source.etag = slot->source.sha256;
    slot->source.size = khbench::fs::file_size(file);
    return *slot;
}

void BM_Load_Padded_BareDlopen(benchmark::State& state) {
    const PaddedKernel* padded = nullptr;
    if (!khbench::guarded(state, [&] { padded = &padded_kernel(state.range(0)); })) return;
    const std::string path = padded->source.blob.string();
    for (auto _ : state) {
        auto start = Clock::now();
        void* handle = open_and_resolve(path.c_str());
        auto stop = Clock::now();
        ::dlclose(handle);
        state.SetIterationTime(std::chrono::duration<double>(stop - start).count());
    }
    state.counters["MiB"] = static_cast<double>(state.range(0));
}

void BM_Load_Padded_Verified(benchmark::State& state) {
    const PaddedKernel* padded = nullptr;
    if (!khbench::guarded(state, [&] { padded = &padded_kernel(state.range(0)); })) return;
    for (auto _ : state) {
        auto start = Clock::now();
        kernhub::loader::SealedImage image("bench");
        kernhub::loader::read_verified(padded->source,
                                       [&](const void* data, std::size_t size) { image.append(data, size); });
        image.seal();
        void* handle = open_and_resolve(image.proc_path().c_str());
        auto stop = Clock::now();
        ::dlclose(handle);
        state.SetIterationTime(std::chrono::duration<double>(stop - start).count());
    }
    state.counters["MiB"] = static_cast<double>(state.range(0));
}

// A registry of `n` entries, as a project or a generated one would hold.
std::string registry_text(std::int64_t n) {
    std::string text = "{\"format\": 1, \"kernels\": {";
    for (std::int64_t i = 0; i < n; ++i) {
        if (i > 0) text += ", ";
        const std::string id = std::to_string(i);
        text += "\"kernel-" + id + "\": {\"repo_id\": \"org-" + id + "/kernel-" + id +
                "\", \"revision\": \"v1\", \"symbol\": \"kh_fn_" + id + "\"}";
    }
    return text + "}}";
}

void BM_Registry_JsonParse(benchmark::State& state) {
    const std::string text = registry_text(state.range(0));
    for (auto _ : state) benchmark::DoNotOptimize(nlohmann::json::parse(text));
    state.counters["entries"] = static_cast<double>(state.range(0));
}

void BM_Registry_Parse(benchmark::State& state) {
    const std::string text = registry_text(state.range(0));
    for (auto _ : state) benchmark::DoNotOptimize(kernhub::registry::detail::parse_document(text, "bench.json"));
    state.counters["entries"] = static_cast<double>(state.range(0));
}

}  // namespace

BENCHMARK(BM_Registry_JsonParse)->Unit(benchmark::kMillisecond)->Arg(10000)->Arg(40000)->Arg(150000);
BENCHMARK(BM_Registry_Parse)->Unit(benchmark::kMillisecond)->Arg(10000)->Arg(40000)->Arg(150000);
BENCHMARK(BM_Load_Padded_BareDlopen)->UseManualTime()->Arg(1)->Arg(16)->Arg(64);
BENCHMARK(BM_Load_Padded_Verified)->UseManualTime()->Arg(1)->Arg(16)->Arg(64);
BENCHMARK(BM_Load_BareDlopen_AlreadyOpen);
BENCHMARK(BM_Load_BareDlopen_OtherPath);
// A fixed count: every iteration needs its own, prepared name.
BENCHMARK(BM_Load_BareDlopen_NewName)->UseManualTime()->Iterations(500);
BENCHMARK(BM_Load_BareDlopen_FirstOpen)->UseManualTime();
BENCHMARK(BM_Load_BareDlopen_FirstOpenNewFile)->UseManualTime();
BENCHMARK(BM_Load_Kernhub_Warm);
// Each iteration leaves one more object loaded (kernhub never dlcloses), so
// the count is fixed and small.
BENCHMARK(BM_Load_Kernhub_FirstOpen)->UseManualTime()->Iterations(100);
BENCHMARK(BM_Load_Kernhub_FreshClient);
BENCHMARK(BM_Fetch_Kernhub_WarmOffline);
BENCHMARK(BM_Client_Construct);

KHBENCH_MAIN()
