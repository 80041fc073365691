#include "support/zip_craft.hpp"

#include <archive.h>
#include <archive_entry.h>

#include <stdexcept>

namespace kernhub::test {

std::string make_zip(const std::vector<std::pair<std::string, std::string>>& members) {
    struct archive* writer = archive_write_new();
    archive_write_set_format_zip(writer);
    archive_write_zip_set_compression_deflate(writer);
    std::string buffer(16u << 20, '\0');
    std::size_t used = 0;
    if (archive_write_open_memory(writer, buffer.data(), buffer.size(), &used) != ARCHIVE_OK) {
        throw std::runtime_error(std::string("make_zip: ") + archive_error_string(writer));
    }
    for (const auto& [path, content] : members) {
        struct archive_entry* entry = archive_entry_new();
        archive_entry_set_pathname(entry, path.c_str());
        archive_entry_set_filetype(entry, AE_IFREG);
        archive_entry_set_perm(entry, 0644);
        archive_entry_set_size(entry, static_cast<la_int64_t>(content.size()));
        if (archive_write_header(writer, entry) != ARCHIVE_OK ||
            archive_write_data(writer, content.data(), content.size()) != static_cast<la_ssize_t>(content.size())) {
            const std::string why = archive_error_string(writer);
            archive_entry_free(entry);
            archive_write_free(writer);
            throw std::runtime_error("make_zip: " + why);
        }
        archive_entry_free(entry);
    }
    archive_write_close(writer);
    archive_write_free(writer);
    buffer.resize(used);
    return buffer;
}

}  // namespace kernhub::test
