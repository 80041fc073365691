// What the CLI commands share: common flags, output policy, progress.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
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
    std::string trusted_root;  // --trusted-root: the Sigstore trusted_root.json
    bool offline = false;
    bool json = false;
    bool quiet = false;
};

void add_registry_flags(CLI::App& command, CommonFlags& flags);
void add_fetch_flags(CLI::App& command, CommonFlags& flags);

// Stderr rendering of library events: a redrawn bar on a TTY, plain lines
// otherwise, nothing with --quiet or HF_HUB_DISABLE_PROGRESS_BARS (bars only).
class ProgressPrinter final : public EventSink {
public:
    explicit ProgressPrinter(bool quiet);
    void on_event(const Event& event) noexcept override;

private:
    bool m_quiet;
    bool m_bars;
    std::uint64_t m_last_drawn = 0;
};

Options make_options(const CommonFlags& flags, EventSink* events);

// Status lines for humans go to stderr unless --quiet.
void status(const CommonFlags& flags, const std::string& line);
// The one JSON object on stdout.
void print_json(const nlohmann::ordered_json& object);
nlohmann::ordered_json fetch_json(const FetchResult& result);
// {"identity", "issuer", "repository", "log_time" (RFC 3339 UTC), "log_index"}.
nlohmann::ordered_json signature_json(const SignatureInfo& signature);
// "signed by IDENTITY (ISSUER), logged 2026-01-02T03:04:05Z", printable.
std::string describe_signature(const SignatureInfo& signature);
std::string short_commit(const std::string& commit);

std::string human_size(std::uint64_t bytes);

}  // namespace kernhub::cli
