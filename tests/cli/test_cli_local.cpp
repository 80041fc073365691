// LOCAL_KERNELS (the Python kernels library's local overrides) through the
// CLI: the three folder layouts kernels accepts, no request (the endpoint is
// a dead port) and no cache write, `info` naming the override, kernels'
// syntax and its errors, and the checks that still apply (selection, the
// ELF check, kernels-minver) or do not (the organisation allow-list).
#include "cli_support.hpp"

using namespace kernhub::test;
using namespace kernhub::test::cli;

namespace {

fs::path dep_fixture(const std::string& name) {
    return fs::path(KERNHUB_FIXTURE_DIR) / ("libkh_dep_" + name + ".so");
}

// FOLDER/build/<host variant>/ holding a copy of `so` and a metadata.json
// with `metadata` in it; returns FOLDER.
fs::path local_build(const fs::path& folder, const fs::path& so, const json& metadata = json::object()) {
    const fs::path variant = folder / "build" / host_cpu_variant();
    fs::create_directories(variant);
    fs::copy_file(so, variant / so.filename());
    json doc = {{"name", folder.filename().string()}, {"license", "MIT"}};
    doc.update(metadata);
    write_text(variant / "metadata.json", doc.dump());
    return folder;
}

struct Local {
    Sandbox box;
    fs::path dir = box.dir.path();
    ProcessResult run(const std::string& command, const std::string& ref, const std::string& local_kernels,
                      std::vector<std::string> more = {}, EnvChanges extra = {}) const {
        std::vector<std::string> args{command, ref, "--endpoint", k_dead_endpoint, "--cache-dir", box.cache.string()};
        args.insert(args.end(), more.begin(), more.end());
        extra["LOCAL_KERNELS"] = local_kernels;
        return box.run(args, extra);
    }
};

}  // namespace

TEST_CASE(
    "LOCAL_KERNELS loads a repo from a repo folder, its build/ folder or a variant folder, with no request "
    "and no cache write") {
    Local t;
    const fs::path repo = local_build(t.dir / "good", good_fixture_so());
    const fs::path variant = repo / "build" / host_cpu_variant();
    for (const fs::path& folder : {repo, repo / "build", variant}) {
        INFO(folder);
        ProcessResult r = t.run("load", "localtest/good", "localtest/good=" + folder.string(),
                                {"--symbol", "kh_fixture_id", "--json"});
        json out = parse_stdout(r);
        CHECK(r.exit_code == 0);
        CHECK(out["local_folder"] == folder.string());
        CHECK(out["variant"] == host_cpu_variant());
        CHECK(out["path"] == variant.string());
        CHECK(out["requests"] == 0);
        CHECK(out["commit"] == "");
        CHECK(out["kind"] == "function");
    }
    CHECK_FALSE(fs::exists(t.box.cache));

    // An empty PATH is the working directory, as Path("") is for kernels.
    local_build(t.dir, good_fixture_so());
    json here = parse_stdout(t.run("fetch", "localtest/good", "localtest/good=", {"--json"}));
    CHECK(here["local_folder"] == t.dir.lexically_normal().string());
    CHECK(here["variant"] == host_cpu_variant());

    // A relative folder is taken from the working directory, as kernels does.
    ProcessResult relative = t.run("fetch", "localtest/good", "localtest/good=good", {"--json"});
    json out = parse_stdout(relative);
    CHECK(relative.exit_code == 0);
    CHECK(out["local_folder"] == repo.string());

    // info says where the kernel comes from, and which variant it picked.
    ProcessResult info = t.run("info", "localtest/good", "other/x=/nowhere:localtest/good=" + repo.string());
    INFO(describe(info));
    CHECK(info.exit_code == 0);
    CHECK(info.out.find("local: " + repo.string() + "  (LOCAL_KERNELS") != std::string::npos);
    CHECK(info.out.find("* " + host_cpu_variant() + "  (selected)") != std::string::npos);
    json info_json = parse_stdout(t.run("info", "localtest/good", "localtest/good=" + repo.string(), {"--json"}));
    CHECK(info_json["local_folder"] == repo.string());
    CHECK(info_json["requests"] == 0);
    CHECK_FALSE(fs::exists(t.box.cache));
}

TEST_CASE("LOCAL_KERNELS with kernels' syntax: an entry without '=' is exit 2 saying a path cannot hold ':'") {
    Local t;
    check_error(t.run("fetch", "localtest/good", "localtest/good", {"--quiet"}), 2,
                {"LOCAL_KERNELS entry 'localtest/good' has no '='", "cannot hold ':'"});
    // What a folder with ':' in its name turns into.
    check_error(t.run("fetch", "localtest/good", "localtest/good=/tmp/a:b", {"--quiet"}), 2,
                {"LOCAL_KERNELS entry 'b'", "cannot hold ':'"});
    // A repo the variable does not name goes to the hub as always (here a dead one).
    ProcessResult other = t.run("fetch", "localtest/other", "localtest/good=/nowhere", {"--quiet"});
    CHECK(other.exit_code == 5);
}

TEST_CASE("a local kernel still gets selection, the ELF check, kernels-minver and the organisation allow-list") {
    Local t;
    // No variant for this host: exit 3 naming the folder and the rejection.
    const fs::path cuda_only = t.dir / "cuda-only" / "build" / "native-cu128-x86_64-linux";
    fs::create_directories(cuda_only);
    write_text(cuda_only / "libkern.so", "not for this host");
    check_error(
        t.run("load", "localtest/k", "localtest/k=" + (t.dir / "cuda-only").string(), {"--symbol", "x", "--quiet"}), 3,
        {(t.dir / "cuda-only").string(), "native-cu128-x86_64-linux"});

    // Not an ELF shared object: the loader's check refuses it (exit 4).
    const fs::path fake = t.dir / "fake.so";
    write_text(fake, "this is text, not ELF");
    const fs::path not_elf = local_build(t.dir / "not-elf", fake);
    check_error(t.run("load", "localtest/k", "localtest/k=" + not_elf.string(), {"--symbol", "x", "--quiet"}), 4,
                {"fake.so"});

    // kernels-minver: exit 7 on this machine.
    const fs::path newer = local_build(t.dir / "newer", good_fixture_so(), {{"kernels-minver", "99.0.0"}});
    check_error(t.run("load", "localtest/k", "localtest/k=" + newer.string(), {"--symbol", "kh_fixture_id", "--quiet"}),
                7, {"kernels>=99.0.0", "0.19.1"});

    // The organisation allow-list is the program's policy, wherever the
    // kernel comes from; the trusted-publisher check is about a hub.
    const fs::path good = local_build(t.dir / "good", good_fixture_so());
    check_error(t.run("load", "localtest/k", "localtest/k=" + good.string(), {"--symbol", "kh_fixture_id", "--quiet"},
                      {{"KERNHUB_ALLOWED_ORGS", "someone-else"}}),
                4, {"localtest"});
    ProcessResult allowed = t.run("load", "localtest/k", "localtest/k=" + good.string(),
                                  {"--symbol", "kh_fixture_id", "--quiet"}, {{"KERNHUB_ALLOWED_ORGS", "localtest"}});
    INFO(describe(allowed));
    CHECK(allowed.exit_code == 0);
}

TEST_CASE("local kernels depending on local kernels load in order, with no request") {
    Local t;
    const json leaf_dep = {{"kernel-depends", {{{"repo-id", "localtest/leaf"}, {"version", 1}}}}};
    const fs::path leaf = local_build(t.dir / "leaf", dep_fixture("leaf"));
    const fs::path mid = local_build(t.dir / "mid", dep_fixture("mid"), leaf_dep);
    ProcessResult r =
        t.run("load", "localtest/mid", "localtest/mid=" + mid.string() + ":localtest/leaf=" + leaf.string(),
              {"--symbol", "kh_dep_mid", "--json"});
    json out = parse_stdout(r);
    CHECK(r.exit_code == 0);
    REQUIRE(out["dependencies"].size() == 1);
    CHECK(out["dependencies"][0]["repo_id"] == "localtest/leaf");
    CHECK(out["dependencies"][0]["path"] == (leaf / "build" / host_cpu_variant()).string());
    CHECK(out["dependency_files"] ==
          json::array({(leaf / "build" / host_cpu_variant() / "libkh_dep_leaf.so").string()}));
    CHECK_FALSE(fs::exists(t.box.cache));
}
