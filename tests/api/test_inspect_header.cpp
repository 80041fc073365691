// inspect_file looks at a file's magic before anything else: a large file
// of another kind is refused after one small read.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "kernhub/inspect.hpp"
#include "support/temp_dir.hpp"

using namespace kernhub;
namespace fs = std::filesystem;

namespace {

// rchar from /proc/self/io: bytes this process asked read() and pread() for.
std::uint64_t bytes_read_by_process() {
    std::ifstream io("/proc/self/io");
    std::string key;
    std::uint64_t value = 0;
    while (io >> key >> value) {
        if (key == "rchar:") return value;
    }
    return 0;
}

}  // namespace

TEST_CASE("inspect refuses a 2 GiB file that is not ELF or a fatbin without reading it", "[api]") {
    test::TempDir dir;
    const fs::path big = dir.path() / "big.bin";
    std::ofstream(big) << "not a kernel";
    fs::resize_file(big, std::uintmax_t{2} << 30);  // sparse: costs no disk

    const std::uint64_t before = bytes_read_by_process();
    const auto start = std::chrono::steady_clock::now();
    try {
        inspect_file(big.string(), std::nullopt);
        FAIL("accepted");
    } catch (const Error& e) {
        CHECK(e.code() == ErrorCode::verification);
        CHECK(std::string(e.what()).find("neither a CUDA fatbin") != std::string::npos);
    }
    const auto took = std::chrono::steady_clock::now() - start;
    // Reading it all would be 2 GiB of read() and seconds.
    CHECK(bytes_read_by_process() - before < (1u << 20));
    CHECK(took < std::chrono::seconds(1));
}

TEST_CASE("inspect of a FIFO or a folder is refused without waiting", "[api]") {
    test::TempDir dir;
    const fs::path fifo = dir.path() / "fifo";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    for (const fs::path& path : {fifo, dir.path()}) {
        INFO(path);
        try {
            inspect_file(path.string(), std::nullopt);
            FAIL("accepted");
        } catch (const Error& e) {
            CHECK(e.code() == ErrorCode::not_found);
        }
    }
}
