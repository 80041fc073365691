// Output policy (--quiet, no bars or colour off a TTY), --version/--help,
// and several CLI processes sharing one cold cache.
#include <algorithm>
#include <atomic>
#include <thread>

#include "cli/cli_support.hpp"
#include "kernhub/kernhub.hpp"

using namespace kernhub::test;
using namespace kernhub::test::cli;

namespace {

bool has_control_codes(const std::string& text) {
    return text.find('\r') != std::string::npos || text.find('\033') != std::string::npos;
}

}  // namespace

TEST_CASE("quiet mode prints nothing on success and plain stderr off a TTY has no bars or colour", "[cli]") {
    KernelHub hub;
    Sandbox box;
    const std::string ep = hub.server().endpoint();

    ProcessResult r = box.kh("fetch", "vector-add", ep, {"--quiet"});
    INFO(describe(r));
    CHECK(r.exit_code == 0);
    CHECK(r.err.empty());
    CHECK(r.out.empty());
    CHECK(hub.server().count_requests("/lfs/") == 1);  // it did download
    r = box.kh("load", "vector-add", ep, {"-q"});
    CHECK(r.exit_code == 0);
    CHECK(r.err.empty());
    CHECK(r.out.empty());

    // A cold fetch without --quiet: one plain line per download, then the summary.
    Sandbox loud;
    r = loud.kh("fetch", "vector-add", ep);
    INFO(describe(r));
    CHECK(r.exit_code == 0);
    CHECK(r.out.empty());
    CHECK_FALSE(has_control_codes(r.err));
    CHECK(r.err.find("downloading build/" + host_cpu_variant() + "/libvector_add.so (") != std::string::npos);
    CHECK(r.err.find("fetched vector-add") != std::string::npos);
    CHECK(count_lines(r.err) == 4);  // metadata.json, libvector_add.so, summary, path

    // Progress bars stay off even when asked not to be disabled; errors stay plain too.
    r = loud.kh("fetch", "bad-digest", ep, {}, {{"HF_HUB_DISABLE_PROGRESS_BARS", "0"}});
    CHECK(r.exit_code == 4);
    CHECK_FALSE(has_control_codes(r.err));
    CHECK(r.err.find("\nkernhub: error: ") != std::string::npos);

    // --json keeps stdout to the object; stderr has only plain lines.
    Sandbox json_box;
    r = json_box.kh("fetch", "vector-add", ep, {"--json"});
    CHECK(r.exit_code == 0);
    CHECK(parse_stdout(r).is_object());
    CHECK_FALSE(has_control_codes(r.err));
    CHECK_FALSE(has_control_codes(r.out));
}

TEST_CASE("the version and help flags exit 0", "[cli]") {
    Sandbox box;
    ProcessResult r = box.run({"--version"});
    INFO(describe(r));
    CHECK(r.exit_code == 0);
    CHECK(r.out == std::string("kernhub ") + kernhub::version() + "\n");

    r = box.run({"--help"});
    INFO(describe(r));
    CHECK(r.exit_code == 0);
    for (const char* command : {"fetch", "load", "list", "info"}) {
        INFO(command);
        CHECK(r.out.find(command) != std::string::npos);
    }

    r = box.run({"fetch", "--help"});
    INFO(describe(r));
    CHECK(r.exit_code == 0);
    for (const char* flag : {"--endpoint", "--cache-dir", "--registry", "--target", "--offline", "--json", "--quiet"}) {
        INFO(flag);
        CHECK(r.out.find(flag) != std::string::npos);
    }
}

TEST_CASE("four processes fetching one kernel into a cold cache download it once", "[cli]") {
    KernelHub hub;
    Sandbox box;
    // Hold the CDN reply back so the processes overlap while the blob is in flight.
    hub.server().add_faults({{{"match", "/lfs/"}, {"action", "delay"}, {"seconds", 0.5}, {"count", -1}}});
    constexpr int k_processes = 4;
    std::vector<ProcessResult> results(k_processes);
    std::vector<std::thread> threads;
    std::atomic<int> ready{0};
    for (int i = 0; i < k_processes; ++i) {
        threads.emplace_back([&, i] {
            ready.fetch_add(1);
            while (ready.load() < k_processes) std::this_thread::yield();
            try {
                results[i] = box.kh("fetch", "vector-add", hub.server().endpoint(), {"--json", "--quiet"});
            } catch (const std::exception& e) {
                results[i].err = e.what();
            }
        });
    }
    for (auto& t : threads) t.join();

    std::uint64_t downloaded = 0;
    std::string path;
    for (const auto& r : results) {
        INFO(describe(r));
        REQUIRE(r.exit_code == 0);
        json j = parse_stdout(r);
        CHECK(j["variant"] == host_cpu_variant());
        if (path.empty()) path = j["path"];
        CHECK(j["path"] == path);
        downloaded += j["bytes_downloaded"].get<std::uint64_t>();
        REQUIRE(j["files"].size() == 2);
        for (const auto& f : j["files"]) {
            CHECK(sha256_of(fs::path(path) / f["path"].get<std::string>()) == f["sha256"]);
        }
    }
    CHECK(hub.server().count_requests("/lfs/") == 1);
    // The .so's bytes were counted by one process only.
    CHECK(downloaded < 2 * fs::file_size(vector_add_so()));
    CHECK(downloaded >= fs::file_size(vector_add_so()));
    const fs::path blobs = box.cache / k_vector_add_folder / "blobs";
    REQUIRE(fs::is_directory(blobs));
    CHECK_FALSE(tree_has_name(blobs, ".incomplete"));
    // Links are made under .kernhub/tmp/ and renamed into snapshots/: no temp may be left there.
    const fs::path staging = box.cache / k_vector_add_folder / ".kernhub" / "tmp";
    REQUIRE(fs::is_directory(staging));
    CHECK(fs::is_empty(staging));
    std::size_t blob_count = 0;
    for (const auto& entry : fs::directory_iterator(blobs)) {
        ++blob_count;
        CHECK((entry.path().filename().string().size() == 40 || entry.path().filename().string().size() == 64));
    }
    CHECK(blob_count == 2);  // libvector_add.so (sha256) and metadata.json (git sha1)
}

namespace {

// Bytes a terminal would obey: ESC, BEL, CSI as a raw byte and as UTF-8.
bool has_terminal_controls(const std::string& text) {
    return text.find('\033') != std::string::npos || text.find('\007') != std::string::npos ||
           text.find('\x9b') != std::string::npos || text.find("\xc2\x9b") != std::string::npos;
}

}  // namespace

TEST_CASE("a hub's error message and a registry's names reach the terminal escaped, one line each", "[cli]") {
    KernelHub hub;
    Sandbox box;
    // The hub answers the revision lookup with a message that would retitle
    // the terminal, clear it (CSI as a C1 control) and start a new line.
    const std::string message =
        "denied\033]0;pwned\007 \xc2\x9b"
        "2J\nkernhub: fetched vector-add";
    hub.server().add_faults(
        {{{"match", "/revision/"}, {"action", "status"}, {"status", 403}, {"message", message}, {"count", -1}}});
    ProcessResult r = box.kh("fetch", "vector-add", hub.server().endpoint());
    INFO(describe(r));
    CHECK(r.exit_code != 0);
    CHECK_FALSE(has_terminal_controls(r.err));
    CHECK(r.err.find("denied\\x1b]0;pwned\\x07") != std::string::npos);
    CHECK(r.err.find("\nkernhub: fetched") == std::string::npos);  // no forged second line
    CHECK(count_lines(r.err) == 1);

    // --json: the message is still escaped text inside a JSON string.
    r = box.kh("fetch", "vector-add", hub.server().endpoint(), {"--json"});
    CHECK_FALSE(has_terminal_controls(r.out));
    CHECK(parse_stdout(r)["error"]["message"].get<std::string>().find("pwned\\x07") != std::string::npos);

    // A registry entry named with escapes is refused, quoting the name escaped.
    const fs::path registry = box.dir.path() / "escapes.json";
    write_text(registry,
               json({{"format", 1},
                     {"kernels",
                      {{"red\033[31mname\u202e",
                        {{"repo_id", "kernhub-test/vector-add"}, {"revision", "main"}, {"symbol", "kh_vector_add"}}}}}})
                   .dump());
    r = box.run({"list", "--registry", registry.string()});
    INFO(describe(r));
    CHECK_FALSE(has_terminal_controls(r.out + r.err));
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("\u202e") == std::string::npos);
    CHECK(r.err.find("red\\u001b[31mname\\u202e") != std::string::npos);  // JSON-escaped, then the bidi override
}

TEST_CASE("inspect --json output is ASCII: a NEEDED entry with a bidi override and a C1 control comes out escaped",
          "[cli]") {
    Sandbox box;
    const fs::path dir = box.dir.path();
    // A library whose soname holds U+202E and U+009B, and one that needs it.
    const std::string soname = "libw\u202e\xc2\x9b.so";
    write_text(dir / "w.c", "int w(void) { return 1; }\n");
    write_text(dir / "u.c", "int w(void);\nint u(void) { return w(); }\n");
    ProcessResult cc = run_process(
        {"cc", "-shared", "-fPIC", "-o", (dir / "libw.so").string(), "-Wl,-soname," + soname, (dir / "w.c").string()});
    REQUIRE(cc.exit_code == 0);
    cc = run_process({"cc", "-shared", "-fPIC", "-o", (dir / "libu.so").string(), (dir / "u.c").string(),
                      "-L" + dir.string(), "-lw"});
    REQUIRE(cc.exit_code == 0);

    ProcessResult r = box.run({"inspect", (dir / "libu.so").string(), "--json"});
    INFO(describe(r));
    REQUIRE(r.exit_code == 0);
    CHECK(std::all_of(r.out.begin(), r.out.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; }));
    CHECK_FALSE(has_terminal_controls(r.out));
    // A JSON reader still gets the name back.
    const std::string text = parse_stdout(r).dump();
    CHECK(text.find("\u202e") != std::string::npos);
}
