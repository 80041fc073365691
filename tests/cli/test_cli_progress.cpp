// The progress display: the real CLI with its stderr on a pseudo-terminal,
// its drawing replayed on a small screen model, and the plain and quiet
// modes beside it.
#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <regex>

#include "cli/cli_support.hpp"
#include "support/build_paths.hpp"
#include "support/hub_builder.hpp"
#include "support/hub_server.hpp"

using namespace kernhub::test;
using namespace kernhub::test::cli;

namespace {

constexpr unsigned short k_columns = 60;

// A terminal's view of what the CLI drew: rows of text and a cursor, obeying
// the only controls the display may use (\r, \n, ESC [ K, ESC [ n A). Any
// other escape is recorded as a failure. The screen has no bottom edge: a
// real terminal scrolls, which moves the rows and the cursor together.
struct Screen {
    std::vector<std::string> rows{""};
    std::size_t row = 0;
    std::size_t col = 0;
    std::size_t cursor_ups = 0;
    std::size_t erases = 0;
    std::vector<std::string> unknown;  // escape sequences it does not accept

    void feed(const std::string& bytes) {
        for (std::size_t i = 0; i < bytes.size(); ++i) {
            const char c = bytes[i];
            if (c == '\r') {
                col = 0;
            } else if (c == '\n') {
                // The output post-processing is off on the test's pty, so
                // this is the CLI's own \n; a terminal with ONLCR (the
                // default) shows it as a new line's start.
                if (++row == rows.size()) rows.emplace_back();
                col = 0;
            } else if (c == '\033') {
                std::size_t end = i + 1;
                if (end < bytes.size() && bytes[end] == '[') {
                    ++end;
                    while (end < bytes.size() && std::isdigit(static_cast<unsigned char>(bytes[end]))) ++end;
                }
                const std::string sequence = bytes.substr(i, end + 1 - i);
                const char final_byte = end < bytes.size() ? bytes[end] : '\0';
                const std::string digits = sequence.size() > 3 ? sequence.substr(2, sequence.size() - 3) : "";
                if (sequence.size() >= 3 && sequence[1] == '[' && final_byte == 'K' && digits.empty()) {
                    rows[row].resize(std::min(rows[row].size(), col));
                    ++erases;
                } else if (sequence.size() >= 3 && sequence[1] == '[' && final_byte == 'A') {
                    const std::size_t n = digits.empty() ? 1 : std::stoul(digits);
                    row -= std::min(row, n);
                    ++cursor_ups;
                } else {
                    unknown.push_back(sequence);
                }
                i = end;
            } else {
                if (rows[row].size() < col) rows[row].resize(col, ' ');
                if (col < rows[row].size()) {
                    rows[row][col] = c;
                } else {
                    rows[row].push_back(c);
                }
                ++col;
            }
        }
    }

    // The rows that hold something, in order.
    std::vector<std::string> text() const {
        std::vector<std::string> out;
        for (const auto& r : rows) {
            if (!r.empty()) out.push_back(r);
        }
        return out;
    }
};

// The pieces of text drawn between controls (\r, \n, escapes): what each
// single draw put on one line.
std::vector<std::string> drawn_pieces(const std::string& bytes) {
    std::vector<std::string> pieces;
    std::string piece;
    for (std::size_t i = 0; i < bytes.size(); ++i) {
        const char c = bytes[i];
        if (c == '\r' || c == '\n' || c == '\033') {
            if (!piece.empty()) pieces.push_back(piece);
            piece.clear();
            if (c == '\033' && i + 1 < bytes.size() && bytes[i + 1] == '[') {
                i += 2;
                while (i < bytes.size() && std::isdigit(static_cast<unsigned char>(bytes[i]))) ++i;
            }
        } else {
            piece += c;
        }
    }
    if (!piece.empty()) pieces.push_back(piece);
    return pieces;
}

struct PtyRun {
    int exit_code = -1;
    std::string out;  // stdout (a pipe)
    std::string tty;  // everything written to the terminal (stderr)
};

// kernhub ARGS... like Sandbox::kh, with stderr on a fresh pseudo-terminal
// of k_columns x 24 whose output post-processing is off (bytes arrive as
// written). stdin is /dev/null, stdout a pipe.
PtyRun run_on_pty(const Sandbox& box, const std::vector<std::string>& args, const EnvChanges& extra = {}) {
    UniqueFd master(posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
    REQUIRE(master.get() >= 0);
    REQUIRE(grantpt(master.get()) == 0);
    REQUIRE(unlockpt(master.get()) == 0);
    char name[128];
    REQUIRE(ptsname_r(master.get(), name, sizeof name) == 0);
    UniqueFd terminal(open(name, O_RDWR | O_NOCTTY | O_CLOEXEC));
    REQUIRE(terminal.get() >= 0);
    termios mode{};
    REQUIRE(tcgetattr(terminal.get(), &mode) == 0);
    mode.c_oflag &= ~static_cast<tcflag_t>(OPOST);
    REQUIRE(tcsetattr(terminal.get(), TCSANOW, &mode) == 0);
    winsize size{};
    size.ws_col = k_columns;
    size.ws_row = 24;
    REQUIRE(ioctl(master.get(), TIOCSWINSZ, &size) == 0);
    UniqueFd null_in(open("/dev/null", O_RDONLY | O_CLOEXEC));
    REQUIRE(null_in.get() >= 0);
    Pipe out = make_pipe();

    std::vector<std::string> argv{KERNHUB_CLI_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    const pid_t pid =
        spawn_process(argv, box.env(extra), box.dir.path().string(), null_in.get(), out.write.get(), terminal.get());
    out.write.reset();
    null_in.reset();

    // The terminal stays open here, so its master never reads EOF: the
    // child's end of stdout says when it is gone, and then what it left in
    // the terminal is drained without blocking.
    PtyRun run;
    char buffer[4096];
    bool stdout_open = true;
    while (stdout_open) {
        pollfd fds[2] = {{master.get(), POLLIN, 0}, {out.read.get(), POLLIN, 0}};
        if (poll(fds, 2, 1000) < 0) {
            REQUIRE(errno == EINTR);
            continue;
        }
        if ((fds[0].revents & POLLIN) != 0) {
            const ssize_t n = read(master.get(), buffer, sizeof buffer);
            if (n > 0) run.tty.append(buffer, static_cast<std::size_t>(n));
        }
        if ((fds[1].revents & (POLLIN | POLLHUP)) != 0) {
            const ssize_t n = read(out.read.get(), buffer, sizeof buffer);
            if (n > 0) {
                run.out.append(buffer, static_cast<std::size_t>(n));
            } else if (n == 0) {
                stdout_open = false;
            }
        }
    }
    run.exit_code = wait_process(pid);
    REQUIRE(fcntl(master.get(), F_SETFL, fcntl(master.get(), F_GETFL) | O_NONBLOCK) == 0);
    for (ssize_t n; (n = read(master.get(), buffer, sizeof buffer)) > 0;) {
        run.tty.append(buffer, static_cast<std::size_t>(n));
    }
    return run;
}

std::string describe_pty(const PtyRun& r) {
    std::string shown;
    for (char c : r.tty) shown += c == '\033' ? std::string("<ESC>") : std::string(1, c);
    return "exit " + std::to_string(r.exit_code) + "\n--- stdout ---\n" + r.out + "--- terminal ---\n" + shown;
}

std::size_t count_of(const std::string& text, const std::string& part) {
    std::size_t n = 0;
    for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size())) ++n;
    return n;
}

// Pseudo-random bytes (no run of them compresses or repeats).
void write_noise(const fs::path& path, std::size_t size, unsigned seed) {
    std::string bytes(size, '\0');
    std::uint32_t state = seed * 2654435761u + 1;
    for (auto& b : bytes) {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        b = static_cast<char>(state & 0xffu);
    }
    std::ofstream(path, std::ios::binary) << bytes;
}

// A hub with kernhub-test/progress: one variant of four files (two of them a
// few hundred KiB to a MiB, one with a name longer than the terminal) plus
// its metadata.json; its LFS bodies can be slowed down so that the display
// redraws while they arrive.
struct ProgressHub {
    TempDir dir;
    std::string prefix = "build/" + host_cpu_variant() + "/";
    std::string long_name = "a-file-whose-name-is-far-too-long-for-a-sixty-column-terminal-line.bin";
    std::vector<std::string> files = {prefix + "weights-a.bin", prefix + "weights-b.bin", prefix + long_name,
                                      prefix + "README.txt", prefix + "metadata.json"};
    std::unique_ptr<HubServer> server;

    ProgressHub() {
        write_noise(dir.path() / "a.bin", 1536u << 10, 1);
        write_noise(dir.path() / "b.bin", 768u << 10, 2);
        write_noise(dir.path() / "long.bin", 300u << 10, 3);
        nlohmann::json repo_files = nlohmann::json::object();
        repo_files[prefix + "weights-a.bin"] = {{"path", (dir.path() / "a.bin").string()}, {"lfs", true}};
        repo_files[prefix + "weights-b.bin"] = {{"path", (dir.path() / "b.bin").string()}, {"lfs", true}};
        repo_files[prefix + long_name] = {{"path", (dir.path() / "long.bin").string()}, {"lfs", true}};
        repo_files[prefix + "README.txt"] = {{"text", "progress test\n"}};
        nlohmann::json commit = {
            {"message", "progress"}, {"branches", {"main"}}, {"metadata", true}, {"files", repo_files}};
        nlohmann::json repo = {{"repo_id", "kernhub-test/progress"}, {"type", "kernel"}};
        repo["commits"] = nlohmann::json::array({commit});
        make_hub({{"repos", nlohmann::json::array({repo})}}, dir.path() / "hub");
        server = std::make_unique<HubServer>(dir.path() / "hub");
    }

    // About 2.6 MiB of LFS bodies at 4 MiB/s: some 0.6 s of drawing.
    void slow_down() {
        server->add_faults(
            {{{"match", "/lfs/"}, {"action", "throttle"}, {"bytes_per_second", 4 << 20}, {"count", -1}}});
    }

    std::vector<std::string> fetch_args(const Sandbox& box) const {
        return {"fetch",      "kernhub-test/progress", "--registry",  box.registry.string(),
                "--endpoint", server->endpoint(),      "--cache-dir", box.cache.string()};
    }
};

}  // namespace

TEST_CASE("on a terminal the progress block is redrawn in place and leaves only the finished files", "[cli]") {
    ProgressHub hub;
    hub.slow_down();
    Sandbox box;
    const PtyRun r = run_on_pty(box, hub.fetch_args(box));
    INFO(describe_pty(r));
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.empty());

    // It draws with cursor-up and erase-line, and nothing else.
    Screen screen;
    screen.feed(r.tty);
    CHECK(screen.cursor_ups > 0);
    CHECK(screen.erases > 0);
    CHECK(screen.unknown.empty());
    CHECK(r.tty.find(std::string("\033[1A")) != std::string::npos);  // a one-line block at least once

    // A total line with the files, bytes, a percent, a rate and an ETA; a
    // line per file in flight with its bytes and percent. No drawn piece
    // with a percent is as wide as the terminal (it would wrap).
    const std::regex total_line(
        R"(total \d+/5 files [0-9.]+ (B|KiB|MiB)/[0-9.]+ (KiB|MiB) +\d+% [0-9.]+ (B|KiB|MiB)/s ETA (\d+:\d\d|--:--))");
    const std::regex file_line(R"(weights-a\.bin [0-9.]+ (B|KiB|MiB)/1\.5 MiB +\d+%)");
    bool saw_total = false, saw_file = false, saw_cut_name = false, saw_partial = false;
    for (const auto& piece : drawn_pieces(r.tty)) {
        if (piece.find('%') != std::string::npos) {
            INFO(piece);
            CHECK(piece.size() < k_columns);
        }
        saw_total = saw_total || std::regex_search(piece, total_line);
        saw_file = saw_file || std::regex_search(piece, file_line);
        // The long name is cut at its front, keeping the end that names the file.
        saw_cut_name =
            saw_cut_name || (piece.rfind("...", 0) == 0 && piece.find("terminal-line.bin ") != std::string::npos);
        saw_partial = saw_partial || (piece.find("weights-a.bin") != std::string::npos &&
                                      piece.find('%') != std::string::npos && piece.find("100%") == std::string::npos);
    }
    CHECK(saw_total);
    CHECK(saw_file);
    CHECK(saw_cut_name);
    CHECK(saw_partial);  // it drew while the slowed body was arriving

    // What stays on the screen: each file's "done" line (in full, not cut),
    // then the summary; no file or total line in flight is left behind.
    const std::vector<std::string> rows = screen.text();
    for (const auto& file : hub.files) {
        INFO(file);
        const std::size_t found =
            static_cast<std::size_t>(std::count_if(rows.begin(), rows.end(), [&](const auto& row) {
                return row.rfind(file + " ", 0) == 0 && row.size() > 5 && row.compare(row.size() - 5, 5, " done") == 0;
            }));
        CHECK(found == 1);
    }
    for (const auto& row : rows) {
        INFO(row);
        CHECK(row.find('%') == std::string::npos);
        CHECK(row.rfind("total ", 0) != 0);
    }
    REQUIRE(rows.size() == hub.files.size() + 2);
    CHECK(rows[hub.files.size()].rfind("fetched kernhub-test/progress ", 0) == 0);
    CHECK(screen.row == screen.rows.size() - 1);  // the cursor ends below everything
}

TEST_CASE("without a terminal, or with HF_HUB_DISABLE_PROGRESS_BARS=1, progress is one plain line per file", "[cli]") {
    ProgressHub hub;
    const auto check_plain = [&](const std::string& err) {
        CHECK(err.find('\r') == std::string::npos);
        CHECK(err.find('\033') == std::string::npos);
        CHECK(count_of(err, "downloading ") == hub.files.size());
        for (const auto& file : hub.files) {
            INFO(file);
            CHECK(count_of(err, "downloading " + file + " (") == 1);
        }
        CHECK(err.find(" done\n") == std::string::npos);
        CHECK(err.find("total ") == std::string::npos);
        CHECK(count_lines(err) == hub.files.size() + 2);  // the files, the summary and the path
    };

    SECTION("stderr is a pipe") {
        Sandbox box;
        const ProcessResult r = box.run(hub.fetch_args(box), {{"HF_HUB_DISABLE_PROGRESS_BARS", "0"}});
        INFO(kernhub::test::cli::describe(r));
        REQUIRE(r.exit_code == 0);
        check_plain(r.err);
    }
    SECTION("stderr is a terminal but the bars are off") {
        Sandbox box;
        const PtyRun r = run_on_pty(box, hub.fetch_args(box), {{"HF_HUB_DISABLE_PROGRESS_BARS", "1"}});
        INFO(describe_pty(r));
        REQUIRE(r.exit_code == 0);
        check_plain(r.tty);
    }
}

TEST_CASE("quiet mode draws nothing on a terminal, and a failed download leaves no progress block behind", "[cli]") {
    ProgressHub hub;
    {
        Sandbox box;
        std::vector<std::string> args = hub.fetch_args(box);
        args.push_back("--quiet");
        const PtyRun r = run_on_pty(box, args);
        INFO(describe_pty(r));
        CHECK(r.exit_code == 0);
        CHECK(r.tty.empty());
        CHECK(r.out.empty());
        CHECK(fs::exists(box.cache / "kernels--kernhub-test--progress" / "blobs"));  // it did download
    }
    // The CDN cuts every body short: the fetch fails in the middle of a
    // file, and the error is printed where the block was, not under it.
    hub.server->add_faults({{{"match", "/lfs/"}, {"action", "truncate"}, {"after_bytes", 200000}, {"count", -1}}});
    Sandbox box;
    const PtyRun r = run_on_pty(box, hub.fetch_args(box), {{"NO_COLOR", "1"}});
    INFO(describe_pty(r));
    CHECK(r.exit_code == 5);
    Screen screen;
    screen.feed(r.tty);
    CHECK(screen.unknown.empty());
    const std::vector<std::string> rows = screen.text();
    REQUIRE_FALSE(rows.empty());
    CHECK(rows.back().rfind("kernhub: error: ", 0) == 0);
    for (const auto& row : rows) {
        INFO(row);
        CHECK(row.find('%') == std::string::npos);
    }
}
