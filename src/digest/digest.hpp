// Streaming digests over OpenSSL EVP. The digest module is the only owner of
// OpenSSL in kernhub (digest/libcrypto.hpp, which sigstore verifies
// through too); libcrypto is bound at run time when the first Hasher is made
// (common/dynlib.hpp), so code that hashes nothing never maps it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kernhub::digest {

enum class Algorithm { sha1, sha256, sha512 };

using Bytes = std::vector<std::uint8_t>;

// A move-only streaming hash. update() may be called any number of times;
// finish() returns the digest and leaves the hasher unusable until reset().
class Hasher {
public:
    explicit Hasher(Algorithm algorithm);
    ~Hasher();
    Hasher(Hasher&&) noexcept;
    Hasher& operator=(Hasher&&) noexcept;
    Hasher(const Hasher&) = delete;
    Hasher& operator=(const Hasher&) = delete;

    void update(const void* data, std::size_t size);
    Bytes finish();
    void reset();
    Algorithm algorithm() const noexcept { return m_algorithm; }

private:
    struct Ctx;
    Algorithm m_algorithm;
    std::unique_ptr<Ctx> m_ctx;
};

// Git's blob object id: SHA1("blob " + decimal size + "\0" + content).
// Streamed: construct with the final size, feed the content, finish.
class GitBlobHasher {
public:
    explicit GitBlobHasher(std::uint64_t size);
    void update(const void* data, std::size_t size) { m_hasher.update(data, size); }
    std::string finish_hex();

private:
    Hasher m_hasher;
};

std::string to_hex(const Bytes& bytes);
// "0x1f": an integer in lower-case hex without leading zeros, for messages
// that name offsets, magic numbers and flags.
std::string to_hex_literal(std::uint64_t value);
// nullopt on odd length or a non-hex character; accepts upper and lower case.
std::optional<Bytes> from_hex(const std::string& hex);
std::string to_base64(const Bytes& bytes);
// nullopt on malformed input (standard alphabet, '=' padding required).
std::optional<Bytes> from_base64(const std::string& text);

// Opens `path` once, reports its size (fstat of the open file), then hands
// its bytes to on_chunk in order. Either callback may throw to stop. Throws
// Error(internal) naming the path when it cannot be read, is not a regular
// file, or changes size while read. follow_links=false: a symlink at `path`
// is refused (ELOOP) instead of read through, and a FIFO never blocks the open.
void read_chunks(const std::filesystem::path& path, const std::function<void(std::uint64_t)>& on_size,
                 const std::function<void(const void*, std::size_t)>& on_chunk, bool follow_links = true);

// One-shot helpers reading a file in chunks. Throw Error(internal) naming the
// path when it cannot be read.
std::string sha256_file_hex(const std::filesystem::path& path);
std::string git_blob_sha1_file_hex(const std::filesystem::path& path);
std::string sha256_hex(const std::string& data);

}  // namespace kernhub::digest
