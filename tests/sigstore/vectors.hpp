// The real Sigstore vectors of ../shared/sigstore (bundles from
// sigstore-python's test assets, both public trusted roots): read in place,
// never copied into the project. KERNHUB_TEST_SIGSTORE_DIR (environment)
// overrides the build's default; every test here carries the tag
// [needs:sigstore-vectors], so without them the executable skips as a whole.
#pragma once

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "digest/digest.hpp"
#include "kernhub/error.hpp"
#include "support/requirements.hpp"

namespace kernhub::test::sigstore_vectors {

namespace fs = std::filesystem;
using nlohmann::json;

inline fs::path dir() {
    const char* env = std::getenv("KERNHUB_TEST_SIGSTORE_DIR");
    return env != nullptr && *env != '\0' ? fs::path(env) : fs::path(KERNHUB_TEST_SIGSTORE_DIR);
}

inline std::string why_missing() {
    for (const char* name :
         {"bundle_v3_github.whl", "bundle_v3_github.whl.sigstore", "bundle_v3.txt", "bundle_v3.txt.sigstore",
          "bundle_cve_2022_36056.txt", "bundle_cve_2022_36056.txt.sigstore", "production_trusted_root.json",
          "staging_trusted_root.json"}) {
        std::error_code ec;
        if (!fs::is_regular_file(dir() / name, ec)) {
            return "the Sigstore test vectors are absent (" + (dir() / name).string() +
                   "); set KERNHUB_TEST_SIGSTORE_DIR to a copy of ../shared/sigstore";
        }
    }
    return {};
}

inline std::string read(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

inline json bundle(const std::string& name) {
    return json::parse(read(dir() / name));
}

// The production GitHub Actions vector.
inline const std::string k_github_identity =
    "https://github.com/trailofbits/rfc8785.py/.github/workflows/release.yml@refs/tags/v0.1.2";
inline const std::string k_github_issuer = "https://token.actions.githubusercontent.com";
inline const std::string k_github_repository = "trailofbits/rfc8785.py";
// The staging vector.
inline const std::string k_staging_identity = "william@yossarian.net";
inline const std::string k_staging_issuer = "https://github.com/login/oauth";

// base64 of `text` with its byte at `index` (from the end when negative) flipped.
inline std::string flip_base64(const std::string& text, long index) {
    auto bytes = digest::from_base64(text);
    REQUIRE(bytes);
    const std::size_t at =
        index >= 0 ? static_cast<std::size_t>(index) : bytes->size() - static_cast<std::size_t>(-index);
    (*bytes)[at] ^= 0x01;
    return digest::to_base64(*bytes);
}

}  // namespace kernhub::test::sigstore_vectors
