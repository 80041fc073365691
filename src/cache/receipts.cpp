// The Python kernels library's verification receipts, as kernhub reads and
// removes them (docs/cache-format.md, "Other tools' data"). The folders
// from the root down to a store are followed as kernels follows them (a
// linked .verified-kernels is still the store kernels trusts); a receipt
// itself is read without following a link, and a link, FIFO or file at a
// receipt's name is removed as a name, never through it.
#include "cache/receipts.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "cache/cache.hpp"
#include "cache/io_error.hpp"
#include "cache/posix_io.hpp"
#include "common/text.hpp"
#include "digest/digest.hpp"
#include "kernhub/error.hpp"

namespace kernhub::cache {

namespace {

using detail::UniqueFd;

// The store folder `store` ("digest/v1") below <root>/.verified-kernels,
// links on the way followed, as kernels follows them; -1 with errno when it
// cannot be opened.
int open_store(const fs::path& root, const std::string& store) {
    int dir = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    const fs::path rel = fs::path(k_receipts_folder) / store;
    for (auto part = rel.begin(); dir >= 0 && part != rel.end(); ++part) {
        const int next = ::openat(dir, part->c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        const int err = errno;
        ::close(dir);
        dir = next;
        errno = err;
    }
    return dir;
}

bool is_receipt_name(const std::string& name) {
    return name.size() == 64 && is_etag(name);  // 64 lowercase hex
}

void append_field(std::string& out, const std::string& field) {
    const std::uint64_t size = field.size();
    for (int shift = 56; shift >= 0; shift -= 8) out.push_back(static_cast<char>((size >> shift) & 0xffu));
    out += field;
}

// The location a receipt's bytes name, when they are one kernels wrote.
std::optional<Receipt> parse_receipt(const std::string& text) {
    const nlohmann::json doc = nlohmann::json::parse(text, nullptr, false);
    if (!doc.is_object()) return std::nullopt;
    const auto location = doc.find("location");
    if (location == doc.end() || !location->is_object()) return std::nullopt;
    const auto field = [&](const char* key) -> std::optional<std::string> {
        const auto it = location->find(key);
        if (it == location->end() || !it->is_string()) return std::nullopt;
        return it->get<std::string>();
    };
    const auto type = field("type");
    const auto repo_id = field("repo_id");
    const auto revision = field("revision");
    const auto variant = field("variant");
    if (type != std::string("remote_kernel") || !repo_id || !revision || !variant) return std::nullopt;
    Receipt receipt;
    receipt.repo_id = *repo_id;
    receipt.commit = *revision;
    receipt.variant = *variant;
    return receipt;
}

// The bytes of the regular file `name` in `dir`, at most
// k_max_receipt_bytes; nullopt for anything else (a link, a FIFO, too big).
std::optional<std::string> read_receipt(int dir, const std::string& name) {
    UniqueFd fd(::openat(dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    if (fd.get() < 0) return std::nullopt;
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) ||
        static_cast<std::uint64_t>(st.st_size) > k_max_receipt_bytes) {
        return std::nullopt;
    }
    std::string text(k_max_receipt_bytes + 1, '\0');
    std::size_t have = 0;
    for (;;) {
        const ssize_t n = ::read(fd.get(), text.data() + have, text.size() - have);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return std::nullopt;
        if (n == 0) break;
        have += static_cast<std::size_t>(n);
        if (have > k_max_receipt_bytes) return std::nullopt;
    }
    text.resize(have);
    return text;
}

}  // namespace

std::string receipt_name(const std::string& repo_id, const std::string& commit, const std::string& variant) {
    std::string framed;
    for (const std::string* field : {&repo_id, &commit, &variant}) {
        if (framed.empty()) append_field(framed, "remote_kernel");
        append_field(framed, *field);
    }
    return digest::sha256_hex(framed);
}

std::vector<fs::path> remove_receipts(const fs::path& root, const std::string& repo_id, const std::string& commit,
                                      const std::string& variant, bool dry_run) {
    const std::string name = receipt_name(repo_id, commit, variant);
    std::vector<fs::path> removed;
    for (const char* store : k_receipt_stores) {
        const fs::path path = root / k_receipts_folder / store / name;
        UniqueFd dir(open_store(root, store));
        if (dir.get() < 0) {
            // No store (a link leading nowhere is none either, for kernels
            // too): nothing of this variant to remove there.
            if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP) continue;
            detail::throw_io_error("open the receipt store of", path.parent_path(), errno,
                                   "check permissions on the cache");
        }
        struct stat st {};
        if (::fstatat(dir.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
        // A folder at the name is no receipt kernels can read (it takes it
        // as a miss), and not kernhub's to empty: it stays.
        if (S_ISDIR(st.st_mode)) continue;
        if (!dry_run) {
            if (::unlinkat(dir.get(), name.c_str(), 0) != 0) {
                if (errno == ENOENT) continue;  // kernels replaced or removed it meanwhile
                detail::throw_io_error("remove the verification receipt", path, errno,
                                       "check permissions on the cache");
            }
            // The removal is on disk before the caller changes the variant.
            if (::fsync(dir.get()) != 0 && errno != EINVAL && errno != EROFS) {
                detail::throw_io_error("flush", path.parent_path(), errno, "check the disk");
            }
        }
        removed.push_back(path);
    }
    return removed;
}

ReceiptScan scan_receipts(const fs::path& root) {
    ReceiptScan scan;
    std::vector<Receipt>& receipts = scan.receipts;
    for (const char* store : k_receipt_stores) {
        UniqueFd dir(open_store(root, store));
        if (dir.get() < 0) continue;
        const int listing_fd = ::dup(dir.get());
        DIR* stream = listing_fd < 0 ? nullptr : ::fdopendir(listing_fd);
        if (stream == nullptr) {
            if (listing_fd >= 0) ::close(listing_fd);
            continue;
        }
        struct Closer {
            DIR* stream;
            ~Closer() { ::closedir(stream); }
        } closer{stream};
        const fs::path folder = root / k_receipts_folder / store;
        std::size_t entries = 0;
        while (const dirent* entry = ::readdir(stream)) {
            const std::string name = entry->d_name;
            if (name == "." || name == "..") continue;
            if (++entries > k_max_receipts) {
                // This store is read no further; the other is read whole.
                scan.over_limit.push_back(
                    printable(folder.string()) + " holds more than " + std::to_string(k_max_receipts) +
                    " entries (k_max_receipts); kernhub read the receipts among the first " +
                    std::to_string(k_max_receipts) + " and no more");
                break;
            }
            if (!is_receipt_name(name)) continue;  // kernels' temp files (.tmpXXXXXX) and unknown names
            const std::optional<std::string> text = read_receipt(dir.get(), name);
            if (!text) continue;
            std::optional<Receipt> receipt = parse_receipt(*text);
            if (!receipt || receipt_name(receipt->repo_id, receipt->commit, receipt->variant) != name) continue;
            struct stat st {};
            if (::fstatat(dir.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
            receipt->path = folder / name;
            receipt->size = static_cast<std::uint64_t>(st.st_size);
            const auto since_epoch =
                std::chrono::seconds(st.st_mtim.tv_sec) + std::chrono::nanoseconds(st.st_mtim.tv_nsec);
            receipt->modified = std::chrono::system_clock::time_point(
                std::chrono::duration_cast<std::chrono::system_clock::duration>(since_epoch));
            receipts.push_back(std::move(*receipt));
        }
    }
    return scan;
}

}  // namespace kernhub::cache
