#include "common.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <iostream>

#include "interrupt.hpp"

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
    command.add_flag("-q,--quiet", flags.quiet, "Print nothing but errors, warnings and --json output");
    command.add_option("--trusted-root", flags.trusted_root,
                       "Sigstore trusted_root.json for signature policies (env KERNHUB_SIGSTORE_TRUSTED_ROOT; "
                       "default: the public-good root built in)");
}

void add_host_flag(CLI::App& command, CommonFlags& flags) {
    CLI::Option* host = command.add_option(
        "--host", flags.host,
        "Select what another machine would: KEY=VALUE[,KEY=VALUE...] with cpu, os (both required), one of "
        "cuda/rocm/xpu=X.Y or metal=true, torch=X.Y, cxx11-abi=true|false, tvm-ffi=X.Y, macos=X.Y");
    // An empty value (a CI variable that is not set) must not quietly mean
    // this machine, as an empty Options::host does for the library.
    host->check(CLI::Validator(
        [](const std::string& value) -> std::string {
            return value.empty() ? "the machine to select for is empty; give at least cpu=... and os=..., or "
                                   "leave --host out to select for this machine"
                                 : std::string();
        },
        "KEY=VALUE,...", "not empty"));
    if (CLI::Option* target = command.get_option_no_throw("--target")) host->excludes(target);
}

static bool env_set(const char* name) {
    const char* value = std::getenv(name);
    return value != nullptr && *value != '\0' && std::string(value) != "0";
}

ProgressPrinter::ProgressPrinter(bool quiet)
    : m_quiet(quiet), m_bars(!quiet && isatty(STDERR_FILENO) == 1 && !env_set("HF_HUB_DISABLE_PROGRESS_BARS")) {}

ProgressPrinter::~ProgressPrinter() {
    if (!m_bars) return;
    try {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_in_flight.clear();
        redraw({});
    } catch (...) {
        // Erasing is a courtesy; the command is ending either way.
    }
}

void ProgressPrinter::on_event(const Event& event) noexcept {
    // --quiet silences progress, not the library's warnings ("warning: …",
    // an override of pinned commits for one).
    if (m_quiet) {
        if (event.kind == Event::Kind::info && event.text.rfind("warning: ", 0) == 0) {
            (void)std::fprintf(stderr, "%s\n", printable(event.text).c_str());
        }
        return;
    }
    // Progress goes to stderr as a courtesy: when that write fails there is
    // nowhere left to report it, so the results of fprintf are dropped, and
    // an allocation failure drops the line rather than the program.
    try {
        std::lock_guard<std::mutex> lock(m_mutex);
        if (m_bars) {
            on_bar_event(event);
            return;
        }
        switch (event.kind) {
            case Event::Kind::download_start:
                (void)std::fprintf(stderr, "downloading %s (%s)\n", printable(event.path).c_str(),
                                   human_size(event.total).c_str());
                break;
            case Event::Kind::retry:
            case Event::Kind::info:
                (void)std::fprintf(stderr, "%s\n", printable(event.text).c_str());
                break;
            case Event::Kind::download_plan:
            case Event::Kind::download_bytes:
            case Event::Kind::download_done:
                break;
        }
    } catch (...) {
        // Dropped, as said above.
    }
}

// A batch is what the total line sums up: the files of the plans announced
// while it lasts, plus any file started beyond them (or all files started,
// on a path that announces no plan).
void ProgressPrinter::start_batch() {
    m_seen.clear();
    m_total_files = m_total_bytes = m_planned_files = 0;
    m_finished_files = m_finished_bytes = m_received = 0;
    m_batch_start = Clock::now();
}

void ProgressPrinter::on_bar_event(const Event& event) {
    // At most ten redraws a second while bytes arrive, so that a fast
    // loopback does not flood the terminal; starts, ends and messages
    // always redraw.
    constexpr auto k_redraw_interval = std::chrono::milliseconds(100);
    const std::string path = printable(event.path);
    const std::string key = event.repo + '\n' + path;
    auto file = std::find_if(m_in_flight.begin(), m_in_flight.end(),
                             [&](const InFlight& candidate) { return candidate.key == key; });
    switch (event.kind) {
        case Event::Kind::download_plan:
            // A plan that finds nothing in flight begins a new batch; one
            // that comes while files are in flight (kernels prewarmed side
            // by side) adds to the current one.
            if (m_in_flight.empty()) start_batch();
            m_total_files += event.done;
            m_planned_files += event.done;
            m_total_bytes += event.total;
            break;
        case Event::Kind::download_start:
            if (m_in_flight.empty() && m_finished_files >= m_total_files) start_batch();
            // A download started again from the start (its partial did not
            // verify) is the same file, not one more.
            if (m_seen.insert(key).second && m_seen.size() > m_planned_files) {
                ++m_total_files;
                m_total_bytes += event.total;
            }
            if (file == m_in_flight.end()) {
                m_in_flight.push_back({key, path, event.done, event.total});
            } else {
                file->done = event.done;
                file->total = event.total;
            }
            redraw({});
            break;
        case Event::Kind::download_bytes:
            if (file == m_in_flight.end()) break;
            if (event.done > file->done) m_received += event.done - file->done;
            file->done = event.done;
            file->total = event.total;
            if (Clock::now() - m_last_draw >= k_redraw_interval) redraw({});
            break;
        case Event::Kind::download_done:
            if (file != m_in_flight.end()) {
                if (event.total > file->done) m_received += event.total - file->done;
                m_in_flight.erase(file);
            }
            ++m_finished_files;
            m_finished_bytes += event.total;
            redraw({path + " " + human_size(event.total) + " done"});
            break;
        case Event::Kind::retry:
        case Event::Kind::info:
            redraw({printable(event.text)});
            break;
    }
}

namespace {

// Columns a printable() text takes at most: a multi-byte UTF-8 character
// may be a wide one (CJK), so it counts two. Overcounting only cuts a line
// shorter; undercounting would wrap it and break the cursor-up accounting.
std::size_t columns(std::string_view text) {
    std::size_t count = 0;
    for (char c : text) {
        const auto byte = static_cast<unsigned char>(c);
        if (byte < 0x80) {
            ++count;
        } else if (byte >= 0xc0) {
            count += 2;  // a lead byte; continuation bytes (0x80..0xbf) add nothing
        }
    }
    return count;
}

bool continuation(char c) {
    return (static_cast<unsigned char>(c) & 0xc0u) == 0x80u;
}

// The end of `text` in at most `width` columns, "..." in front when cut:
// the end of a path names the file.
std::string keep_tail(const std::string& text, std::size_t width) {
    if (columns(text) <= width) return text;
    if (width < 4) return std::string(width, '.');
    std::size_t start = text.size();
    std::size_t used = 3;
    while (start > 0) {
        std::size_t lead = start - 1;
        while (lead > 0 && continuation(text[lead])) --lead;
        const std::size_t need = columns(std::string_view(text).substr(lead, start - lead));
        if (used + need > width) break;
        used += need;
        start = lead;
    }
    return "..." + text.substr(start);
}

// The start of `text` in at most `width` columns.
std::string keep_head(const std::string& text, std::size_t width) {
    std::size_t end = 0;
    std::size_t used = 0;
    while (end < text.size()) {
        std::size_t next = end + 1;
        while (next < text.size() && continuation(text[next])) ++next;
        const std::size_t need = columns(std::string_view(text).substr(end, next - end));
        if (used + need > width) break;
        used += need;
        end = next;
    }
    return text.substr(0, end);
}

unsigned percent(std::uint64_t done, std::uint64_t total) {
    if (total == 0 || done >= total) return 100;
    return static_cast<unsigned>(static_cast<double>(done) * 100.0 / static_cast<double>(total));
}

// "m:ss", or "h:mm:ss" from an hour; "--:--" when unknown or over 99 hours.
std::string eta_text(double seconds) {
    if (!(seconds >= 0.0) || seconds >= 99.0 * 3600.0) return "--:--";
    // Rounded by hand rather than with std::lround: that one call was all the
    // program took from libm, and not linking libm saves every start the
    // mapping of one more shared library. `seconds` is not negative here:
    // truncate, then round a half or more up, as lround would.
    auto whole = static_cast<unsigned long>(seconds);
    if (seconds - static_cast<double>(whole) >= 0.5) ++whole;
    char buffer[32];
    if (whole >= 3600) {
        (void)std::snprintf(buffer, sizeof buffer, "%lu:%02lu:%02lu", whole / 3600, whole / 60 % 60, whole % 60);
    } else {
        (void)std::snprintf(buffer, sizeof buffer, "%lu:%02lu", whole / 60, whole % 60);
    }
    return buffer;
}

// The terminal's columns and rows (80 x 24 when stderr does not say).
std::pair<std::size_t, std::size_t> terminal_size() {
    winsize size{};
    if (ioctl(STDERR_FILENO, TIOCGWINSZ, &size) != 0 || size.ws_col == 0) return {80, 24};
    return {static_cast<std::size_t>(size.ws_col), size.ws_row == 0 ? 24 : static_cast<std::size_t>(size.ws_row)};
}

}  // namespace

std::vector<std::string> ProgressPrinter::block_lines(std::size_t width, std::size_t height) const {
    std::vector<std::string> lines;
    if (m_in_flight.empty()) return lines;  // the end of a batch leaves nothing behind
    // One column spare: a line filling the last column leaves some
    // terminals waiting to wrap, which the next \r or \n resolves
    // differently from one terminal to another.
    const std::size_t budget = width > 1 ? width - 1 : 0;
    // The block must fit on the screen, or cursor-up stops at its top edge:
    // at most ten file lines, fewer on a short terminal.
    const std::size_t file_lines = std::max<std::size_t>(1, std::min<std::size_t>(10, height > 3 ? height - 3 : 1));
    std::uint64_t done = m_finished_bytes;
    for (const auto& file : m_in_flight) done += file.done;
    for (std::size_t i = 0; i < m_in_flight.size(); ++i) {
        if (i + 1 == file_lines && m_in_flight.size() > file_lines) {
            lines.push_back(keep_head("... and " + std::to_string(m_in_flight.size() - i) + " more", budget));
            break;
        }
        const InFlight& file = m_in_flight[i];
        char suffix[96];
        (void)std::snprintf(suffix, sizeof suffix, " %s/%s %3u%%", human_size(file.done).c_str(),
                            human_size(file.total).c_str(), percent(file.done, file.total));
        const std::size_t name_width = budget > std::strlen(suffix) ? budget - std::strlen(suffix) : 0;
        lines.push_back(keep_head(keep_tail(file.path, name_width) + suffix, budget));
    }
    const double elapsed = std::chrono::duration<double>(Clock::now() - m_batch_start).count();
    const double rate = elapsed > 0.0 ? static_cast<double>(m_received) / elapsed : 0.0;
    const std::uint64_t total = std::max(m_total_bytes, done);
    const double eta = rate > 0.0 ? static_cast<double>(total - done) / rate : -1.0;
    char line[256];
    (void)std::snprintf(line, sizeof line, "total %llu/%llu files %s/%s %3u%% %s/s ETA %s",
                        static_cast<unsigned long long>(m_finished_files),
                        static_cast<unsigned long long>(std::max(m_total_files, m_finished_files)),
                        human_size(done).c_str(), human_size(total).c_str(), percent(done, total),
                        human_size(static_cast<std::uint64_t>(rate)).c_str(), eta_text(eta).c_str());
    lines.push_back(keep_head(line, budget));
    return lines;
}

void ProgressPrinter::redraw(const std::vector<std::string>& above) {
    const auto [width, height] = terminal_size();
    const std::vector<std::string> lines = block_lines(width, height);
    if (m_drawn == 0 && above.empty() && lines.empty()) return;
    // Only \r, erase-line (ESC [ K) and cursor-up (ESC [ n A): the cursor
    // goes back to the block's first line, the permanent lines take its
    // place, the new block follows, and what is left of the old one is
    // erased. The cursor ends at the start of the line below the block.
    std::string out;
    if (m_drawn > 0) {
        const std::string up = "\033[" + std::to_string(m_drawn) + "A";
        out += "\r" + up;
        if (!above.empty()) {
            // A permanent line wider than the terminal wraps onto the rows
            // below it, where erase-line would clear only its first row: the
            // old block's rows are cleared first, so none of it shows through.
            for (std::size_t i = 0; i < m_drawn; ++i) out += "\r\033[K\n";
            out += up;
        }
    }
    for (const auto& line : above) out += "\r\033[K" + line + "\n";  // may wrap: it scrolls away whole
    for (const auto& line : lines) out += "\r\033[K" + line + "\n";
    const std::size_t written = above.size() + lines.size();
    if (written < m_drawn) {
        for (std::size_t i = written; i < m_drawn; ++i) out += "\r\033[K\n";
        out += "\033[" + std::to_string(m_drawn - written) + "A";
    }
    m_drawn = lines.size();
    m_last_draw = Clock::now();
    // One write, so that no other output lands inside the sequence.
    (void)std::fwrite(out.data(), 1, out.size(), stderr);
    (void)std::fflush(stderr);
}

namespace {

// The sink of a command that shows no progress: the library's warnings
// still reach stderr (an unknown KERNHUB_* variable, for one).
class WarningsOnly final : public EventSink {
public:
    void on_event(const Event& event) noexcept override {
        if (event.kind != Event::Kind::info || event.text.rfind("warning: ", 0) != 0) return;
        (void)std::fprintf(stderr, "%s\n", printable(event.text).c_str());
    }
};

}  // namespace

Options make_options(const CommonFlags& flags, EventSink* events) {
    static WarningsOnly warnings_only;
    Options options;
    options.endpoint = flags.endpoint;
    options.cache_dir = flags.cache_dir;
    options.registries = flags.registries;
    options.project_dir = flags.project;
    options.targets = flags.targets;
    options.host = flags.host;
    options.sigstore_trusted_root = flags.trusted_root;
    if (flags.offline) options.offline = true;
    options.events = events != nullptr ? events : &warnings_only;
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

nlohmann::ordered_json metadata_json(const std::string& text) {
    if (text.empty()) return nullptr;
    return nlohmann::ordered_json::parse(text, nullptr, false);
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
            {"signature", result.signature ? signature_json(*result.signature) : nlohmann::ordered_json(nullptr)},
            {"dependencies", dependencies_json(result)},
            {"local_folder", result.local_folder.empty() ? nlohmann::ordered_json(nullptr)
                                                         : nlohmann::ordered_json(result.local_folder)},
            {"python_depends", metadata_json(result.python_depends)},
            {"provenance", metadata_json(result.provenance)}};
}

nlohmann::ordered_json dependencies_json(const FetchResult& result) {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const FetchResult& dependency : result.dependencies) {
        out.push_back({{"repo_id", dependency.repo_id},
                       {"revision", dependency.revision},
                       {"revisions", dependency.revisions},
                       {"commit", dependency.commit},
                       {"variant", dependency.variant},
                       {"path", dependency.path}});
    }
    return out;
}

void print_dependencies(const CommonFlags& flags, const FetchResult& result) {
    for (const FetchResult& dependency : result.dependencies) {
        std::string names = dependency.revision;
        for (std::size_t i = 1; i < dependency.revisions.size(); ++i) names += ", @" + dependency.revisions[i];
        status(flags, "  depends on " + dependency.repo_id + "@" + names + " (" + short_commit(dependency.commit) +
                          ") variant " + dependency.variant + ": " + dependency.path);
    }
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
