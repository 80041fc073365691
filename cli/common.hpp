// What the CLI commands share: common flags, output policy, progress.
#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "kernhub/kernhub.hpp"

namespace kernhub::cli {

// Flags shared by fetch, load and info (and partly list).
struct CommonFlags {
    std::string endpoint;
    std::string cache_dir;
    std::vector<std::string> registries;
    std::string project;
    std::vector<std::string> targets;
    std::string host;          // --host: select for a described machine
    std::string trusted_root;  // --trusted-root: the Sigstore trusted_root.json
    bool offline = false;
    bool json = false;
    bool quiet = false;
};

void add_registry_flags(CLI::App& command, CommonFlags& flags);
void add_fetch_flags(CLI::App& command, CommonFlags& flags);
// --host KEY=VALUE[,KEY=VALUE...], for the commands that select for other
// machines (fetch, info, lock, prewarm, mirror); not with --target.
void add_host_flag(CLI::App& command, CommonFlags& flags);

// Stderr rendering of library events, which may arrive from several
// threads at once. On a TTY (unless HF_HUB_DISABLE_PROGRESS_BARS): a block
// redrawn in place, one line per file in flight and a total line, with
// finished files scrolling up above it as permanent lines. Otherwise one
// plain line per download; nothing with --quiet.
class ProgressPrinter final : public EventSink {
public:
    explicit ProgressPrinter(bool quiet);
    // Clears the block, so that an error printed after an interrupted
    // download is not drawn under stale progress lines.
    ~ProgressPrinter() override;
    ProgressPrinter(const ProgressPrinter&) = delete;
    ProgressPrinter& operator=(const ProgressPrinter&) = delete;
    void on_event(const Event& event) noexcept override;

private:
    using Clock = std::chrono::steady_clock;
    struct InFlight {
        std::string key;   // repo and path: kernels fetched side by side share paths
        std::string path;  // printable already
        std::uint64_t done = 0;
        std::uint64_t total = 0;
    };

    void on_bar_event(const Event& event);
    void start_batch();
    // Rewrites the block in place, first printing `above` (finished files,
    // messages) as permanent lines where the block was.
    void redraw(const std::vector<std::string>& above);
    std::vector<std::string> block_lines(std::size_t width, std::size_t height) const;

    const bool m_quiet;
    const bool m_bars;
    std::mutex m_mutex;
    std::vector<InFlight> m_in_flight;  // in start order: the block's line order
    std::set<std::string> m_seen;       // paths started in this batch
    std::uint64_t m_total_files = 0;    // of the batch: the plans, plus files started beyond them
    std::uint64_t m_total_bytes = 0;
    std::uint64_t m_planned_files = 0;
    std::uint64_t m_finished_files = 0;
    std::uint64_t m_finished_bytes = 0;
    std::uint64_t m_received = 0;  // bytes that arrived in this batch (not resumed ones): the rate
    Clock::time_point m_batch_start{};
    Clock::time_point m_last_draw{};
    std::size_t m_drawn = 0;  // lines of the block on screen; the cursor is at the start of the line below
};

// Options from the common flags; `events` null shows only the library's
// warnings, on stderr.
Options make_options(const CommonFlags& flags, EventSink* events);

// Status lines for humans go to stderr unless --quiet.
void status(const CommonFlags& flags, const std::string& line);
// The one JSON object on stdout.
void print_json(const nlohmann::ordered_json& object);
// FetchResult::dependencies: one object (repo_id, revision, commit,
// variant, path) each, in load order; and as "  depends on ..." lines.
nlohmann::ordered_json dependencies_json(const FetchResult& result);
void print_dependencies(const CommonFlags& flags, const FetchResult& result);
nlohmann::ordered_json fetch_json(const FetchResult& result);
// A metadata.json field kept as JSON text (FetchResult::python_depends):
// parsed back, or null when absent.
nlohmann::ordered_json metadata_json(const std::string& text);
// {"identity", "issuer", "repository", "log_time" (RFC 3339 UTC), "log_index"}.
nlohmann::ordered_json signature_json(const SignatureInfo& signature);
// "signed by IDENTITY (ISSUER), logged 2026-01-02T03:04:05Z", printable.
std::string describe_signature(const SignatureInfo& signature);
std::string short_commit(const std::string& commit);

std::string human_size(std::uint64_t bytes);

}  // namespace kernhub::cli
