// Reading the artifact a kind loads: from the snapshot, or with
// verify_on_load exactly the bytes hashed while they were copied from the
// blob (docs/cache.md "Loading exactly the verified bytes").
#include <algorithm>
#include <system_error>

#include "cache/cache.hpp"
#include "elf/elf_binding.hpp"
#include "kernhub/error.hpp"
#include "loader/kind.hpp"
#include "loader/verified_load.hpp"

namespace kernhub::loader {

namespace {

// Error(not_found) when the path is not a regular file, Error(internal)
// when it cannot be opened or read.
std::vector<std::uint8_t> read_file_bytes(const std::string& path) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) {
        throw Error(ErrorCode::not_found, "file " + path + " does not exist or is not a regular file");
    }
    std::vector<std::uint8_t> bytes;
    const cache::ReadStatus status = cache::read_file_into(path, bytes);
    if (status.error != 0 && !status.opened) {
        throw Error(ErrorCode::internal, "cannot open " + path + "; check permissions");
    }
    if (status.error != 0) throw Error(ErrorCode::internal, "cannot read " + path + "; check the disk");
    return bytes;
}

// The blob behind the artifact, checked to be the one the fetch verified.
VerifiedSource source_of(const LoadRequest& request, const std::string& relative, const std::filesystem::path& path) {
    const FetchResult& fetched = request.fetched;
    auto it =
        std::find_if(fetched.files.begin(), fetched.files.end(), [&](const FileInfo& f) { return f.path == relative; });
    if (it == fetched.files.end()) {
        throw Error(ErrorCode::verification,
                    path.string() + " is not among the verified files of variant " + fetched.variant + "; fetch again");
    }
    cache::RepoCache cache(request.cache_root, request.repo_type, fetched.repo_id);
    // A load that fetched part of the variant has it in the partial area
    // (docs/cache-format.md, "Partial variants"); the fetch named the folder.
    const cache::LinkArea area =
        std::filesystem::path(fetched.path) == cache.partial_dir(fetched.commit) / "build" / fetched.variant
            ? cache::LinkArea::partial
            : cache::LinkArea::snapshot;
    return verified_source(cache, fetched.commit, "build/" + fetched.variant + "/" + relative, it->sha256, it->size,
                           path, area);
}

}  // namespace

Artifact::Artifact(const LoadRequest& request, std::string relative)
    : m_request(request),
      m_relative(std::move(relative)),
      m_path(std::filesystem::path(request.fetched.path) / m_relative) {}

std::vector<std::uint8_t> Artifact::read() const {
    if (!m_request.verify_on_load) return read_file_bytes(m_path.string());
    const VerifiedSource source = source_of(m_request, m_relative, m_path);
    std::vector<std::uint8_t> image;
    image.reserve(source.size);
    read_verified(source, [&](const void* data, std::size_t size) {
        const auto* bytes = static_cast<const std::uint8_t*>(data);
        image.insert(image.end(), bytes, bytes + size);
    });
    return image;
}

// With verify_on_load the blob is opened once and hashed while it is copied
// into a sealed memfd, and only that copy is loaded, so nothing can change
// the bytes between the check and the use.
Library Artifact::open(Binding binding, const Inspect& inspect) const {
    if (!m_request.verify_on_load) {
        if (inspect) elf::with_mapped_file(m_path, inspect);
        return Library::open(m_path, binding);
    }
    const VerifiedSource source = source_of(m_request, m_relative, m_path);
    SealedImage image(std::filesystem::path(m_relative).filename().string());
    const std::string sha256 =
        read_verified(source, [&](const void* data, std::size_t size) { image.append(data, size); });
    image.seal();
    if (inspect) {
        try {
            elf::with_mapped_file(image.proc_path(), inspect);
        } catch (const Error& e) {
            // Messages name the cached file, not the /proc path of the copy.
            throw Error(e.code(), renamed(e.plain_message(), image.proc_path(), m_path.string()), e.hint(),
                        e.context());
        }
    }
    return Library::open_sealed(std::move(image), m_path, sha256, binding);
}

}  // namespace kernhub::loader
