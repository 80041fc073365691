#include "common.hpp"
#include <ctime>

#include "interrupt.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>

namespace kernhub::cli {

void add_registry_flags(CLI::App& command, CommonFlags& flags) {
    command.add_option("--registry", flags.registries, "Registry file stacked last (repeatable)");
    command.add_option("--project", flags.project, "Directory holding kernhub.json (default: the current one)");
    command.add_flag("--json", flags.json, "Print one JSON object on stdout");
}

void add_fetch_flags(CLI::App& command, CommonFlags& flags) {
    add_registry_flags(command, flags);
    command.add_option("--endpoint", flags.endpoint,
                       "Hub URL: http(s):// or file:// (env KERNHUB_ENDPOINT, HF_ENDPOINT)");
    command.add_option("--cache-dir", flags.cache_dir, "Cache root (env KERNHUB_CACHE, KERNELS_CACHE, HF_HUB_CACHE)");
    command.add_option("--target", flags.targets, "Use this build variant instead of detecting the host (repeatable)");
    command.add_flag("--offline", flags.offline, "Never use the network (env KERNHUB_OFFLINE=1, HF_HUB_OFFLINE=1)");
    command.add_flag("-q,--quiet", flags.quiet, "Print nothing but errors and --json output");
    command.add_option("--trusted-root", flags.trusted_root,
                       "Sigstore trusted_root.json for signature policies (env KERNHUB_SIGSTORE_TRUSTED_ROOT; "
                       "default: the public-good root built in)");
}

static bool env_set(const char* name) {
    const char* value = std::getenv(name);
    return value != nullptr && *value != '\0' && std::string(value) != "0";
}

ProgressPrinter::ProgressPrinter(bool quiet)
    : m_quiet(quiet), m_bars(!quiet && isatty(STDERR_FILENO) == 1 && !env_set("HF_HUB_DISABLE_PROGRESS_BARS")) {}

void ProgressPrinter::on_event(const Event& event) noexcept {
    if (m_quiet) return;
    // Progress goes to stderr as a courtesy: when that write fails there is
    // nowhere left to report it, so the results of fprintf are dropped.
    switch (event.kind) {
        case Event::Kind::download_start:
            m_last_drawn = 0;
            if (!m_bars)
                (void)std::fprintf(stderr, "downloading %s (%s)\n", printable(event.path).c_str(),
                                   human_size(event.total).c_str());
            break;
        case Event::Kind::download_bytes: {
            // Redraw at most every 256 KiB so a fast loopback does not flood the TTY.
            if (!m_bars || (event.done - m_last_drawn < (256u << 10) && event.done != event.total)) break;
            m_last_drawn = event.done;
            unsigned percent = event.total ? static_cast<unsigned>(event.done * 100 / event.total) : 100u;
            (void)std::fprintf(stderr, "\r\033[K%s %s/%s %3u%%", printable(event.path).c_str(),
                               human_size(event.done).c_str(), human_size(event.total).c_str(), percent);
            break;
        }
        case Event::Kind::download_done:
            if (m_bars)
                (void)std::fprintf(stderr, "\r\033[K%s %s done\n", printable(event.path).c_str(),
                                   human_size(event.total).c_str());
            break;
        case Event::Kind::retry:
        case Event::Kind::info:
            (void)std::fprintf(stderr, "%s\n", printable(event.text).c_str());
            break;
    }
}

Options make_options(const CommonFlags& flags, EventSink* events) {
    Options options;
    options.endpoint = flags.endpoint;
    options.cache_dir = flags.cache_dir;
    options.registries = flags.registries;
    options.project_dir = flags.project;
    options.targets = flags.targets;
    options.sigstore_trusted_root = flags.trusted_root;
    if (flags.offline) options.offline = true;
    options.events = events;
    options.cancel = interrupt_flag();
    return options;
}

void status(const CommonFlags& flags, const std::string& line) {
    if (!flags.quiet) std::cerr << printable(line) << '\n';  // it quotes names a hub or a cache held
}

// Hub text, paths and symbol names may hold bytes that are not UTF-8; they
// are replaced rather than aborting the output.
void print_json(const nlohmann::ordered_json& object) {
    // ASCII only: a bidi override or C1 control from a hub becomes \uXXXX,
    // which JSON readers decode and a terminal does not obey.
    std::cout << object.dump(2, ' ', true, nlohmann::ordered_json::error_handler_t::replace) << std::endl;
}

nlohmann::ordered_json fetch_json(const FetchResult& result) {
    nlohmann::ordered_json files = nlohmann::ordered_json::array();
    for (const auto& file : result.files) {
        files.push_back({{"path", file.path}, {"size", file.size}, {"sha256", file.sha256}});
    }
    return {{"name", result.name},
            {"repo_id", result.repo_id},
            {"revision", result.revision},
            {"commit", result.commit},
            {"variant", result.variant},
            {"path", result.path},
            {"files", files},
            {"bytes_downloaded", result.bytes_downloaded},
            {"requests", result.requests},
            {"signature", result.signature ? signature_json(*result.signature) : nlohmann::ordered_json(nullptr)}};
}

static std::string utc_time(std::int64_t seconds) {
    const std::time_t time = static_cast<std::time_t>(seconds);
    std::tm parts{};
    gmtime_r(&time, &parts);
    char text[32];
    if (std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &parts) == 0) return std::to_string(seconds);
    return text;
}

nlohmann::ordered_json signature_json(const SignatureInfo& signature) {
    nlohmann::ordered_json out = {
        {"identity", signature.identity}, {"issuer", signature.issuer}, {"repository", signature.repository}};
    out["log_time"] =
        signature.log_time > 0 ? nlohmann::ordered_json(utc_time(signature.log_time)) : nlohmann::ordered_json(nullptr);
    out["log_index"] =
        signature.log_time > 0 ? nlohmann::ordered_json(signature.log_index) : nlohmann::ordered_json(nullptr);
    return out;
}

std::string describe_signature(const SignatureInfo& signature) {
    std::string text = "signed by " + printable(signature.identity) + " (" + printable(signature.issuer) + ")";
    if (!signature.repository.empty()) text += " from " + printable(signature.repository);
    if (signature.log_time > 0) text += ", logged " + utc_time(signature.log_time);
    return text;
}

std::string short_commit(const std::string& commit) {
    return commit.substr(0, 12);
}

std::string human_size(std::uint64_t bytes) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double value = static_cast<double>(bytes);
    int unit = 0;
    while (value >= 1024.0 && unit < 4) {
        value /= 1024.0;
        ++unit;
    }
    char buffer[32];
    // Fits: the longest is "16777216.0 TiB" (2^64 - 1 bytes).
    (void)std::snprintf(buffer, sizeof buffer, unit == 0 ? "%.0f %s" : "%.1f %s", value, units[unit]);
    return buffer;
}

}  // namespace kernhub::cli
