// A warm start maps neither libcurl nor libcrypto nor libarchive
// (docs/embedding.md, "Start-up cost and the network stack"). Bindings
// and mappings last for the process, so every case runs its kernhub calls
// in a forked child that reports what /proc/self/maps holds afterwards;
// this process itself never calls kernhub.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <string>

#include "kernhub/kernhub.hpp"
#include "support/forked.hpp"

namespace fs = std::filesystem;

namespace {

// What a child did: "ok" and a value, or "error" with the code and message,
// and which of the watched libraries it had mapped when it ended.
struct Report {
    std::string status;
    std::string value;
    std::set<std::string> mapped;
    bool maps(const std::string& library) const { return mapped.count(library) != 0; }
};

const char* const k_watched[] = {"libcurl", "libcrypto", "libssl", "libarchive", "libcuda"};

std::string mapped_libraries() {
    std::ifstream maps("/proc/self/maps");
    std::set<std::string> found;
    for (std::string line; std::getline(maps, line);) {
        for (const char* library : k_watched) {
            if (line.find(std::string("/") + library) != std::string::npos) found.insert(library);
        }
    }
    std::string out;
    for (const std::string& library : found) out += " " + library;
    return out;
}

// Runs `body` in a forked child and reads its report.
Report in_child(const std::function<std::string()>& body) {
    const kernhub::test::Forked child = kernhub::test::run_forked([&] {
        std::string out;
        try {
            out = "ok " + body() + "\n";
        } catch (const kernhub::Error& error) {
            out = "error " + std::to_string(static_cast<int>(error.code())) + " " + error.message() + "\n";
        } catch (const std::exception& error) {
            out = std::string("error -1 ") + error.what() + "\n";
        }
        return out + "mapped" + mapped_libraries() + "\n";
    });
    const std::string& text = child.out;
    REQUIRE(child.ok());

    Report report;
    std::istringstream lines(text);
    std::string first;
    std::string second;
    REQUIRE(std::getline(lines, first));
    REQUIRE(std::getline(lines, second));
    INFO("child reported: " << text);
    const auto space = first.find(' ');
    report.status = first.substr(0, space);
    report.value = space == std::string::npos ? "" : first.substr(space + 1);
    std::istringstream names(second);
    std::string word;
    names >> word;
    REQUIRE(word == "mapped");
    while (names >> word) report.mapped.insert(word);
    return report;
}

class TempCache {
public:
    TempCache() {
        std::string pattern = (fs::temp_directory_path() / "kernhub-lazyload-XXXXXX").string();
        REQUIRE(::mkdtemp(pattern.data()) != nullptr);
        m_root = pattern;
    }
    ~TempCache() {
        std::error_code ignored;
        fs::remove_all(m_root, ignored);
    }
    const fs::path& root() const { return m_root; }

private:
    fs::path m_root;
};

// Everything explicit, so that the environment running the tests
// (KERNHUB_OFFLINE, HF_TOKEN, a kernhub.json in the working folder) cannot
// change what a case does.
kernhub::Options options_for(const TempCache& cache, const std::string& endpoint) {
    kernhub::Options options;
    options.endpoint = endpoint;
    options.cache_dir = (cache.root() / "cache").string();
    options.project_dir = cache.root().string();
    options.offline = false;
    options.token = std::string();
    options.verify_on_load = false;
    options.retries = 0;
    return options;
}

const std::string k_demo_endpoint = std::string("file://") + KERNHUB_DEMO_HUB;
// Nothing listens on port 1: any request there fails at once.
const std::string k_dead_endpoint = "http://127.0.0.1:1";

// Fills the cache from the demo hub on disk; returns the commit.
std::string warm(const TempCache& cache) {
    Report report =
        in_child([&] { return kernhub::Client(options_for(cache, k_demo_endpoint)).fetch("vector-add").commit; });
    INFO("warm-up: " << report.status << " " << report.value);
    REQUIRE(report.status == "ok");
    REQUIRE(report.value.size() == 40);
    // A file:// hub is read from disk without libcurl; the downloads are
    // hashed, so libcrypto is bound.
    CHECK_FALSE(report.maps("libcurl"));
    CHECK(report.maps("libcrypto"));
    CHECK_FALSE(report.maps("libarchive"));
    return report.value;
}

std::string load_address(kernhub::Client& client, const std::string& ref, const std::string& symbol = {}) {
    kernhub::LoadResult result = client.load(ref, symbol);
    if (result.address == nullptr) throw std::runtime_error("load returned a null address");
    return result.fetch.commit;
}

}  // namespace

TEST_CASE("an offline load from a warm cache maps no libcurl, libcrypto or libarchive", "[lazyload]") {
    TempCache cache;
    const std::string commit = warm(cache);
    Report report = in_child([&] {
        kernhub::Options options = options_for(cache, k_demo_endpoint);
        options.offline = true;
        kernhub::Client client(options);
        return load_address(client, "vector-add");
    });
    INFO(report.status << " " << report.value);
    REQUIRE(report.status == "ok");
    CHECK(report.value == commit);
    CHECK_FALSE(report.maps("libcurl"));
    CHECK_FALSE(report.maps("libssl"));
    CHECK_FALSE(report.maps("libcrypto"));
    CHECK_FALSE(report.maps("libarchive"));
}

TEST_CASE("a load pinned to a cached commit sends no request and binds no libcurl", "[lazyload]") {
    TempCache cache;
    const std::string commit = warm(cache);
    Report report = in_child([&] {
        kernhub::Client client(options_for(cache, k_dead_endpoint));
        return load_address(client, "kernhub-demo/vector-add@" + commit, "kh_vector_add");
    });
    INFO(report.status << " " << report.value);
    REQUIRE(report.status == "ok");
    CHECK(report.value == commit);
    CHECK_FALSE(report.maps("libcurl"));
    CHECK_FALSE(report.maps("libcrypto"));
    CHECK_FALSE(report.maps("libarchive"));
}

TEST_CASE("verify_on_load binds libcrypto but not libcurl", "[lazyload]") {
    TempCache cache;
    const std::string commit = warm(cache);
    Report report = in_child([&] {
        kernhub::Options options = options_for(cache, k_dead_endpoint);
        options.offline = true;
        options.verify_on_load = true;
        kernhub::Client client(options);
        return load_address(client, "vector-add");
    });
    INFO(report.status << " " << report.value);
    REQUIRE(report.status == "ok");
    CHECK(report.value == commit);
    CHECK(report.maps("libcrypto"));
    CHECK_FALSE(report.maps("libcurl"));
    CHECK_FALSE(report.maps("libarchive"));
}

TEST_CASE("creating a client for an HTTP hub binds nothing, its first request binds libcurl", "[lazyload]") {
    TempCache cache;
    Report idle = in_child([&] {
        kernhub::Client client(options_for(cache, k_dead_endpoint));
        return std::to_string(client.list().size());
    });
    REQUIRE(idle.status == "ok");
    CHECK_FALSE(idle.maps("libcurl"));
    CHECK_FALSE(idle.maps("libcrypto"));

    // A cold cache: resolving "main" needs the hub, which refuses the
    // connection; the attempt itself must have bound libcurl.
    Report cold = in_child([&] {
        kernhub::Client client(options_for(cache, k_dead_endpoint));
        return load_address(client, "vector-add");
    });
    INFO(cold.status << " " << cold.value);
    REQUIRE(cold.status == "error");
    CHECK(cold.value.rfind(std::to_string(static_cast<int>(kernhub::ErrorCode::network)) + " ", 0) == 0);
    CHECK(cold.maps("libcurl"));
}
