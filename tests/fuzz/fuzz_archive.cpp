// Archive unpacking under the default ExtractionPolicy: the input is
// written to a file and extracted into a fresh temp directory, removed after
// every run. A refused archive must leave nothing behind, and an accepted
// one goes with its ExtractedTree: the folder around it must then be empty.
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "archive/archive.hpp"
#include "fuzz_target.hpp"

namespace fs = std::filesystem;

namespace {

// One folder per process, under TMPDIR (or /tmp), made on first use and
// removed at exit. A plain buffer, so that it outlives static destructors.
char g_work_dir[4096];

void remove_work_dir() {
    std::error_code ignored;
    fs::remove_all(g_work_dir, ignored);
}

fs::path work_dir() {
    if (g_work_dir[0] == 0) {
        const std::string pattern = (fs::temp_directory_path() / "kernhub-fuzz-archive-XXXXXX").string();
        if (pattern.size() >= sizeof g_work_dir) std::abort();
        pattern.copy(g_work_dir, pattern.size());
        if (!mkdtemp(g_work_dir)) std::abort();
        std::atexit(remove_work_dir);
    }
    return g_work_dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const fs::path file = work_dir() / "input.tar";
    const fs::path parent = work_dir() / "out";
    {
        std::ofstream out(file, std::ios::binary | std::ios::trunc);
        out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
        if (!out) std::abort();
    }
    fs::create_directories(parent);
    try {
        kernhub::archive::ExtractedTree tree =
            kernhub::archive::extract(file, parent, kernhub::archive::ExtractionPolicy{});
        if (!fs::is_directory(tree.root())) std::abort();
    } catch (const kernhub::Error&) {
    }
    // Nothing of a refused extraction stays, and an accepted one is removed
    // with its ExtractedTree.
    if (!fs::is_empty(parent)) std::abort();
    fs::remove_all(parent);
    fs::remove(file);
    return 0;
}
