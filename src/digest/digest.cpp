#include "digest/digest.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <functional>

#include "digest/libcrypto.hpp"
#include "kernhub/error.hpp"

namespace kernhub::digest {

namespace {

const EVP_MD* evp_for(Algorithm algorithm) {
    switch (algorithm) {
        case Algorithm::sha1:
            return libcrypto().sha1();
        case Algorithm::sha256:
            return libcrypto().sha256();
        case Algorithm::sha512:
            return libcrypto().sha512();
    }
    return nullptr;
}

// OpenSSL keeps a per-thread error queue; drain it so one failure's text does
// not leak into an unrelated later message.
std::string openssl_error_text() {
    unsigned long code = libcrypto().err_get_error();
    std::string text = code != 0 ? libcrypto().err_error_string(code, nullptr) : "no OpenSSL error recorded";
    libcrypto().err_clear_error();
    return text;
}

[[noreturn]] void throw_openssl(const char* what) {
    throw Error(ErrorCode::internal,
                std::string("OpenSSL digest failure: ") + what +
                    "; check the OpenSSL installation (FIPS providers may disable SHA-1)",
                openssl_error_text());
}

}  // namespace

struct Hasher::Ctx {
    struct Free {
        void operator()(EVP_MD_CTX* ctx) const noexcept {
            // Only a bound libcrypto ever made a context, so libcrypto() cannot throw here.
            if (ctx != nullptr) libcrypto().md_ctx_free(ctx);
        }
    };
    std::unique_ptr<EVP_MD_CTX, Free> md;
    bool finished = false;
};

Hasher::Hasher(Algorithm algorithm) : m_algorithm(algorithm), m_ctx(std::make_unique<Ctx>()) {
    m_ctx->md.reset(libcrypto().md_ctx_new());
    if (!m_ctx->md) throw_openssl("EVP_MD_CTX_new");
    reset();
}

Hasher::~Hasher() = default;
Hasher::Hasher(Hasher&&) noexcept = default;
Hasher& Hasher::operator=(Hasher&&) noexcept = default;

void Hasher::update(const void* data, std::size_t size) {
    // A moved-from or finished hasher would silently produce a wrong digest;
    // that is a programming error, so fail loudly instead.
    if (!m_ctx || m_ctx->finished) {
        throw Error(ErrorCode::internal, "digest updated after finish(); call reset() first");
    }
    if (size == 0) return;
    if (libcrypto().digest_update(m_ctx->md.get(), data, size) != 1) throw_openssl("EVP_DigestUpdate");
}

Bytes Hasher::finish() {
    if (!m_ctx || m_ctx->finished) {
        throw Error(ErrorCode::internal, "digest finished twice; call reset() first");
    }
    Bytes out(EVP_MAX_MD_SIZE);
    unsigned int length = 0;
    if (libcrypto().digest_final(m_ctx->md.get(), out.data(), &length) != 1) {
        throw_openssl("EVP_DigestFinal_ex");
    }
    m_ctx->finished = true;
    out.resize(length);
    return out;
}

void Hasher::reset() {
    if (!m_ctx) throw Error(ErrorCode::internal, "digest reset after being moved from");
    if (libcrypto().digest_init(m_ctx->md.get(), evp_for(m_algorithm), nullptr) != 1) {
        throw_openssl("EVP_DigestInit_ex");
    }
    m_ctx->finished = false;
}

GitBlobHasher::GitBlobHasher(std::uint64_t size) : m_hasher(Algorithm::sha1) {
    // The header includes its terminating NUL, hence size() + 1.
    std::string header = "blob " + std::to_string(size);
    m_hasher.update(header.data(), header.size() + 1);
}

std::string GitBlobHasher::finish_hex() {
    return to_hex(m_hasher.finish());
}

// ---- encodings -------------------------------------------------------------

namespace {

constexpr char k_hex_digits[] = "0123456789abcdef";

}  // namespace

std::string to_hex(const Bytes& bytes) {
    std::string out;
    out.reserve(bytes.size() * 2);
    for (std::uint8_t b : bytes) {
        out.push_back(k_hex_digits[b >> 4]);
        out.push_back(k_hex_digits[b & 0x0f]);
    }
    return out;
}

std::string to_hex_literal(std::uint64_t value) {
    std::string digits;
    do {
        digits.insert(digits.begin(), k_hex_digits[value & 0xf]);
        value >>= 4;
    } while (value != 0);
    return "0x" + digits;
}

static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

std::optional<Bytes> from_hex(const std::string& hex) {
    if (hex.size() % 2 != 0) return std::nullopt;
    Bytes out;
    out.reserve(hex.size() / 2);
    for (std::size_t i = 0; i < hex.size(); i += 2) {
        int hi = hex_value(hex[i]);
        int lo = hex_value(hex[i + 1]);
        if (hi < 0 || lo < 0) return std::nullopt;
        out.push_back(static_cast<std::uint8_t>((hi << 4) | lo));
    }
    return out;
}

static const char k_base64_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string to_base64(const Bytes& bytes) {
    std::string out;
    out.reserve((bytes.size() + 2) / 3 * 4);
    for (std::size_t i = 0; i < bytes.size(); i += 3) {
        std::size_t left = bytes.size() - i;
        std::uint32_t group = std::uint32_t{bytes[i]} << 16;
        if (left > 1) group |= std::uint32_t{bytes[i + 1]} << 8;
        if (left > 2) group |= bytes[i + 2];
        out.push_back(k_base64_alphabet[(group >> 18) & 0x3f]);
        out.push_back(k_base64_alphabet[(group >> 12) & 0x3f]);
        out.push_back(left > 1 ? k_base64_alphabet[(group >> 6) & 0x3f] : '=');
        out.push_back(left > 2 ? k_base64_alphabet[group & 0x3f] : '=');
    }
    return out;
}

static int base64_value(char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

// Hand-written rather than EVP_DecodeBlock: that function skips whitespace,
// ignores padding when reporting the length and accepts '=' mid-string, and
// signature inputs must be parsed strictly.
std::optional<Bytes> from_base64(const std::string& text) {
    if (text.size() % 4 != 0) return std::nullopt;
    std::size_t padding = 0;
    if (!text.empty() && text.back() == '=') padding = text[text.size() - 2] == '=' ? 2 : 1;
    Bytes out;
    out.reserve(text.size() / 4 * 3);
    for (std::size_t i = 0; i < text.size(); i += 4) {
        bool last = i + 4 == text.size();
        std::uint32_t group = 0;
        for (std::size_t j = 0; j < 4; ++j) {
            bool pad_slot = last && j >= 4 - padding;
            int v = pad_slot ? 0 : base64_value(text[i + j]);
            if (v < 0) return std::nullopt;  // includes a stray '=' mid-string
            group = (group << 6) | static_cast<std::uint32_t>(v);
        }
        std::size_t produce = last ? 3 - padding : 3;
        // Bits beyond the last produced byte must be zero, so each byte
        // string has exactly one accepted encoding.
        if (produce < 3 && (group & ((1u << (8 * (3 - produce))) - 1)) != 0) return std::nullopt;
        for (std::size_t k = 0; k < produce; ++k) {
            out.push_back(static_cast<std::uint8_t>(group >> (16 - 8 * k)));
        }
    }
    return out;
}

// ---- files -----------------------------------------------------------------

namespace {

[[noreturn]] void throw_read_error(const std::filesystem::path& path, int err) {
    throw Error(ErrorCode::internal, "cannot read " + path.string() + ": " + std::strerror(err) +
                                         "; check that the file exists and is readable");
}

}  // namespace

// One descriptor for the size and the bytes, so the two agree.
void read_chunks(const std::filesystem::path& path, const std::function<void(std::uint64_t)>& on_size,
                 const std::function<void(const void*, std::size_t)>& on_chunk, bool follow_links) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | (follow_links ? 0 : O_NOFOLLOW));
    if (fd < 0) throw_read_error(path, errno);
    struct Closer {
        int fd;
        ~Closer() { ::close(fd); }
    } closer{fd};

    struct stat st {};
    if (::fstat(fd, &st) != 0) throw_read_error(path, errno);
    if (!S_ISREG(st.st_mode)) throw_read_error(path, EISDIR);
    on_size(static_cast<std::uint64_t>(st.st_size));

    std::array<unsigned char, std::size_t{64} * 1024> buffer{};
    std::uint64_t total = 0;
    for (;;) {
        ssize_t n = ::read(fd, buffer.data(), buffer.size());
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw_read_error(path, errno);
        if (n == 0) break;
        on_chunk(buffer.data(), static_cast<std::size_t>(n));
        total += static_cast<std::uint64_t>(n);
    }
    if (total != static_cast<std::uint64_t>(st.st_size)) {
        throw Error(ErrorCode::internal, "file " + path.string() +
                                             " changed size while being hashed; retry when "
                                             "no other process is writing it");
    }
}

std::string sha256_file_hex(const std::filesystem::path& path) {
    Hasher hasher(Algorithm::sha256);
    read_chunks(
        path, [](std::uint64_t) {}, [&](const void* data, std::size_t size) { hasher.update(data, size); });
    return to_hex(hasher.finish());
}

std::string git_blob_sha1_file_hex(const std::filesystem::path& path) {
    std::optional<GitBlobHasher> hasher;
    read_chunks(
        path, [&](std::uint64_t size) { hasher.emplace(size); },
        [&](const void* data, std::size_t size) { hasher->update(data, size); });
    return hasher->finish_hex();
}

std::string sha256_hex(const std::string& data) {
    Hasher hasher(Algorithm::sha256);
    hasher.update(data.data(), data.size());
    return to_hex(hasher.finish());
}

}  // namespace kernhub::digest
