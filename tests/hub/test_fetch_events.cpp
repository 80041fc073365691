// The events a fetch reports: a plan of the variant's downloads before the
// first of them, then each file's start, bytes and end.
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <mutex>
#include <utility>
#include <vector>

#include "hub/hub_env.hpp"
#include "kernhub/events.hpp"
#include "kernhub/kernhub.hpp"
#include "support/kernel_hub.hpp"

using namespace kernhub;
using namespace kernhub::test;
using namespace kernhub::test::hub_env;
namespace fs = std::filesystem;

namespace {

class Recorder final : public EventSink {
public:
    void on_event(const Event& event) noexcept override {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_events.push_back(event);
    }
    std::vector<Event> take() {
        std::lock_guard<std::mutex> lock(m_mutex);
        return std::exchange(m_events, {});
    }

private:
    std::mutex m_mutex;
    std::vector<Event> m_events;
};

std::vector<Event> of_kind(const std::vector<Event>& events, Event::Kind kind) {
    std::vector<Event> out;
    for (const auto& e : events) {
        if (e.kind == kind) out.push_back(e);
    }
    return out;
}

}  // namespace

TEST_CASE("a fetch announces the files it will download, with their bytes, before the first one", "[hub]") {
    KernelHub hub;
    Env env;
    Recorder recorder;
    Options options = env.options(hub.server().endpoint());
    options.events = &recorder;

    // Cold: the plan covers every file of the variant.
    FetchResult result = Client(options).fetch("two-objects");
    std::vector<Event> events = recorder.take();
    std::vector<Event> plans = of_kind(events, Event::Kind::download_plan);
    REQUIRE(plans.size() == 1);
    CHECK(plans[0].text == host_cpu_variant());
    CHECK(plans[0].path.empty());
    REQUIRE(result.files.size() == 3);  // two .so files and metadata.json
    std::uint64_t bytes = 0;
    for (const auto& file : result.files) bytes += file.size;
    CHECK(plans[0].done == 3);
    CHECK(plans[0].total == bytes);
    const auto plan_at =
        std::find_if(events.begin(), events.end(), [](const Event& e) { return e.kind == Event::Kind::download_plan; });
    const auto first_start = std::find_if(events.begin(), events.end(),
                                          [](const Event& e) { return e.kind == Event::Kind::download_start; });
    CHECK(plan_at < first_start);
    std::vector<Event> done = of_kind(events, Event::Kind::download_done);
    CHECK(done.size() == 3);
    std::uint64_t done_bytes = 0;
    for (const auto& e : done) done_bytes += e.total;
    CHECK(done_bytes == plans[0].total);

    // Warm: nothing to download, no plan.
    Client(options).fetch("two-objects");
    events = recorder.take();
    CHECK(of_kind(events, Event::Kind::download_plan).empty());
    CHECK(of_kind(events, Event::Kind::download_start).empty());

    // One blob gone: the plan counts that file only.
    const fs::path blobs = env.folder("two-objects") / "blobs";
    fs::path removed;
    std::uint64_t removed_size = 0;
    for (const auto& entry : fs::directory_iterator(blobs)) {
        if (entry.file_size() > removed_size) {
            removed = entry.path();
            removed_size = entry.file_size();
        }
    }
    REQUIRE(fs::remove(removed));
    Client(options).fetch("two-objects");
    events = recorder.take();
    plans = of_kind(events, Event::Kind::download_plan);
    REQUIRE(plans.size() == 1);
    CHECK(plans[0].done == 1);
    CHECK(plans[0].total == removed_size);
    CHECK(of_kind(events, Event::Kind::download_start).size() == 1);

    // Offline, from a complete cache: no plan either.
    options.offline = true;
    Client(options).fetch("two-objects");
    CHECK(of_kind(recorder.take(), Event::Kind::download_plan).empty());
}
