#include "registry/registry.hpp"

#include <cerrno>
#include <system_error>

#include "cache/cache.hpp"
#include "kernhub/error.hpp"
#include "registry/parse.hpp"

namespace kernhub::registry {

namespace fs = std::filesystem;

namespace {

// Registries are a few KiB. The cap keeps a mistake such as
// KERNHUB_REGISTRY=/dev/zero from reading forever.
constexpr std::size_t k_max_file_size = 16u << 20;

std::string read_registry_file(const fs::path& path) {
    const std::string source = path.string();
    std::error_code ec;
    const fs::file_status status = fs::status(path, ec);
    if (status.type() == fs::file_type::not_found) detail::fail(source, "file not found; check the path");
    if (ec) detail::fail(source, "cannot read: " + ec.message());
    if (fs::is_directory(status)) detail::fail(source, "is a directory; name a JSON file");

    std::string text;
    const cache::ReadStatus read = cache::read_file_into(path, text, k_max_file_size);
    if (read.error == EFBIG) detail::fail(source, "is larger than 16 MiB; a registry is a small JSON file");
    if (read.not_regular || read.error == EISDIR) {
        detail::fail(source, "is not a regular file (a directory, FIFO or device); a registry is a small JSON file");
    }
    if (read.error != 0 && !read.opened) {
        detail::fail(source,
                     "cannot open: " + std::generic_category().message(read.error) + "; check the file's permissions");
    }
    if (read.error != 0) detail::fail(source, "read error; check the file");
    return text;
}

bool file_missing(const fs::path& path) {
    std::error_code ec;
    // An error other than "not found" (e.g. a permission problem on a parent
    // directory) is not "missing": add_file reports it.
    return !fs::exists(path, ec) && !ec;
}

// Files named by the user must exist; say where the name came from so the
// user knows what to fix.
void add_required(Registry& registry, const fs::path& path, const std::string& origin) {
    if (file_missing(path)) detail::fail(path.string(), "file not found (" + origin + ")");
    registry.add_file(path);
}

std::vector<fs::path> split_path_list(const std::string& value) {
    std::vector<fs::path> paths;
    std::size_t start = 0;
    while (start <= value.size()) {
        std::size_t end = value.find(':', start);
        if (end == std::string::npos) end = value.size();
        // Empty items come from "a::b" or a trailing ':' and mean nothing, as in PATH lists
        // that shells build up by appending.
        if (end > start) paths.emplace_back(value.substr(start, end - start));
        start = end + 1;
    }
    return paths;
}

}  // namespace

std::string KernelSpec::effective_revision() const {
    return version ? "v" + std::to_string(*version) : revision;
}

void Registry::add_json(const std::string& text, const std::string& source) {
    for (auto& [name, spec] : detail::parse_document(text, source)) {
        m_entries[name] = std::move(spec);
    }
}

void Registry::add_file(const fs::path& path) {
    add_json(read_registry_file(path), path.string());
}

const KernelSpec* Registry::find(const std::string& name) const {
    const auto it = m_entries.find(name);
    return it == m_entries.end() ? nullptr : &it->second;
}

std::vector<KernelSpec> Registry::entries() const {
    std::vector<KernelSpec> result;
    result.reserve(m_entries.size());
    for (const auto& entry : m_entries) result.push_back(entry.second);
    return result;
}

Registry load_stack(const StackSources& sources) {
    Registry registry;
    // The default and project files are optional layers: absent means "nothing to add".
    for (const auto& optional_file : {sources.default_file, sources.project_file}) {
        if (optional_file && !file_missing(*optional_file)) registry.add_file(*optional_file);
    }
    for (const auto& path : split_path_list(sources.env_value)) {
        add_required(registry, path, "listed in KERNHUB_REGISTRY; fix or remove that entry");
    }
    for (const auto& path : sources.explicit_files) {
        add_required(registry, path, "named explicitly as a registry; check the path");
    }
    return registry;
}

}  // namespace kernhub::registry
