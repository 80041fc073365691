// kernhub cache ls | verify [--repair] | prune [--dry-run] [--keep-lock FILE]... | path [NAME]
#include <algorithm>
#include <iostream>

#include "commands.hpp"
#include "common.hpp"
#include "interrupt.hpp"

namespace kernhub::cli {

namespace {

using nlohmann::ordered_json;

void add_cache_flags(CLI::App& command, CommonFlags& flags) {
    command.add_option("--cache-dir", flags.cache_dir, "Cache root (env KERNHUB_CACHE, KERNELS_CACHE, HF_HUB_CACHE)");
    command.add_flag("--json", flags.json, "Print one JSON object on stdout");
    command.add_flag("-q,--quiet", flags.quiet, "Print nothing but results, errors and --json output");
}

// A variant held in part (CachedPart), or null.
ordered_json part_json(const std::optional<CachedPart>& part) {
    if (!part) return nullptr;
    return {{"folder", part->folder}, {"files", part->files},       {"listed", part->listed},
            {"size", part->size},     {"recorded", part->recorded}, {"stale", part->stale}};
}

// "2 of 3 files (libvector_add.so, metadata.json)": what a part holds, of
// what the cached listing names (when it is cached), the first names.
std::string part_files(const CachedPart& part) {
    std::string text = std::to_string(part.files.size());
    if (part.listed > 0) text += " of " + std::to_string(part.listed);
    text += part.listed == 1 || (part.listed == 0 && part.files.size() == 1) ? " file" : " files";
    const std::size_t shown = std::min<std::size_t>(part.files.size(), 5);
    for (std::size_t i = 0; i < shown; ++i) text += (i == 0 ? " (" : ", ") + printable(part.files[i]);
    if (part.files.size() > shown) text += ", and " + std::to_string(part.files.size() - shown) + " more";
    return text + (shown > 0 ? ")" : "");
}

// What cache ls and cache verify say of a part, after the variant's name.
// `verified`: cache verify's, which says that what the part lacks is no damage.
std::string part_line(const CachedPart& part, bool verified = false) {
    if (part.stale) {
        return "a stale part of " + part_files(part) +
               " under .kernhub/partial/: the snapshot holds the variant whole; kernhub cache prune removes it";
    }
    return "held in part: " + part_files(part) + ", " + human_size(part.size) +
           (part.recorded ? ", verified by kernhub" : "") +
           (verified ? "; the files it lacks are no damage: kernhub fetch completes it"
                     : "; kernhub fetch completes it");
}

ordered_json listing_json(const CacheListing& listing) {
    ordered_json repos = ordered_json::array();
    for (const auto& repo : listing.repos) {
        ordered_json commits = ordered_json::array();
        for (const auto& commit : repo.commits) {
            ordered_json variants = ordered_json::array();
            for (const auto& v : commit.variants) {
                variants.push_back({{"name", v.name},
                                    {"files", v.files},
                                    {"size", v.size},
                                    {"recorded", v.recorded},
                                    {"part", part_json(v.part)}});
            }
            commits.push_back({{"commit", commit.commit},
                               {"refs", commit.refs},
                               {"snapshot", commit.snapshot},
                               {"files", commit.files},
                               {"size", commit.size},
                               {"variants", variants}});
        }
        repos.push_back({{"repo_id", repo.repo_id},
                         {"repo_type", to_string(repo.repo_type)},
                         {"folder", repo.folder},
                         {"refs", repo.refs},
                         {"commits", commits},
                         {"blobs", repo.blobs},
                         {"partials", repo.partials},
                         {"size", repo.size}});
    }
    return {{"root", listing.root},
            {"size", listing.size},
            {"repos", repos},
            {"leftovers", listing.leftovers},
            {"leftover_bytes", listing.leftover_bytes}};
}

void print_listing(const CacheListing& listing) {
    std::cout << printable(listing.root) << "  " << listing.repos.size() << " repos, " << human_size(listing.size);
    if (listing.leftovers > 0) {
        std::cout << "; " << listing.leftovers << " temporaries of killed or running commands, "
                  << human_size(listing.leftover_bytes) << " (see kernhub cache prune --partials)";
    }
    std::cout << '\n';
    for (const auto& repo : listing.repos) {
        std::cout << to_string(repo.repo_type) << ' ' << printable(repo.repo_id) << "  " << repo.blobs << " blobs, "
                  << human_size(repo.size);
        if (repo.partials > 0) std::cout << ", " << repo.partials << " partial downloads";
        std::cout << '\n';
        for (const auto& [revision, commit] : repo.refs) {
            std::cout << "  ref " << printable(revision) << " -> " << short_commit(commit) << '\n';
        }
        for (const auto& commit : repo.commits) {
            std::cout << "  commit " << printable(commit.commit);
            for (std::size_t i = 0; i < commit.refs.size(); ++i)
                std::cout << (i == 0 ? " (" : ", ") << printable(commit.refs[i]);
            std::cout << (commit.refs.empty() ? "" : ")") << "  ";
            if (commit.snapshot) {
                std::cout << commit.files << " files, " << human_size(commit.size) << '\n';
            } else {
                std::cout << "no snapshot, only variants held in part\n";
            }
            for (const auto& v : commit.variants) {
                std::cout << "    " << printable(v.name) << "  ";
                if (v.files > 0 || !v.part) {
                    std::cout << v.files << " files, " << human_size(v.size)
                              << (v.recorded ? ", verified by kernhub" : "") << (v.part ? "; " : "");
                }
                std::cout << (v.part ? part_line(*v.part) : "") << '\n';
            }
        }
    }
}

Command add_ls(CLI::App& cache) {
    auto flags = std::make_shared<CommonFlags>();
    CLI::App* command = cache.add_subcommand("ls", "List cached repos, refs, commits, variants and sizes");
    add_cache_flags(*command, *flags);
    return {command,
            [flags]() {
                Client client(make_options(*flags, nullptr));
                CacheListing listing = client.cache_ls();
                if (flags->json) {
                    print_json(listing_json(listing));
                } else {
                    print_listing(listing);
                }
                return 0;
            },
            k_read_only_interrupted};
}

Command add_path(CLI::App& cache) {
    auto flags = std::make_shared<CommonFlags>();
    auto ref = std::make_shared<std::string>();
    CLI::App* command =
        cache.add_subcommand("path", "Print the cache root, or the cached variant directory of NAME (offline)");
    command->add_option("kernel", *ref, "Registry name or ORG/REPO[@REVISION]");
    add_cache_flags(*command, *flags);
    command->add_option("--registry", flags->registries, "Registry file stacked last (repeatable)");
    command->add_option("--project", flags->project, "Directory holding kernhub.json (default: the current one)");
    command->add_option("--target", flags->targets,
                        "Use this build variant instead of detecting the host (repeatable)");
    return {command,
            [flags, ref]() {
                Client client(make_options(*flags, nullptr));
                std::string path = client.cache_path(*ref);
                if (flags->json) {
                    ordered_json out = {{"path", path}};
                    if (!ref->empty()) out["name"] = *ref;
                    print_json(out);
                } else {
                    std::cout << printable(path) << '\n';
                }
                return 0;
            },
            k_read_only_interrupted};
}

ordered_json verify_json(const CacheVerifyReport& report) {
    ordered_json problems = ordered_json::array();
    for (const auto& p : report.problems) {
        problems.push_back({{"path", p.path}, {"problem", p.problem}, {"repaired", p.repaired}});
    }
    bool ok = !report.interrupted && std::all_of(report.problems.begin(), report.problems.end(),
                                                 [](const CacheProblem& p) { return p.repaired; });
    ordered_json parts = ordered_json::array();
    for (const auto& held : report.parts) {
        ordered_json part = {{"repo_id", held.repo_id},
                             {"repo_type", to_string(held.repo_type)},
                             {"commit", held.commit},
                             {"variant", held.variant}};
        const ordered_json fields = part_json(held.part);
        for (const auto& field : fields.items()) part[field.key()] = field.value();
        parts.push_back(part);
    }
    return {{"root", report.root},
            {"blobs_checked", report.blobs_checked},
            {"links_checked", report.links_checked},
            {"records_checked", report.records_checked},
            {"problems", problems},
            {"parts", parts},
            {"ok", ok}};
}

// One status line per variant held in part: what verify checked of it,
// and that what it lacks is no damage.
void print_parts(const CommonFlags& flags, const CacheVerifyReport& report) {
    for (const auto& held : report.parts) {
        status(flags, printable(held.repo_id) + "@" + short_commit(held.commit) + " variant " +
                          printable(held.variant) + ": " + part_line(held.part, true));
    }
}

// Damage is exit 4 naming the files: the error names the first ones, the
// report all of them. With --json the report stays the one object on stdout
// and carries the error as its "error" member, as lock --check does.
Error damage_error(const CacheVerifyReport& report) {
    std::string names;
    const std::size_t shown = std::min<std::size_t>(report.problems.size(), 10);
    for (std::size_t i = 0; i < shown; ++i) names += (i == 0 ? "" : ", ") + report.problems[i].path;
    if (report.problems.size() > shown) names += " and " + std::to_string(report.problems.size() - shown) + " more";
    return Error(ErrorCode::verification, std::to_string(report.problems.size()) + " damaged files in the cache at " +
                                              report.root + ": " + names +
                                              "; run 'kernhub cache verify --repair' to remove them, then fetch again");
}

// What an interrupted verify leaves: a repair removes the damaged variant
// records before anything else (cacheadmin::verify_cache), so a damaged file it
// did not reach is no longer vouched for and the next fetch checks it.
const char* verify_interrupted_note(bool repair) {
    return repair ? "what was removed is listed above (a damaged file's variant record goes before the file, so the "
                    "next fetch checks it again); run kernhub cache verify --repair again to finish"
                  : "nothing was changed; the damage found so far is listed above; run kernhub cache verify again "
                    "to check the rest";
}

Command add_verify(CLI::App& cache) {
    auto flags = std::make_shared<CommonFlags>();
    auto repair = std::make_shared<bool>(false);
    CLI::App* command = cache.add_subcommand(
        "verify", "Re-hash every blob against its name and check every snapshot link and variant record");
    command->add_flag("--repair", *repair, "Remove what is damaged so that the next fetch downloads it again");
    add_cache_flags(*command, *flags);
    return {command,
            [flags, repair]() {
                Client client(make_options(*flags, nullptr));
                CacheVerifyReport report = client.cache_verify(*repair);
                const bool damaged = !*repair && !report.problems.empty() && !report.interrupted;
                if (flags->json) {
                    ordered_json out = verify_json(report);
                    out["interrupted"] = report.interrupted;
                    if (damaged) {
                        Error error = damage_error(report);
                        out["error"] = {{"code", static_cast<int>(error.code())},
                                        {"kind", to_string(error.code())},
                                        {"message", error.what()}};
                    }
                    print_json(out);
                } else {
                    for (const auto& p : report.problems) {
                        std::cout << printable(p.path) << ": " << printable(p.problem)
                                  << (p.repaired ? " (removed)" : "") << '\n';
                    }
                }
                if (report.interrupted) {
                    // What was found (and removed) before the stop is listed above.
                    std::cerr << "kernhub: " << interrupted_line(verify_interrupted_note(*repair)) << '\n';
                    return interrupted_exit_code();
                }
                const std::string checked = "checked " + std::to_string(report.blobs_checked) + " blobs, " +
                                            std::to_string(report.links_checked) + " links and " +
                                            std::to_string(report.records_checked) + " variant records in " +
                                            report.root;
                // An error is one line on stderr: with damage left, the
                // parts are in --json only.
                if (!damaged) print_parts(*flags, report);
                if (report.problems.empty()) {
                    status(*flags, checked + ": no damage");
                    return 0;
                }
                if (damaged) {
                    if (!flags->json) throw damage_error(report);
                    const Error error = damage_error(report);
                    std::cerr << "kernhub: error: " << error.what() << '\n';
                    return static_cast<int>(error.code());
                }
                status(*flags, checked + ": removed " + std::to_string(report.problems.size()) +
                                   " damaged files; the next fetch downloads them again");
                return 0;
            },
            verify_interrupted_note(false)};
}

constexpr const char* k_prune_interrupted =
    "what was removed is gone (listed above) and everything else is kept; run kernhub cache prune again to finish";

Command add_prune(CLI::App& cache) {
    auto flags = std::make_shared<CommonFlags>();
    auto options = std::make_shared<PruneOptions>();
    CLI::App* command =
        cache.add_subcommand("prune", "Remove unreferenced blobs and snapshots and abandoned partial downloads");
    command->add_flag("--dry-run", options->dry_run, "Print what would be removed and remove nothing");
    command->add_flag("--partials", options->partials,
                      "Also remove at once every partial download and unpack folder that no running process holds");
    command->add_option("--keep-lock", options->keep_locks,
                        "Keep the commits this kernhub.lock or kernels.lock pins (repeatable)");
    add_cache_flags(*command, *flags);
    return {command,
            [flags, options]() {
                Client client(make_options(*flags, nullptr));
                PruneReport report = client.cache_prune(*options);
                if (flags->json) {
                    ordered_json kept = ordered_json::array();
                    for (const auto& k : report.kept) kept.push_back({{"path", k.path}, {"reason", k.reason}});
                    print_json({{"dry_run", report.dry_run},
                                {"removed", report.removed},
                                {"bytes", report.bytes},
                                {"kept", kept},
                                {"interrupted", report.interrupted}});
                    if (report.interrupted) {
                        std::cerr << "kernhub: " << interrupted_line(k_prune_interrupted) << '\n';
                        return interrupted_exit_code();
                    }
                    return 0;
                }
                for (const auto& path : report.removed) {
                    std::cout << (report.dry_run ? "would remove " : "removed ") << printable(path) << '\n';
                }
                // What went before the stop is listed above.
                if (report.interrupted) throw Error(ErrorCode::interrupted, "cache prune was interrupted");
                for (const auto& k : report.kept) status(*flags, "kept " + k.path + ": " + k.reason);
                status(*flags, std::string(report.dry_run ? "would remove " : "removed ") +
                                   std::to_string(report.removed.size()) + " entries, " + human_size(report.bytes) +
                                   (report.dry_run ? " (dry run: nothing removed)" : ""));
                return 0;
            },
            k_prune_interrupted};
}

}  // namespace

void add_cache_commands(CLI::App& cache, std::vector<Command>& commands) {
    commands.push_back(add_ls(cache));
    commands.push_back(add_verify(cache));
    commands.push_back(add_prune(cache));
    commands.push_back(add_path(cache));
}

}  // namespace kernhub::cli
