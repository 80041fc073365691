// The dependency-tree module on its own: what a metadata.json says under
// "kernel-depends" and "kernels-minver", version order, and the walk (load
// order, each kernel once, cycles, the bounds). Then the library: a
// Client's load opens a kernel's dependencies first, and the kernel calls
// into them.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "deptree/metadata.hpp"
#include "deptree/tree.hpp"
#include "kernhub/error.hpp"
#include "kernhub/kernhub.hpp"
#include "support/build_paths.hpp"
#include "support/hub_builder.hpp"
#include "support/kernel_hub.hpp"
#include "support/temp_dir.hpp"

using namespace kernhub;
using namespace kernhub::deptree;
using nlohmann::json;

namespace {

VariantMetadata parse(const json& doc) {
    return parse_variant_metadata(doc.dump(), "org/k variant v");
}

// The Error(verification) parsing `doc` throws; its message.
std::string refusal(const json& doc) {
    try {
        (void)parse(doc);
    } catch (const Error& e) {
        CHECK(e.code() == ErrorCode::verification);
        return e.what();
    }
    FAIL("parsed: " << doc.dump());
    return {};
}

KernelDependency dep(const std::string& repo, int version = 1) {
    return KernelDependency{repo, version, {}};
}

}  // namespace

TEST_CASE("kernel-depends entries: a version or a revision, as the kernels library writes them") {
    const VariantMetadata got =
        parse({{"name", "k"},
               {"license", "MIT"},
               {"kernel-depends",
                {{{"repo-id", "org/a"}, {"version", 2}},
                 {{"repo-id", "org/b"}, {"revision", "0123456789abcdef0123456789abcdef01234567"}}}},
               {"kernels-minver", "0.17.0"}});
    REQUIRE(got.depends.size() == 2);
    CHECK(got.depends[0].label() == "org/a@v2");
    CHECK(got.depends[0].ref() == "v2");
    CHECK(got.depends[1].label() == "org/b@0123456789abcdef0123456789abcdef01234567");
    CHECK(got.kernels_minver == "0.17.0");
    const VariantMetadata none = parse({{"name", "k"}, {"kernels-minver", nullptr}});
    CHECK(none.depends.empty());
    CHECK_FALSE(none.kernels_minver);
}

TEST_CASE("malformed kernel-depends and kernels-minver are refused naming the variant, the entry and the field") {
    struct Case {
        json doc;
        std::string expected;
    };
    const std::vector<Case> cases = {
        {{{"kernel-depends", json::object()}}, "\"kernel-depends\" is not a list"},
        {{{"kernel-depends", nullptr}}, "\"kernel-depends\" is not a list"},
        {{{"kernel-depends", {{{"repo-id", "org/a"}}}}}, "exactly one of \"version\" and \"revision\""},
        {{{"kernel-depends", {{{"repo-id", "org/a"}, {"version", 1}, {"revision", "main"}}}}},
         "exactly one of \"version\" and \"revision\""},
        {{{"kernel-depends", {{{"repo-id", "org/a"}, {"version", 1}, {"extra", 1}}}}}, "unknown key \"extra\""},
        {{{"kernel-depends", {{{"repo-id", "orga"}, {"version", 1}}}}}, "not ORG/NAME"},
        {{{"kernel-depends", {{{"repo-id", "org/../x"}, {"version", 1}}}}}, "not ORG/NAME"},
        {{{"kernel-depends", {{{"repo-id", "org/a"}, {"version", -1}}}}}, "not a whole number"},
        {{{"kernel-depends", {{{"repo-id", "org/a"}, {"version", "1"}}}}}, "not a whole number"},
        {{{"kernel-depends", {{{"repo-id", "org/a"}, {"revision", "../../x"}}}}}, "unusable revision"},
        {{{"kernel-depends", {{{"repo-id", "org/a"}, {"version", 1}}, {{"repo-id", "org/a"}, {"version", 2}}}}},
         "names org/a twice"},
        {{{"kernel-depends", {"org/a"}}}, "entry 1 is not an object"},
        {{{"kernels-minver", "0.17"}}, "\"kernels-minver\" is not a version of three numbers"},
        {{{"kernels-minver", "0.17.x"}}, "\"kernels-minver\""},
        {{{"kernels-minver", 17}}, "\"kernels-minver\""},
    };
    for (const Case& c : cases) {
        INFO(c.doc.dump());
        const std::string message = refusal(c.doc);
        CHECK(message.find("org/k variant v") != std::string::npos);
        CHECK(message.find(c.expected) != std::string::npos);
    }
    json many = json::array();
    for (std::size_t i = 0; i <= k_max_kernel_depends; ++i)
        many.push_back({{"repo-id", "org/k" + std::to_string(i)}, {"version", 1}});
    CHECK(refusal({{"kernel-depends", many}}).find("k_max_kernel_depends") != std::string::npos);
    CHECK(refusal(json("not an object")).find("not a JSON object") != std::string::npos);
    const std::string huge = "{\"pad\": \"" + std::string(k_max_metadata_bytes, 'x') + "\"}";
    CHECK_THROWS_WITH(parse_variant_metadata(huge, "org/k variant v"), Catch::Contains("k_max_metadata_bytes"));
}

TEST_CASE("versions compare by number, trailing zeros equal, and kernels-minver is checked against the release") {
    CHECK(compare_versions("0.17", "0.17.0") == 0);
    CHECK(compare_versions("0.17.2", "0.18.0") == -1);
    CHECK(compare_versions("1.0.10", "1.0.9") == 1);
    CHECK(compare_versions("0.17.2", "0.17.2.1") == -1);
    CHECK_FALSE(compare_versions("0.17.x", "0.17.0"));
    CHECK_FALSE(compare_versions("", "1"));
    CHECK(std::string(kernels_release()) == k_kernels_release);

    VariantMetadata metadata;
    CHECK(minver_problem(metadata).empty());
    metadata.kernels_minver = k_kernels_release;
    CHECK(minver_problem(metadata).empty());
    metadata.kernels_minver = "0.1.0";
    CHECK(minver_problem(metadata).empty());
    metadata.kernels_minver = "0.19.2";
    const std::string problem = minver_problem(metadata);
    CHECK(problem.find("kernels>=0.19.2") != std::string::npos);
    CHECK(problem.find(std::string("kernels ") + k_kernels_release) != std::string::npos);
}

TEST_CASE("the device arch check is made of cuda and rocm builds with archs only, as kernels 0.19.1 reads backend") {
    // kernels 0.19.1's reader (kernels._rust.Metadata) keeps archs for
    // cuda and rocm alone; every other type reads as archs None, and
    // _check_arch_incompatibility returns before reading the type.
    auto check_of = [](const json& backend) {
        json doc = json::object();
        if (!backend.is_null()) doc["backend"] = backend;
        return arch_check(parse(doc));
    };
    const json archs = json::array({"1.0a"});
    CHECK(check_of({{"type", "cuda"}, {"archs", archs}}) == ArchCheck::cuda);
    CHECK(check_of({{"type", "rocm"}, {"archs", {"gfx90a"}}}) == ArchCheck::rocm);
    for (const char* type : {"cpu", "xpu", "metal", "cann", "neuron", "tpu", "agnostic", "foo", "CUDA", "Cuda", ""}) {
        INFO(type);
        CHECK(check_of({{"type", type}, {"archs", archs}}) == ArchCheck::none);
    }
    CHECK(check_of({{"archs", archs}}) == ArchCheck::none);  // no type
    CHECK(check_of({{"type", "cuda"}, {"archs", json::array()}}) == ArchCheck::none);
    CHECK(check_of({{"type", "cuda"}, {"archs", nullptr}}) == ArchCheck::none);
    CHECK(check_of({{"type", "cuda"}}) == ArchCheck::none);
    CHECK(check_of(nullptr) == ArchCheck::none);  // no backend
    // The archs are kept as written whatever the type, for what shows them.
    CHECK(parse({{"backend", {{"type", "foo"}, {"archs", archs}}}}).backend_archs == std::vector<std::string>{"1.0a"});
}

TEST_CASE("the walk gives every kernel once, after what it depends on, and expands each once") {
    // top -> a, b; a -> c, b; b -> c.
    std::map<std::string, std::vector<KernelDependency>> graph = {
        {"org/a@v1", {dep("org/c"), dep("org/b")}}, {"org/b@v1", {dep("org/c")}}, {"org/c@v1", {}}};
    std::map<std::string, int> expanded;
    const std::vector<KernelDependency> order =
        walk(dep("org/top"), {dep("org/a"), dep("org/b")}, [&](const KernelDependency& node) {
            ++expanded[node.label()];
            return graph.at(node.label());
        });
    std::vector<std::string> labels;
    for (const auto& node : order) labels.push_back(node.label());
    CHECK(labels == std::vector<std::string>{"org/c@v1", "org/b@v1", "org/a@v1"});
    for (const auto& [label, count] : expanded) {
        INFO(label);
        CHECK(count == 1);
    }
    // Two versions of one repo are two kernels.
    const auto two = walk(dep("org/top"), {dep("org/x", 1), dep("org/x", 2)},
                          [](const KernelDependency&) { return std::vector<KernelDependency>{}; });
    CHECK(two.size() == 2);
}

TEST_CASE("the walk refuses a cycle, a deep chain and a tree too large, naming the chain and the limit") {
    auto chain_of = [](const KernelDependency& node) {
        // org/nN -> org/n(N+1), without end.
        const int n = std::stoi(node.repo_id.substr(node.repo_id.find('n', 4) + 1));
        return std::vector<KernelDependency>{dep("org/n" + std::to_string(n + 1))};
    };
    CHECK_THROWS_WITH(walk(dep("org/n0"), {dep("org/n1")}, chain_of),
                      Catch::Contains("k_max_dependency_depth (16)") && Catch::Contains("org/n0@v1 -> org/n1@v1"));
    try {
        (void)walk(dep("org/top"), {dep("org/a")}, [](const KernelDependency& node) {
            return node.repo_id == "org/a" ? std::vector<KernelDependency>{dep("org/b")}
                                           : std::vector<KernelDependency>{dep("org/a")};
        });
        FAIL("a cycle was walked");
    } catch (const Error& e) {
        CHECK(e.code() == ErrorCode::verification);
        CHECK(std::string(e.what()).find("cycle: org/top@v1 -> org/a@v1 -> org/b@v1 -> org/a@v1") != std::string::npos);
    }
    // A kernel depending on the top one is a cycle too.
    CHECK_THROWS_WITH(
        walk(dep("org/top"), {dep("org/top")}, [](const KernelDependency&) { return std::vector<KernelDependency>{}; }),
        Catch::Contains("org/top@v1 -> org/top@v1"));
    std::vector<KernelDependency> wide;
    for (std::size_t i = 0; i <= k_max_dependency_kernels; ++i) wide.push_back(dep("org/w" + std::to_string(i)));
    CHECK_THROWS_WITH(
        walk(dep("org/top"), wide, [](const KernelDependency&) { return std::vector<KernelDependency>{}; }),
        Catch::Contains("k_max_dependency_kernels (256)"));
}

namespace {

// deplib/leaf, deplib/mid (needs leaf) and deplib/top (needs mid and leaf),
// each a real .so of tests/fixtures/dep_chain.c, in a file:// hub; the
// Options of a Client on it. `extra`: more metadata.json fields by name
// ("top").
Options dep_chain_hub(const test::TempDir& dir, const std::map<std::string, json>& extra = {}) {
    const std::string cpu = "build/" + test::host_cpu_variant() + "/";
    auto so = [](const std::string& name) {
        return json{{"path", (std::filesystem::path(KERNHUB_FIXTURE_DIR) / ("libkh_dep_" + name + ".so")).string()}};
    };
    auto repo = [&](const std::string& name, const json& depends) {
        json commit = {{"message", "v1"},
                       {"branches", {"main", "v1"}},
                       {"metadata", true},
                       {"files", {{cpu + "libkh_dep_" + name + ".so", so(name)}}}};
        json fields = json::object();
        if (!depends.empty()) fields["kernel-depends"] = depends;
        if (auto it = extra.find(name); it != extra.end()) fields.update(it->second);
        if (!fields.empty()) commit["metadata_extra"] = fields;
        return json{{"repo_id", "deplib/" + name}, {"type", "kernel"}, {"commits", {commit}}};
    };
    const json leaf = {{"repo-id", "deplib/leaf"}, {"version", 1}};
    const json mid = {{"repo-id", "deplib/mid"}, {"version", 1}};
    test::make_hub(
        {{"repos",
          {repo("leaf", json::array()), repo("mid", json::array({leaf})), repo("top", json::array({mid, leaf}))}}},
        dir.path() / "hub");
    return test::file_hub_options(dir.path());
}

// Whether this process maps a file under `folder` (/proc/self/maps names
// each mapped file by its real path): a library of the cache was opened.
bool maps_under(const std::filesystem::path& folder) {
    const std::string prefix = std::filesystem::weakly_canonical(folder).string() + "/";
    std::ifstream maps("/proc/self/maps");
    for (std::string line; std::getline(maps, line);) {
        if (line.find(prefix) != std::string::npos) return true;
    }
    return false;
}

// The Error(load) that loading deplib/top throws; its message.
std::string load_refusal(const Options& options) {
    Client client(options);
    try {
        (void)client.load("deplib/top@v1", "kh_dep_top");
    } catch (const Error& e) {
        CHECK(e.code() == ErrorCode::load);
        return e.what();
    }
    FAIL("deplib/top loaded");
    return {};
}

}  // namespace

TEST_CASE("a kernel whose build layout a load refuses opens none of its dependencies") {
    test::TempDir dir;
    const Options options = dep_chain_hub(dir, {{"top", {{"build-layout", "tar"}}}});
    const std::string message = load_refusal(options);
    CHECK(message.find("deplib/top") != std::string::npos);
    CHECK(message.find("build layout 'tar'") != std::string::npos);
    CHECK(message.find(k_kernels_release) != std::string::npos);
    CHECK_FALSE(maps_under(dir.path() / "cache"));
    // The control: a load that opens a library of the cache shows in the maps.
    Client client(options);
    (void)client.load("deplib/leaf@v1", "kh_dep_leaf");
    CHECK(maps_under(dir.path() / "cache"));
}

TEST_CASE("a dependency whose build layout a load refuses refuses the whole load before any library opens") {
    // leaf is opened before mid: refused at mid, leaf would already be in
    // the process had the check come as each is opened.
    test::TempDir dir;
    const Options options = dep_chain_hub(dir, {{"mid", {{"build-layout", "tar"}}}});
    const std::string message = load_refusal(options);
    CHECK(message.find("deplib/mid") != std::string::npos);
    CHECK(message.find("build layout 'tar'") != std::string::npos);
    CHECK_FALSE(maps_under(dir.path() / "cache"));
}

TEST_CASE("dependencies of an unknown backend type, archs or not, load: kernels 0.19.1 checks no arch of theirs") {
    // "foo" and "CUDA" (types are case-sensitive) read as no archs there.
    test::TempDir dir;
    const json foreign = {{"backend", {{"type", "foo"}, {"archs", {"1.0a"}}}}};
    Options options =
        dep_chain_hub(dir, {{"leaf", foreign}, {"mid", {{"backend", {{"type", "CUDA"}, {"archs", {"1.0a"}}}}}}});
    Client client(options);
    const LoadResult loaded = client.load("deplib/top@v1", "kh_dep_top");
    CHECK(loaded.dependency_files.size() == 2);
    CHECK(KernelFn<int()>::from(loaded)() == 770);
}

TEST_CASE("Client::load opens the dependencies first, and the kernel then calls into both of them") {
    test::TempDir dir;
    const Options options = dep_chain_hub(dir);
    Client client(options);
    const LoadResult loaded = client.load("deplib/top@v1", "kh_dep_top");
    REQUIRE(loaded.fetch.dependencies.size() == 2);
    CHECK(loaded.fetch.dependencies[0].repo_id == "deplib/leaf");
    CHECK(loaded.fetch.dependencies[1].repo_id == "deplib/mid");
    CHECK(loaded.dependency_files.size() == 2);
    const KernelFn<int()> top = KernelFn<int()>::from(loaded);
    // 100 x leaf (7) + mid (10 x leaf).
    CHECK(top() == 770);
}

TEST_CASE("with verify_on_load, a library loaded before on its own serves a later kernel as a dependency") {
    // Its sealed copy was opened RTLD_LOCAL; the dependency's load makes
    // its symbols global, or mid's own load finds no kh_dep_leaf.
    test::TempDir dir;
    Options options = dep_chain_hub(dir);
    options.verify_on_load = true;
    Client client(options);
    const LoadResult leaf = client.load("deplib/leaf@v1", "kh_dep_leaf");
    CHECK(KernelFn<int()>::from(leaf)() == 7);
    const LoadResult mid = client.load("deplib/mid@v1", "kh_dep_mid");
    CHECK(KernelFn<int()>::from(mid)() == 70);
}
