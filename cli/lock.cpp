// `kernhub lock`: pin the project's kernels (kernhub.json) in kernhub.lock.
#include <iostream>

#include "commands.hpp"
#include "common.hpp"

namespace kernhub::cli {

namespace {

struct LockFlags {
    CommonFlags common;
    std::vector<std::string> update;
    bool check = false;
};

nlohmann::ordered_json lock_json(const LockReport& report) {
    nlohmann::ordered_json kernels = nlohmann::ordered_json::array();
    for (const auto& kernel : report.kernels) {
        kernels.push_back({{"name", kernel.name},
                           {"repo_id", kernel.repo_id},
                           {"revision", kernel.revision},
                           {"commit", kernel.commit},
                           {"variants", kernel.variants},
                           {"pin_kept", kernel.pin_kept},
                           {"missing_targets", kernel.missing_targets},
                           {"pin_problem", kernel.pin_problem}});
    }
    return {{"path", report.path},
            {"changed", report.changed},
            {"diff", report.diff},
            {"kernels", kernels},
            {"requests", report.requests}};
}

// Each kernel whose pin contradicts its own commit, by name and field, as
// "; kernel 'X': ..." clauses; without --check each is also a warning.
std::string pin_disagreements(const LockFlags& flags, const LockReport& report) {
    std::string disagreements;
    for (const auto& kernel : report.kernels) {
        if (kernel.pin_problem.empty()) continue;
        const std::string line =
            "kernel '" + kernel.name + "': the pin does not describe its commit (" + kernel.pin_problem + ")";
        disagreements += "; " + line;
        if (!flags.check) {
            std::cerr << "kernhub: warning: " << printable(line) << "; locked again from " << printable(kernel.revision)
                      << '\n';
        }
    }
    return disagreements;
}

// The report for a terminal: a line per kernel, then the diff of a stale
// lock or what became of the file.
void print_lock_report(const LockFlags& flags, const LockReport& report, bool stale) {
    for (const auto& kernel : report.kernels) {
        std::string variants;
        for (const auto& v : kernel.variants) variants += (variants.empty() ? "" : ", ") + v;
        std::string missing;
        for (const auto& m : kernel.missing_targets) missing += (missing.empty() ? "" : ", ") + m;
        status(flags.common, "locked " + kernel.name + " (" + kernel.repo_id + "@" + kernel.revision + " = " +
                                 short_commit(kernel.commit) + ") " + variants +
                                 (kernel.pin_kept ? "" : " [resolved]") +
                                 (missing.empty() ? "" : "; no build for " + missing));
    }
    if (stale) {
        // One escaped line per diff line: the lock quotes names and hashes a hub sent.
        std::size_t begin = 0;
        while (begin < report.diff.size()) {
            std::size_t end = report.diff.find('\n', begin);
            if (end == std::string::npos) end = report.diff.size();
            std::cout << printable(std::string_view(report.diff).substr(begin, end - begin)) << '\n';
            begin = end + 1;
        }
    } else if (flags.check) {
        status(flags.common, report.path + " is up to date");
    } else {
        status(flags.common, (report.changed ? "wrote " : "unchanged ") + report.path + " (" +
                                 std::to_string(report.requests) + " requests)");
    }
}

int run_lock(const LockFlags& flags, bool update_given) {
    ProgressPrinter progress(flags.common.quiet);
    Client client(make_options(flags.common, &progress));
    LockOptions options;
    // A bare --update leaves CLI11 one empty value: it means "all".
    for (const auto& name : flags.update) {
        if (!name.empty()) options.update.push_back(name);
    }
    options.update_all = update_given && options.update.empty();
    options.check = flags.check;
    LockReport report = client.lock(options);
    const bool stale = flags.check && (report.changed || report.pins_disagree);
    const std::string disagreements = pin_disagreements(flags, report);
    if (flags.common.json) {
        nlohmann::ordered_json out = lock_json(report);
        if (stale) {
            out["error"] = {{"code", static_cast<int>(ErrorCode::lock_outdated)},
                            {"kind", to_string(ErrorCode::lock_outdated)},
                            {"message", report.path + " is out of date" + disagreements + "; run `kernhub lock`"}};
        }
        print_json(out);
    } else {
        print_lock_report(flags, report, stale);
    }
    if (stale) {
        std::cerr << "kernhub: error: " << printable(report.path) << " is out of date"
                  << (report.changed ? " (the diff above shows how)" : "") << printable(disagreements)
                  << "; run `kernhub lock` and commit it\n";
        return static_cast<int>(ErrorCode::lock_outdated);
    }
    return 0;
}

}  // namespace

Command add_lock_command(CLI::App& app) {
    auto flags = std::make_shared<LockFlags>();
    CLI::App* command = app.add_subcommand(
        "lock", "Pin the kernels of the project's kernhub.json to commits and digests in kernhub.lock");
    add_fetch_flags(*command, flags->common);
    add_host_flag(*command, flags->common);
    command->remove_option(command->get_option("--registry"));  // the lock covers kernhub.json only
    CLI::Option* update = command->add_option("--update", flags->update,
                                              "Resolve these kernels' pins again (all of them when no name follows)");
    update->expected(0, -1);
    command->add_flag("--check", flags->check,
                      "Write nothing; exit 8 with a diff when kernhub.lock is not what `kernhub lock` would write");
    return {command, [flags, update]() { return run_lock(*flags, update->count() > 0); },
            "the lock file was not changed; run the command again"};
}

}  // namespace kernhub::cli
