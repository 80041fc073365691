// Crafts tar archives entry by entry with libarchive's writer, including
// what kernhub's own writer never produces (absolute paths, "..", hard
// links, devices, FIFOs, lying sizes), so the reader's refusals can be
// shown on real archives.
#pragma once

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace kernhub::test {

class TarBuilder {
public:
    enum class Filter { none, gzip, xz, zstd };

    explicit TarBuilder(const std::filesystem::path& file, Filter filter = Filter::none) {
        m_fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (m_fd < 0) throw std::runtime_error("cannot create " + file.string());
        m_archive = archive_write_new();
        archive_write_set_format_pax_restricted(m_archive);
        // Unbuffered: a header_only() entry reaches the file before anything after it is dropped.
        archive_write_set_bytes_per_block(m_archive, 0);
        switch (filter) {
            case Filter::gzip:
                archive_write_add_filter_gzip(m_archive);
                break;
            case Filter::xz:
                archive_write_add_filter_xz(m_archive);
                break;
            case Filter::zstd:
                archive_write_add_filter_zstd(m_archive);
                break;
            case Filter::none:
                break;
        }
        check(archive_write_open(m_archive, this, nullptr, &TarBuilder::write_cb, nullptr));
    }
    ~TarBuilder() { finish(); }
    TarBuilder(const TarBuilder&) = delete;
    TarBuilder& operator=(const TarBuilder&) = delete;

    TarBuilder& file(const std::string& path, const std::string& content) {
        struct archive_entry* entry = make(path, AE_IFREG, 0644);
        archive_entry_set_size(entry, static_cast<la_int64_t>(content.size()));
        check(archive_write_header(m_archive, entry));
        if (!content.empty()) archive_write_data(m_archive, content.data(), content.size());
        archive_entry_free(entry);
        return *this;
    }
    // A file of `size` zero bytes, streamed (compresses to almost nothing).
    TarBuilder& zeros(const std::string& path, std::uint64_t size) {
        struct archive_entry* entry = make(path, AE_IFREG, 0644);
        archive_entry_set_size(entry, static_cast<la_int64_t>(size));
        check(archive_write_header(m_archive, entry));
        std::vector<char> block(1 << 20, 0);
        for (std::uint64_t left = size; left > 0;) {
            std::size_t n = left < block.size() ? static_cast<std::size_t>(left) : block.size();
            archive_write_data(m_archive, block.data(), n);
            left -= n;
        }
        archive_entry_free(entry);
        return *this;
    }
    TarBuilder& dir(const std::string& path) { return header(make(path, AE_IFDIR, 0755)); }
    TarBuilder& symlink(const std::string& path, const std::string& target) {
        struct archive_entry* entry = make(path, AE_IFLNK, 0777);
        archive_entry_copy_symlink(entry, target.c_str());
        return header(entry);
    }
    TarBuilder& hardlink(const std::string& path, const std::string& target) {
        struct archive_entry* entry = make(path, AE_IFREG, 0644);
        archive_entry_copy_hardlink(entry, target.c_str());
        return header(entry);
    }
    // AE_IFCHR, AE_IFBLK or AE_IFIFO.
    TarBuilder& special(const std::string& path, unsigned type) {
        struct archive_entry* entry = make(path, type, 0644);
        if (type != AE_IFIFO) archive_entry_set_rdev(entry, makedev(1, 3));
        return header(entry);
    }
    // A file header that declares `size` bytes, and nothing after it: the
    // archive ends there, as a lying or truncated archive would.
    TarBuilder& header_only(const std::string& path, std::uint64_t size) {
        struct archive_entry* entry = make(path, AE_IFREG, 0644);
        archive_entry_set_size(entry, static_cast<la_int64_t>(size));
        check(archive_write_header(m_archive, entry));
        archive_entry_free(entry);
        m_discard = true;
        return *this;
    }

    void finish() {
        if (m_archive == nullptr) return;
        archive_write_close(m_archive);
        archive_write_free(m_archive);
        m_archive = nullptr;
        ::close(m_fd);
    }

private:
    static la_ssize_t write_cb(struct archive*, void* self, const void* data, size_t size) {
        auto* builder = static_cast<TarBuilder*>(self);
        // After header_only(): fail, so libarchive stops instead of padding out the declared size.
        if (builder->m_discard) return -1;
        return ::write(builder->m_fd, data, size);
    }
    struct archive_entry* make(const std::string& path, unsigned type, unsigned mode) {
        struct archive_entry* entry = archive_entry_new();
        archive_entry_copy_pathname(entry, path.c_str());
        archive_entry_set_filetype(entry, type);
        archive_entry_set_perm(entry, mode);
        return entry;
    }
    TarBuilder& header(struct archive_entry* entry) {
        check(archive_write_header(m_archive, entry));
        archive_entry_free(entry);
        return *this;
    }
    void check(int status) const {
        if (status < ARCHIVE_WARN) throw std::runtime_error(archive_error_string(m_archive));
    }

    int m_fd = -1;
    struct archive* m_archive = nullptr;
    bool m_discard = false;
};

}  // namespace kernhub::test
