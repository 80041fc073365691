// Network cost: kernhub against the real loopback hub server
// (tests/support/hub_server.py on 127.0.0.1, LFS blobs on a "CDN" at
// 127.0.0.2), next to plain libcurl doing the same HTTP requests.
//
// The hub holds kernhub-test/vector-add laid out like the test suite's
// standard hub: branch main with the host's native CPU variant (the demo
// libvector_add.so as an LFS file, plus metadata.json), variants for other
// machines, a torch variant and a README.
//
//   BM_Fetch_CurlGet              baseline: one GET of .../revision/main with a
//                                 reused easy handle (keep-alive)
//   BM_Fetch_Kernhub_WarmBranch   Client::fetch("kernhub-test/vector-add"), cache
//                                 warm: resolves the branch (1 request), then the
//                                 cache check
//   BM_Fetch_Kernhub_WarmCommit   the same at the 40-hex commit: 0 requests
//   BM_Fetch_CurlCold             baseline: the 5 GETs of a cold fetch (revision,
//                                 tree, metadata.json, the .so and its CDN
//                                 redirect), bodies kept in memory
//   BM_Fetch_CurlColdFsync        the same, writing the two files to disk the
//                                 careful way (temp, fsync, rename, fsync dir)
//   BM_Fetch_Kernhub_Cold         Client::fetch into an emptied cache root per
//                                 iteration (emptying is outside the timing)
//   BM_Store_AtomicSmallWrite     reference: one 40-byte file written the careful
//                                 way, what rewriting a refs/ file costs
//
// The server is HubServer exactly as the tests run it, so both sides of a
// ratio pay the same server-side cost and the ratio shows the client's.
//
// Counters: requests and bytes per iteration as the client counts them
// (kernhub: FetchResult::requests and ::bytes_downloaded, file bytes only;
// curl: transfers incl. redirects and body bytes), and server_requests: what
// the server logged for one extra, untimed operation.
#include <curl/curl.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>

#include "bench_common.hpp"
#include "support/build_paths.hpp"
#include "support/hub_server.hpp"
#include "support/process.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;
namespace fs = khbench::fs;

constexpr const char* k_repo = "kernhub-test/vector-add";

// The hub tree, made on first use.
struct HubTree {
    khbench::ScratchDir dir{"hub"};
    fs::path root = dir.path() / "hub";
    std::string variant = khbench::host_cpu_variant();

    HubTree() {
        const std::string own = "build/" + variant + "/";
        const std::string other = variant.find("x86_64") != std::string::npos ? "build/native-cpu-aarch64-linux/"
                                                                              : "build/native-cpu-x86_64-linux/";
        json files = {
            {"README.md", {{"text", "vector-add, served for the benchmarks\n"}}},
            {own + "libvector_add.so", {{"path", KERNHUB_BENCH_VECTOR_ADD_SO}, {"lfs", true}}},
            {other + "libvector_add.so", {{"text", "built for another machine"}, {"lfs", true}}},
            {"build/native-cu128-x86_64-linux/libvector_add.so",
             {{"text", "stands in for a CUDA build"}, {"lfs", true}}},
            {"build/torch28-cxx11-cu128-x86_64-linux/vector_add/__init__.py", {{"text", "import torch\n"}}},
        };
        json spec = {{"repos",
                      {{{"repo_id", k_repo},
                        {"type", "kernel"},
                        {"commits",
                         {{{"message", "bench commit"},
                           {"branches", {"main", "v1"}},
                           {"metadata", true},
                           {"files", files}}}}}}}};
        const fs::path spec_path = dir.path() / "spec.json";
        std::ofstream(spec_path) << spec.dump(2);
        auto made =
            kernhub::test::run_process({KERNHUB_PYTHON, std::string(KERNHUB_SOURCE_DIR) + "/examples/hub/make_hub.py",
                                        "--spec", spec_path.string(), "--out", root.string()});
        if (made.exit_code != 0) throw std::runtime_error("make_hub.py failed:\n" + made.err);
    }
};

HubTree& hub_tree() {
    static HubTree tree;
    return tree;
}

// A running hub_server.py over the tree.
struct Hub {
    kernhub::test::HubServer server;
    std::string variant;
    std::string commit;

    Hub() : server(hub_tree().root), variant(hub_tree().variant) {
        auto reply = kernhub::test::http_request("GET", revision_url());
        if (reply.status != 200) throw std::runtime_error("the hub did not answer " + revision_url());
        commit = json::parse(reply.body).at("sha").get<std::string>();
    }

    const std::string& endpoint() const { return server.endpoint(); }
    std::string api(const std::string& rest) const { return endpoint() + "/api/kernels/" + k_repo + "/" + rest; }
    std::string revision_url() const { return api("revision/main"); }
    std::string tree_url() const { return api("tree/" + commit + "/build?recursive=true"); }
    std::string file_url(const std::string& name) const {
        return endpoint() + "/kernels/" + k_repo + "/resolve/" + commit + "/build/" + variant + "/" + name;
    }
    // Forgets the server's request log (it grows with every request) and
    // returns how many requests `op` made.
    template <class Op>
    double server_requests(Op op) {
        server.reset();
        op();
        return static_cast<double>(server.stats().at("requests").size());
    }
};

// One server for the whole run, started on first use (so
// --benchmark_list_tests and filtered runs that skip it start nothing).
Hub& hub() {
    hub_tree();  // made first, so it outlives the server at exit
    static Hub instance;
    return instance;
}

// A reused libcurl handle: the baseline client.
class Curl {
public:
    Curl() : m_curl(curl_easy_init()) {
        if (m_curl == nullptr) throw std::runtime_error("curl_easy_init failed");
        curl_easy_setopt(m_curl, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(m_curl, CURLOPT_WRITEFUNCTION, &Curl::append);
        curl_easy_setopt(m_curl, CURLOPT_WRITEDATA, &m_body);
    }
    ~Curl() { curl_easy_cleanup(m_curl); }
    Curl(const Curl&) = delete;
    Curl& operator=(const Curl&) = delete;

    // GET url (following redirects when asked) into body(); throws unless 200.
    const std::string& get(const std::string& url, bool follow = false) {
        m_body.clear();
        curl_easy_setopt(m_curl, CURLOPT_URL, url.c_str());
        curl_easy_setopt(m_curl, CURLOPT_FOLLOWLOCATION, follow ? 1L : 0L);
        CURLcode code = curl_easy_perform(m_curl);
        long status = 0;
        curl_easy_getinfo(m_curl, CURLINFO_RESPONSE_CODE, &status);
        if (code != CURLE_OK || status != 200) {
            throw std::runtime_error("GET " + url + ": " + curl_easy_strerror(code) + ", HTTP " +
                                     std::to_string(status));
        }
        long redirects = 0;
        curl_easy_getinfo(m_curl, CURLINFO_REDIRECT_COUNT, &redirects);
        m_requests += 1 + static_cast<std::uint64_t>(redirects);
        m_bytes += m_body.size();
        return m_body;
    }
    std::uint64_t requests() const { return m_requests; }
    std::uint64_t bytes() const { return m_bytes; }

private:
    static std::size_t append(char* data, std::size_t size, std::size_t count, void* body) {
        static_cast<std::string*>(body)->append(data, size * count);
        return size * count;
    }
    CURL* m_curl;
    std::string m_body;
    std::uint64_t m_requests = 0;
    std::uint64_t m_bytes = 0;
};

void report(benchmark::State& state, std::uint64_t requests, std::uint64_t bytes, double server_requests) {
    state.counters["requests"] = khbench::per_iteration(static_cast<double>(requests));
    state.counters["bytes"] = khbench::per_iteration(static_cast<double>(bytes));
    state.counters["server_requests"] = server_requests;
}

// Writes content to dir/name through a temp file: write, fsync, rename,
// fsync the directory. What a crash-safe downloader does per file.
void write_durably(const fs::path& dir, const std::string& name, const std::string& content) {
    const fs::path temp = dir / ("." + name + ".tmp");
    int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) throw std::runtime_error("cannot create " + temp.string());
    bool ok = ::write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size());
    ok = ::fsync(fd) == 0 && ok;
    ok = ::close(fd) == 0 && ok;
    ok = ok && ::rename(temp.c_str(), (dir / name).c_str()) == 0;
    int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ok = ok && dfd >= 0 && ::fsync(dfd) == 0;
    if (dfd >= 0) ::close(dfd);
    if (!ok) throw std::runtime_error("cannot write " + (dir / name).string());
}

kernhub::Options online_options(const Hub& h, const fs::path& cache, const fs::path& project) {
    kernhub::Options options = khbench::client_options(cache, project, false, h.endpoint());
    options.no_default_registry = true;
    return options;
}

// ---- warm ------------------------------------------------------------------

void BM_Fetch_CurlGet(benchmark::State& state) {
    khbench::guarded(state, [&] {
        Hub& h = hub();
        Curl curl;
        const std::string url = h.revision_url();
        double logged = h.server_requests([&] { curl.get(url); });
        Curl timed;
        for (auto _ : state) benchmark::DoNotOptimize(timed.get(url).data());
        report(state, timed.requests(), timed.bytes(), logged);
    });
}

void warm_fetch(benchmark::State& state, bool by_commit) {
    khbench::guarded(state, [&] {
        Hub& h = hub();
        khbench::ScratchDir cache("cache");
        khbench::ScratchDir project("project");
        kernhub::Client client(online_options(h, cache.path(), project.path()));
        client.fetch(k_repo);  // the one cold fetch that makes the cache warm
        const std::string ref = by_commit ? std::string(k_repo) + "@" + h.commit : std::string(k_repo);
        double logged = h.server_requests([&] { client.fetch(ref); });
        std::uint64_t requests = 0;
        std::uint64_t bytes = 0;
        for (auto _ : state) {
            kernhub::FetchResult fetched = client.fetch(ref);
            requests += fetched.requests;
            bytes += fetched.bytes_downloaded;
        }
        report(state, requests, bytes, logged);
    });
}

void BM_Fetch_Kernhub_WarmBranch(benchmark::State& state) {
    warm_fetch(state, false);
}

void BM_Fetch_Kernhub_WarmCommit(benchmark::State& state) {
    warm_fetch(state, true);
}

// ---- cold ------------------------------------------------------------------

// The five requests of a cold fetch; the bodies of the two files are handed
// to keep(name, body).
template <class Keep>
void cold_requests(Curl& curl, const Hub& h, Keep keep) {
    benchmark::DoNotOptimize(curl.get(h.revision_url()).data());
    benchmark::DoNotOptimize(curl.get(h.tree_url()).data());
    keep("metadata.json", curl.get(h.file_url("metadata.json")));
    keep("libvector_add.so", curl.get(h.file_url("libvector_add.so"), true));
}

void BM_Fetch_CurlCold(benchmark::State& state) {
    khbench::guarded(state, [&] {
        Hub& h = hub();
        auto discard = [](const std::string&, const std::string& body) { benchmark::DoNotOptimize(body.data()); };
        Curl probe;
        double logged = h.server_requests([&] { cold_requests(probe, h, discard); });
        Curl curl;
        for (auto _ : state) {
            auto start = Clock::now();
            cold_requests(curl, h, discard);
            state.SetIterationTime(std::chrono::duration<double>(Clock::now() - start).count());
        }
        report(state, curl.requests(), curl.bytes(), logged);
    });
}

void BM_Fetch_CurlColdFsync(benchmark::State& state) {
    khbench::guarded(state, [&] {
        Hub& h = hub();
        khbench::ScratchDir out("out");
        auto keep = [&](const std::string& name, const std::string& body) { write_durably(out.path(), name, body); };
        Curl probe;
        double logged = h.server_requests([&] { cold_requests(probe, h, keep); });
        Curl curl;
        for (auto _ : state) {
            khbench::empty_directory(out.path());
            auto start = Clock::now();
            cold_requests(curl, h, keep);
            state.SetIterationTime(std::chrono::duration<double>(Clock::now() - start).count());
        }
        report(state, curl.requests(), curl.bytes(), logged);
    });
}

void BM_Fetch_Kernhub_Cold(benchmark::State& state) {
    khbench::guarded(state, [&] {
        Hub& h = hub();
        khbench::ScratchDir cache("cache");
        khbench::ScratchDir project("project");
        // One client for the whole run, as in a long-lived process: its curl
        // handle keeps the connections, like the baseline's.
        kernhub::Client client(online_options(h, cache.path(), project.path()));
        double logged = h.server_requests([&] { client.fetch(k_repo); });
        std::uint64_t requests = 0;
        std::uint64_t bytes = 0;
        for (auto _ : state) {
            khbench::empty_directory(cache.path());
            auto start = Clock::now();
            kernhub::FetchResult fetched = client.fetch(k_repo);
            state.SetIterationTime(std::chrono::duration<double>(Clock::now() - start).count());
            requests += fetched.requests;
            bytes += fetched.bytes_downloaded;
        }
        report(state, requests, bytes, logged);
    });
}

void BM_Store_AtomicSmallWrite(benchmark::State& state) {
    khbench::guarded(state, [&] {
        khbench::ScratchDir dir("ref");
        const std::string commit(40, 'a');
        for (auto _ : state) write_durably(dir.path(), "main", commit);
    });
}

}  // namespace

// Wall time decides the iteration count: the CPU time of a network
// client is mostly idle waiting.
BENCHMARK(BM_Fetch_CurlGet)->UseRealTime();
BENCHMARK(BM_Fetch_Kernhub_WarmBranch)->UseRealTime();
BENCHMARK(BM_Fetch_Kernhub_WarmCommit)->UseRealTime();
BENCHMARK(BM_Fetch_CurlCold)->UseManualTime();
BENCHMARK(BM_Fetch_CurlColdFsync)->UseManualTime();
BENCHMARK(BM_Fetch_Kernhub_Cold)->UseManualTime();
BENCHMARK(BM_Store_AtomicSmallWrite)->UseRealTime();

KHBENCH_MAIN()
