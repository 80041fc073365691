#include "fetch/local_kernel.hpp"

#include <algorithm>
#include <system_error>

#include "common/hint.hpp"
#include "common/join.hpp"
#include "common/text.hpp"
#include "kernhub/error.hpp"

namespace kernhub::fetch {

namespace fs = std::filesystem;

std::map<std::string, fs::path> parse_local_kernels(const std::string& text, const std::string& named_by) {
    std::map<std::string, fs::path> out;
    if (text.empty()) return out;
    std::size_t start = 0;
    std::size_t count = 0;
    for (;;) {
        const std::size_t colon = text.find(':', start);
        const std::string entry = text.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
        if (++count > k_max_local_kernels) {
            throw Error(
                ErrorCode::usage,
                named_by + " has more than k_max_local_kernels (" + std::to_string(k_max_local_kernels) + ") entries",
                hint::setting("local_kernels"));
        }
        const std::size_t equals = entry.find('=');
        if (equals == std::string::npos) {
            throw Error(ErrorCode::usage,
                        named_by + " entry " + quoted_name(entry) +
                            " has no '=': write ORG/REPO=PATH entries separated by ':' (as the kernels library "
                            "reads them, so a path cannot hold ':')",
                        hint::setting("local_kernels"));
        }
        // An empty PATH is the working directory, as Path("") is for kernels.
        const std::string path = entry.substr(equals + 1);
        out[entry.substr(0, equals)] = fs::path(path.empty() ? "." : path);
        if (colon == std::string::npos) return out;
        start = colon + 1;
    }
}

namespace {

// Regular files under `dir` (links to regular files count), relative to it,
// less Python bytecode; at most k_max_local_files.
std::vector<FetchedFile> list_files(const fs::path& dir) {
    std::vector<FetchedFile> files;
    std::error_code ec;
    for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        std::error_code stat_ec;
        if (!it->is_regular_file(stat_ec)) continue;
        const std::string relpath = it->path().lexically_relative(dir).generic_string();
        if (is_python_bytecode(relpath)) continue;
        if (files.size() >= k_max_local_files) {
            throw Error(ErrorCode::usage, "the local kernel folder " + dir.string() +
                                              " has more than k_max_local_files (" + std::to_string(k_max_local_files) +
                                              ") files");
        }
        FetchedFile file;
        file.path = relpath;
        file.size = it->file_size(stat_ec);
        files.push_back(std::move(file));
    }
    if (ec) throw Error(ErrorCode::internal, "cannot list " + dir.string() + ": " + ec.message());
    std::sort(files.begin(), files.end(), [](const FetchedFile& a, const FetchedFile& b) { return a.path < b.path; });
    return files;
}

// The subfolders of `base` as candidates, with their files.
std::vector<select::Candidate> candidates_in(const fs::path& base) {
    std::vector<select::Candidate> out;
    std::error_code ec;
    for (fs::directory_iterator it(base, ec), end; !ec && it != end; it.increment(ec)) {
        std::error_code dir_ec;
        if (!it->is_directory(dir_ec)) continue;
        const std::string name = it->path().filename().string();
        if (!select::parse_variant(name)) continue;  // as kernels: only variant names are variants
        if (out.size() >= k_max_local_variants) {
            throw Error(ErrorCode::usage, "the local kernel folder " + base.string() + " has more than " +
                                              "k_max_local_variants (" + std::to_string(k_max_local_variants) +
                                              ") variant folders");
        }
        select::Candidate candidate;
        candidate.name = name;
        for (const FetchedFile& file : list_files(it->path())) candidate.files.push_back(file.path);
        out.push_back(std::move(candidate));
    }
    std::sort(out.begin(), out.end(),
              [](const select::Candidate& a, const select::Candidate& b) { return a.name < b.name; });
    return out;
}

}  // namespace

LocalVariant resolve_local_kernel(const fs::path& folder, const select::HostFacts& host,
                                  const std::string& required_file) {
    std::error_code ec;
    if (!fs::is_directory(folder, ec)) {
        throw Error(ErrorCode::not_found,
                    "the local kernel folder " + folder.string() + " does not exist or is not a folder",
                    hint::setting("local_kernels"));
    }
    const std::optional<std::string> required =
        required_file.empty() ? std::nullopt : std::optional<std::string>(required_file);
    std::vector<std::string> reasons;
    for (const fs::path& base : {folder, folder / "build"}) {
        if (!fs::is_directory(base, ec)) continue;
        LocalVariant local;
        local.candidates = candidates_in(base);
        local.selection = select::select_variant(host, local.candidates, required);
        if (local.selection.chosen) {
            local.variant = *local.selection.chosen;
            local.dir = base / local.variant;
            local.files = list_files(local.dir);
            return local;
        }
        if (!local.candidates.empty()) reasons.push_back(base.string() + ": " + describe_rejections(local.selection));
    }
    if (fs::is_regular_file(folder / "metadata.json", ec)) {
        LocalVariant local;
        local.dir = folder;
        local.variant = fs::path(folder).lexically_normal().filename().string();
        if (local.variant.empty()) local.variant = folder.parent_path().filename().string();
        local.files = list_files(folder);
        return local;
    }
    throw Error(ErrorCode::not_found,
                "no build variant for this host in the local kernel folder " + folder.string() +
                    (reasons.empty() ? std::string(" (no variant folders in it or in its build/)")
                                     : " (" + join(reasons, "; ") + ")"),
                hint::setting("local_kernels"));
}

}  // namespace kernhub::fetch
