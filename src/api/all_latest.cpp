// UNSTABLE_KERNELS_ALL_LATEST (docs/configuration.md, "Latest versions:
// UNSTABLE_KERNELS_ALL_LATEST"): as with the kernels library's
// LatestHubResolver, every kernel that fetch, load and info use comes from
// the repo's highest numbered version, whatever was asked for.
#include <system_error>

#include "api/client_impl.hpp"
#include "common/repo.hpp"
#include "common/text.hpp"
#include "kernhub/error.hpp"

namespace kernhub {

namespace fs = std::filesystem;

namespace {

// Entries of a repo's refs/ folder looked at; a cache with more refs than
// this is not one to scan whole for its versions.
constexpr std::size_t k_max_cached_refs = 10000;

// The highest "vN" ref of the cache that holds a commit id, as the kernels
// library reads its versions offline. Of two refs of one N ("v1", "v01")
// the name that sorts first wins, so that the answer does not depend on
// the order the folder lists them in.
std::optional<hub::VersionBranch> latest_cached_version(const cache::RepoCache& cache) {
    std::optional<hub::VersionBranch> latest;
    std::string highest;
    std::error_code ec;
    std::size_t seen = 0;
    for (fs::directory_iterator it(cache.folder() / "refs", ec), end; !ec && it != end && seen < k_max_cached_refs;
         it.increment(ec), ++seen) {
        const std::string name = it->path().filename().string();
        const std::optional<std::string> number = version_key(name);
        if (!number || it->symlink_status(ec).type() != fs::file_type::regular) continue;
        if (latest && (version_key_less(*number, highest) || (*number == highest && name > latest->name))) continue;
        std::optional<std::string> commit = cache.read_ref(name);
        if (!commit) continue;
        highest = *number;
        latest = hub::VersionBranch{name, std::move(*commit)};
    }
    return latest;
}

std::string requested(const registry::KernelSpec& spec) {
    return spec.version ? "version " + std::to_string(*spec.version) : "revision " + quoted_name(spec.revision);
}

}  // namespace

void ClientImpl::use_latest_version(const registry::KernelSpec& spec, fetch::FetchRequest& request) {
    if (!settings.all_latest) return;
    std::optional<hub::VersionBranch> latest;
    try {
        latest = settings.offline
                     ? latest_cached_version(cache::RepoCache(settings.cache_root, spec.repo_type, spec.repo_id))
                     : hub_client()->latest_version(request.repo);
        if (!latest && request.gate) request.gate->pass();
    } catch (...) {
        // The trusted-publisher answer, asked meanwhile, says more.
        if (request.gate) request.gate->pass();
        throw;
    }
    if (!latest) {
        const std::string where = settings.offline ? "in the cache at " + settings.cache_root.string() +
                                                         " (offline mode is on; fetch a version once while online)"
                                                   : "on the hub";
        throw Error(settings.offline ? ErrorCode::offline : ErrorCode::not_found,
                    "cannot use the latest version of " + quoted_name(spec.repo_id) +
                        ": it has no numbered versions (vN branches) " + where + "; " + k_all_latest_variable +
                        " requires a numbered version");
    }
    // The name is a "vN" and the commit hex: nothing a hub sent is quoted
    // unchecked.
    say(std::string("warning: ") + k_all_latest_variable + " is enabled: overriding the requested " + requested(spec) +
        " and any lock pin of " + quoted_name(spec.repo_id) + " with " + latest->name + " (" + latest->commit +
        "); kernel API changes may break your code");
    request.revision = latest->name;
    request.commit = latest->commit;
}

void ClientImpl::refuse_all_latest(const std::string& command) const {
    if (!settings.all_latest) return;
    throw Error(ErrorCode::usage, std::string(k_all_latest_variable) +
                                      " is set, which overrides every pinned commit; " + command +
                                      " is about pinned commits and does not run under it: unset it");
}

}  // namespace kernhub
