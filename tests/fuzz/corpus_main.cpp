// The regular build's stand-in for libFuzzer's driver: feeds every file of
// the corpus folders (or files) named on the command line to the target's
// LLVMFuzzerTestOneInput, so that each fuzz target runs its seeds and the
// regression inputs as a plain test under gcc (ctest label `fuzz`). An
// input that crashes or throws anything but kernhub::Error fails the test;
// an empty corpus fails it too, so a misplaced folder cannot pass.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "fuzz_target.hpp"

namespace fs = std::filesystem;

namespace {

std::vector<std::uint8_t> read_bytes(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::vector<std::uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

int main(int argc, char** argv) {
    std::vector<fs::path> inputs;
    for (int i = 1; i < argc; ++i) {
        const fs::path arg = argv[i];
        if (fs::is_directory(arg)) {
            for (const auto& item : fs::directory_iterator(arg))
                if (item.is_regular_file()) inputs.push_back(item.path());
        } else {
            inputs.push_back(arg);
        }
    }
    std::sort(inputs.begin(), inputs.end());
    if (inputs.empty()) {
        std::fprintf(stderr, "no corpus files found in the folders or files given; usage: %s CORPUS_DIR_OR_FILE...\n",
                     argv[0]);
        return 1;
    }
    for (const auto& input : inputs) {
        std::fprintf(stderr, "running %s\n", input.c_str());
        const std::vector<std::uint8_t> bytes = read_bytes(input);
        // An exactly sized heap copy, so that a sanitizer build sees a read
        // one byte past the end of the input.
        std::vector<std::uint8_t> exact(bytes.begin(), bytes.end());
        LLVMFuzzerTestOneInput(exact.empty() ? nullptr : exact.data(), exact.size());
    }
    std::fprintf(stderr, "%zu corpus inputs ran without a finding\n", inputs.size());
    return 0;
}
