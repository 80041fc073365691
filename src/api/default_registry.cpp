#include "api/default_registry.hpp"

#include <system_error>

namespace kernhub::api {

std::vector<std::filesystem::path> default_registry_candidates(const loader::CodeFile& code) {
    if (code.path.empty()) return {};
    const std::filesystem::path dir = code.path.parent_path();
    const char* installed = code.main_program ? KERNHUB_REGISTRY_FROM_BINDIR : KERNHUB_REGISTRY_FROM_LIBDIR;
    return {(dir / installed).lexically_normal(), dir / "share" / "kernhub" / "registry.json"};
}

std::filesystem::path find_default_registry() {
    // Any object of this library will do: it lives in the same file, which
    // does not change while the process runs, so the lookup is done once.
    static const char anchor = 0;
    static const std::vector<std::filesystem::path> candidates =
        default_registry_candidates(loader::file_containing(&anchor));
    for (const auto& candidate : candidates) {
        std::error_code ec;
        if (std::filesystem::is_regular_file(candidate, ec)) return candidate;
    }
    return {};
}

}  // namespace kernhub::api
