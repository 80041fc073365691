// libarchive, bound at run time on the first archive read or write
// (common/dynlib.hpp): loading kernels never needs it, so a process that
// only loads kernels never maps libarchive and what it drags in (libxml2,
// ICU, compressors). Pointer types come from <archive.h>, so they cannot
// drift from the library's signatures. The archive module is the only
// owner of libarchive.
#pragma once

#include <archive.h>
#include <archive_entry.h>

namespace kernhub::archive::detail {

// Every libarchive function the module calls; each becomes a member of the
// same name in LibArchive.
#define KERNHUB_LIBARCHIVE_FUNCTIONS(X)   \
    X(archive_entry_copy_pathname)        \
    X(archive_entry_copy_symlink)         \
    X(archive_entry_filetype)             \
    X(archive_entry_free)                 \
    X(archive_entry_hardlink)             \
    X(archive_entry_new)                  \
    X(archive_entry_pathname)             \
    X(archive_entry_pathname_utf8)        \
    X(archive_entry_set_filetype)         \
    X(archive_entry_set_gid)              \
    X(archive_entry_set_mtime)            \
    X(archive_entry_set_perm)             \
    X(archive_entry_set_size)             \
    X(archive_entry_set_uid)              \
    X(archive_entry_size)                 \
    X(archive_entry_size_is_set)          \
    X(archive_entry_sparse_count)         \
    X(archive_entry_symlink)              \
    X(archive_error_string)               \
    X(archive_read_data_block)            \
    X(archive_read_free)                  \
    X(archive_read_new)                   \
    X(archive_read_next_header)           \
    X(archive_read_open_fd)               \
    X(archive_read_support_filter_bzip2)  \
    X(archive_read_support_filter_gzip)   \
    X(archive_read_support_filter_lzma)   \
    X(archive_read_support_filter_xz)     \
    X(archive_read_support_filter_zstd)   \
    X(archive_read_support_format_gnutar) \
    X(archive_read_support_format_tar)    \
    X(archive_read_support_format_zip_seekable) \
    X(archive_write_add_filter_gzip)      \
    X(archive_write_add_filter_none)      \
    X(archive_write_add_filter_xz)        \
    X(archive_write_add_filter_zstd)      \
    X(archive_write_close)                \
    X(archive_write_data)                 \
    X(archive_write_free)                 \
    X(archive_write_header)               \
    X(archive_write_new)                  \
    X(archive_write_open_fd)              \
    X(archive_write_set_filter_option)    \
    X(archive_write_set_format_pax_restricted)

struct LibArchive {
// NOLINTNEXTLINE(bugprone-macro-parentheses): `name` is the member being declared; it cannot be parenthesised.
#define KERNHUB_LIBARCHIVE_MEMBER(name) decltype(&::name) name = nullptr;
    KERNHUB_LIBARCHIVE_FUNCTIONS(KERNHUB_LIBARCHIVE_MEMBER)
#undef KERNHUB_LIBARCHIVE_MEMBER
};

// Opens libarchive.so.13 and resolves the table, once per process. Throws
// Error(internal) naming the library and what to install, on this and
// every later call, when it cannot.
const LibArchive& libarchive();

}  // namespace kernhub::archive::detail
