// The main of every test executable: Catch2's session, preceded by the
// requirement check described in requirements.hpp. ctest runs one test case
// per process (catch_discover_tests), so a test whose requirement is unmet
// exits k_skip_exit_code before anything is checked; a run of several test
// cases runs those that can run and names the others. With
// --require-checks (ctest passes it), a test case that makes no assertion
// fails.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cuda/driver.hpp"
#include "kernhub/cuda.hpp"
#include "kernhub/error.hpp"
#include "support/build_paths.hpp"
#include "support/requirements.hpp"
#include "support/tvm_ffi_fixture.hpp"

namespace kernhub::test {
namespace {

struct Entry {
    Requirement why_unmet;
    std::optional<std::string> reason;  // evaluated once
};

std::map<std::string, Entry>& requirements() {
    static std::map<std::string, Entry> table;
    return table;
}

std::string one_line(std::string text) {
    for (char& c : text) {
        if (c == '\n' || c == '\r') c = ' ';
    }
    return text;
}

// Why no CUDA device can be used here, or "" when device 0 exists.
std::string why_no_cuda_device() {
    try {
        if (!cuda::Driver::available()) cuda::Driver::instance();  // throws the binding's Error
        if (cuda::Driver::instance().info().devices.empty()) {
            return "the CUDA driver " + cuda::Driver::instance().library_path() + " reports no device";
        }
        return {};
    } catch (const Error& e) {
        return std::string("no CUDA device: ") + e.what();
    }
}

const bool k_builtin_requirements [[maybe_unused]] = [] {
    register_requirement("gpu", [] { return why_no_cuda_device(); });
    register_requirement("needs:nvcc", [] {
        return KERNHUB_HAVE_NVCC ? std::string()
                                 : std::string(
                                       "nvcc was not found when the build was configured, so the CUDA "
                                       "fixtures in ") +
                                       KERNHUB_FIXTURE_DIR + " were not built";
    });
    register_requirement("needs:no-cuda", [] {
        if (!why_no_cuda_device().empty()) return std::string();
        try {
            return "this machine has a CUDA device (" + cuda::Driver::instance().describe_device(0) +
                   "), so the path without one cannot be shown";
        } catch (const Error&) {
            return std::string("this machine has a CUDA device, so the path without one cannot be shown");
        }
    });
    register_requirement("needs:sm_80", []() -> std::string {
        if (std::string why = why_no_cuda_device(); !why.empty()) return why;
        try {
            const cuda::Device device = cuda::Driver::instance().info().devices.front();
            if (device.cc_major >= 8) return {};
            return cuda::Driver::instance().describe_device(0) +
                   " is older than sm_80, the oldest SASS in the CUDA fixtures";
        } catch (const Error& e) {
            return e.what();
        }
    });
    // Here rather than in tvm_ffi_fixture.cpp: a test executable that used
    // only the tag would not link that file, and its tests would run.
    register_requirement("needs:tvm-ffi", [] { return why_no_tvm_ffi(); });
    register_requirement("needs:cuda-stub", [] {
        return std::filesystem::exists(k_cuda_stub_driver)
                   ? std::string()
                   : "no CUDA toolkit stub library at " + k_cuda_stub_driver.string();
    });
    return true;
}();

// Why this test case cannot run here ("" when it can): the first unmet
// requirement among its tags.
std::string why_not_runnable(const Catch::TestCase& test) {
    for (const std::string& tag : test.lcaseTags) {
        auto it = requirements().find(tag);
        if (it == requirements().end()) continue;
        Entry& entry = it->second;
        if (!entry.reason) entry.reason = one_line(entry.why_unmet());
        if (!entry.reason->empty()) return "[" + tag + "] " + *entry.reason;
    }
    return {};
}

// A test name as a Catch test spec that matches exactly that name.
std::string spec_for(const std::string& name) {
    std::string spec;
    for (char c : name) {
        if (c == '\\' || c == ',' || c == '[' || c == ']') spec += '\\';
        spec += c;
    }
    return spec;
}

// Test cases that ended without a single assertion, for --require-checks.
std::vector<std::string>& unchecked_tests() {
    static std::vector<std::string> names;
    return names;
}

// Counts per test case, over all of its sections, so a SECTION that only
// sets up data for the checks after it is fine (Catch's -w NoAssertions
// would fail such a section).
struct CheckCounter : Catch::TestEventListenerBase {
    using TestEventListenerBase::TestEventListenerBase;
    void testCaseEnded(Catch::TestCaseStats const& stats) override {
        if (stats.totals.assertions.total() == 0) unchecked_tests().push_back(stats.testInfo.name);
    }
};
CATCH_REGISTER_LISTENER(CheckCounter)

}  // namespace

bool register_requirement(const std::string& tag, Requirement why_unmet) {
    requirements()[Catch::toLower(tag)] = Entry{std::move(why_unmet), std::nullopt};
    return true;
}

}  // namespace kernhub::test

// Hidden (run only when named): a ctest entry runs it to show that a run
// with 77 failed assertions exits 1, not ctest's skip code 77.
TEST_CASE("runner: 77 failed checks", "[.runner-self-test]") {
    for (int i = 0; i < 77; ++i) CHECK(i < 0);
}

// Runs the selected test cases; with require_checks, one that made no
// assertion at all fails the run. Exits 0 or 1: Catch returns the number of
// failed assertions, and 77 of them would read as a skip to ctest.
static int run(Catch::Session& session, bool require_checks) {
    int rc = session.run() == 0 ? 0 : 1;
    if (!require_checks) return rc;
    for (const std::string& name : kernhub::test::unchecked_tests()) {
        std::cerr << "FAILED: test case '" << name << "' checked nothing (--require-checks)" << std::endl;
        if (rc == 0) rc = 1;
    }
    return rc;
}

int main(int argc, char* argv[]) {
    using namespace kernhub::test;
    Catch::Session session;
    bool require_checks = false;
    session.cli(session.cli() | Catch::clara::Opt(require_checks)["--require-checks"](
                                    "fail a test case that makes no assertion (ctest passes it)"));
    if (int rc = session.applyCommandLine(argc, argv); rc != 0) return rc;
    Catch::ConfigData& data = session.configData();
    if (data.showHelp || data.libIdentify || data.listTests || data.listTestNamesOnly || data.listTags ||
        data.listReporters) {
        return session.run();
    }

    const Catch::Config& config = session.config();
    std::vector<std::string> runnable;
    std::vector<std::pair<std::string, std::string>> skipped;  // name, reason
    for (const Catch::TestCase& test :
         Catch::filterTests(Catch::getAllTestCasesSorted(config), config.testSpec(), config)) {
        std::string reason = why_not_runnable(test);
        if (reason.empty()) {
            runnable.push_back(test.name);
        } else {
            skipped.emplace_back(test.name, std::move(reason));
        }
    }
    if (skipped.empty()) return run(session, require_checks);
    if (runnable.empty()) {
        if (skipped.size() == 1) {
            std::cout << "SKIPPED: " << skipped.front().second << std::endl;
        } else {
            std::cout << "SKIPPED: " << skipped.size()
                      << " test cases, none can run here; first: " << skipped.front().first << ": "
                      << skipped.front().second << std::endl;
        }
        return k_skip_exit_code;
    }
    // Some can run: run exactly those, and say which were left out and why
    // (on stderr, so that a reporter's output on stdout stays well-formed).
    for (const auto& [name, reason] : skipped) std::cerr << "SKIPPED: " << name << ": " << reason << "\n";
    std::string spec;
    for (const std::string& name : runnable) spec += (spec.empty() ? "" : ",") + spec_for(name);
    data.testsOrTags = {spec};
    session.useConfigData(data);
    return run(session, require_checks);
}
