#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "digest/digest.hpp"
#include "digest/libcrypto.hpp"
#include "kernhub/error.hpp"
#include "sigstore/detail.hpp"
#include "support/temp_dir.hpp"

namespace fs = std::filesystem;
using kernhub::digest::Algorithm;
using kernhub::digest::Bytes;
using kernhub::digest::GitBlobHasher;
using kernhub::digest::Hasher;
using kernhub::test::TempDir;

namespace {

std::string hash_hex(Algorithm algorithm, const std::string& data) {
    Hasher hasher(algorithm);
    hasher.update(data.data(), data.size());
    return kernhub::digest::to_hex(hasher.finish());
}

std::string pattern_data(std::size_t size) {
    std::string data(size, '\0');
    for (std::size_t i = 0; i < size; ++i) data[i] = static_cast<char>((i * 131 + 7) % 251);
    return data;
}

void write_text(const fs::path& path, const std::string& content) {
    std::ofstream out(path, std::ios::binary);
    out << content;
}

Bytes bytes_of(const std::string& text) {
    return Bytes(text.begin(), text.end());
}

}  // namespace

TEST_CASE("known digest vectors", "[digest]") {
    CHECK(hash_hex(Algorithm::sha256, "") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    CHECK(hash_hex(Algorithm::sha256, "abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    CHECK(hash_hex(Algorithm::sha1, "abc") == "a9993e364706816aba3e25717850c26c9cd0d89d");
    CHECK(hash_hex(Algorithm::sha1, "") == "da39a3ee5e6b4b0d3255bfef95601890afd80709");
    CHECK(hash_hex(Algorithm::sha512, "abc") ==
          "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a"
          "2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f");
    CHECK(kernhub::digest::sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST_CASE("streaming in odd chunk sizes equals one-shot", "[digest]") {
    const std::string data = pattern_data(100003);
    for (Algorithm algorithm : {Algorithm::sha1, Algorithm::sha256, Algorithm::sha512}) {
        const std::string expected = hash_hex(algorithm, data);
        for (std::size_t chunk :
             {std::size_t{1}, std::size_t{7}, std::size_t{13}, std::size_t{4095}, std::size_t{65537}, data.size()}) {
            CAPTURE(chunk);
            Hasher hasher(algorithm);
            for (std::size_t at = 0; at < data.size(); at += chunk) {
                hasher.update(data.data() + at, std::min(chunk, data.size() - at));
            }
            CHECK(kernhub::digest::to_hex(hasher.finish()) == expected);
        }
    }
}

TEST_CASE("hasher lifecycle: finish, reset, move", "[digest]") {
    Hasher hasher(Algorithm::sha256);
    hasher.update("abc", 3);
    const Bytes first = hasher.finish();
    CHECK(first.size() == 32);
    CHECK_THROWS_AS(hasher.update("x", 1), kernhub::Error);
    CHECK_THROWS_AS(hasher.finish(), kernhub::Error);

    hasher.reset();
    hasher.update("abc", 3);
    Hasher moved(std::move(hasher));
    CHECK(moved.algorithm() == Algorithm::sha256);
    CHECK(moved.finish() == first);
}

TEST_CASE("git blob sha1", "[digest]") {
    GitBlobHasher hello(6);
    hello.update("hel", 3);
    hello.update("lo\n", 3);
    CHECK(hello.finish_hex() == "ce013625030ba8dba906f756967f9e9ca394464a");

    GitBlobHasher empty(0);
    CHECK(empty.finish_hex() == "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391");

    // The definition itself: SHA1 over "blob <size>\0" followed by the content.
    const std::string data = pattern_data(5000);
    std::string framed = "blob 5000";
    framed.push_back('\0');
    framed += data;
    GitBlobHasher streamed(data.size());
    streamed.update(data.data(), data.size());
    CHECK(streamed.finish_hex() == hash_hex(Algorithm::sha1, framed));
}

TEST_CASE("hex round trip and malformed input", "[digest]") {
    const Bytes all = [] {
        Bytes b;
        for (int i = 0; i < 256; ++i) b.push_back(static_cast<std::uint8_t>(i));
        return b;
    }();
    const std::string hex = kernhub::digest::to_hex(all);
    CHECK(hex.substr(0, 8) == "00010203");
    CHECK(hex.substr(hex.size() - 4) == "feff");
    CHECK(kernhub::digest::from_hex(hex) == all);
    CHECK(kernhub::digest::from_hex("ABcd") == Bytes{0xab, 0xcd});
    CHECK(kernhub::digest::from_hex("") == Bytes{});

    for (const char* bad : {"a", "abc", "0g", "zz", " 00", "00 ", "0x00"}) {
        CAPTURE(bad);
        CHECK_FALSE(kernhub::digest::from_hex(bad).has_value());
    }
}

TEST_CASE("base64 round trip and malformed input", "[digest]") {
    const std::vector<std::pair<std::string, std::string>> vectors = {
        {"", ""},
        {"f", "Zg=="},
        {"fo", "Zm8="},
        {"foo", "Zm9v"},
        {"foob", "Zm9vYg=="},
        {"fooba", "Zm9vYmE="},
        {"foobar", "Zm9vYmFy"},
    };
    for (const auto& [plain, encoded] : vectors) {
        CAPTURE(plain);
        CHECK(kernhub::digest::to_base64(bytes_of(plain)) == encoded);
        CHECK(kernhub::digest::from_base64(encoded) == bytes_of(plain));
    }
    const std::string binary = pattern_data(1000);
    const Bytes raw = bytes_of(binary);
    CHECK(kernhub::digest::from_base64(kernhub::digest::to_base64(raw)) == raw);
    CHECK(kernhub::digest::from_base64("+/+/") == Bytes{0xfb, 0xff, 0xbf});

    for (const char* bad : {"Zg", "Zg=", "Zm9", "Z===", "====", "=Zg=", "Zg=a", "Zg==Zg==", "Zm9v!A==", "Zm 9v",
                            "Zm9v\n", "Zh==", "Zm9=", "-_8="}) {
        CAPTURE(bad);
        CHECK_FALSE(kernhub::digest::from_base64(bad).has_value());
    }
}

TEST_CASE("file helpers", "[digest]") {
    TempDir dir;
    const fs::path hello = dir.path() / "hello.txt";
    write_text(hello, "hello\n");
    CHECK(kernhub::digest::sha256_file_hex(hello) ==
          "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03");
    CHECK(kernhub::digest::git_blob_sha1_file_hex(hello) == "ce013625030ba8dba906f756967f9e9ca394464a");

    const fs::path empty = dir.path() / "empty";
    write_text(empty, "");
    CHECK(kernhub::digest::git_blob_sha1_file_hex(empty) == "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391");
    CHECK(kernhub::digest::sha256_file_hex(empty) ==
          "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");

    // Larger than one read buffer, to cover the chunk loop.
    const std::string big = pattern_data(300001);
    const fs::path big_path = dir.path() / "big.bin";
    write_text(big_path, big);
    CHECK(kernhub::digest::sha256_file_hex(big_path) == kernhub::digest::sha256_hex(big));
    GitBlobHasher expected(big.size());
    expected.update(big.data(), big.size());
    CHECK(kernhub::digest::git_blob_sha1_file_hex(big_path) == expected.finish_hex());
}

TEST_CASE("file helpers name the path on failure", "[digest]") {
    TempDir dir;
    const fs::path missing = dir.path() / "no-such-file.bin";
    for (int which = 0; which < 2; ++which) {
        try {
            if (which == 0) {
                kernhub::digest::sha256_file_hex(missing);
            } else {
                kernhub::digest::git_blob_sha1_file_hex(missing);
            }
            FAIL("expected an Error");
        } catch (const kernhub::Error& e) {
            CHECK(e.code() == kernhub::ErrorCode::internal);
            CHECK_THAT(e.message(), Catch::Contains(missing.string()));
        }
    }
    CHECK_THROWS_AS(kernhub::digest::sha256_file_hex(dir.path()), kernhub::Error);
}

TEST_CASE("to_hex_literal writes integers for messages", "[digest]") {
    CHECK(kernhub::digest::to_hex_literal(0) == "0x0");
    CHECK(kernhub::digest::to_hex_literal(0xba55ed50) == "0xba55ed50");
    CHECK(kernhub::digest::to_hex_literal(0xffffffffffffffffull) == "0xffffffffffffffff");
}

TEST_CASE("hashing and Sigstore verification go through one libcrypto table", "[digest]") {
    const kernhub::digest::LibCrypto& table = kernhub::digest::libcrypto();
    // The one binding serves both: the sigstore module has no table of its own.
    CHECK(&kernhub::digest::libcrypto_for_verification() == &table);
    CHECK(&kernhub::sigstore::crypto() == &table);
    CHECK_FALSE(table.verification_missing);
    // The entry points of both uses are there, and the SHA-256 each computes agrees.
    REQUIRE(table.digest != nullptr);
    REQUIRE(table.d2i_x509 != nullptr);
    REQUIRE(table.pkey_base_id != nullptr);
    REQUIRE(table.sk_value != nullptr);
    CHECK(kernhub::digest::to_hex(kernhub::sigstore::sha256(std::string_view("abc"))) ==
          kernhub::digest::sha256_hex("abc"));
}
