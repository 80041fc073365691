// The real Sigstore vectors committed in tests/sigstore/vectors/ (bundles
// from sigstore-python's test assets, the staging instance's root) and the
// production root kernhub builds in (src/sigstore/root/); each folder's
// provenance.json records where every file came from
// (test_provenance.cpp checks it).
#pragma once

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "digest/digest.hpp"
#include "kernhub/error.hpp"
#include "support/build_paths.hpp"
#include "support/slurp.hpp"

namespace kernhub::test::sigstore_vectors {

namespace fs = std::filesystem;
using nlohmann::json;

inline fs::path dir() {
    return fs::path(KERNHUB_SOURCE_DIR) / "tests" / "sigstore" / "vectors";
}

// The public-good instance's root, the one compiled into kernhub.
inline fs::path production_root() {
    return fs::path(KERNHUB_SOURCE_DIR) / "src" / "sigstore" / "root" / "trusted_root.json";
}

inline std::string read(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return kernhub::test::read_all(in);
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
