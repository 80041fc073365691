// kernhub fetch and the Python kernels library's verification receipts
// (docs/cache-format.md, "Other tools' data"): a fetch that changes no file
// of a variant keeps kernels' receipt of it; one that links a missing file
// or replaces a damaged blob removes it first, so kernels hashes the
// variant again instead of trusting files it did not check.
#include "cacheadmin/cache_fixture.hpp"
#include "cli/cli_support.hpp"

using namespace kernhub::test;
using namespace kernhub::test::cli;
using kernhub::test::cacheadmin::all_exist;
using kernhub::test::cacheadmin::flip_first_byte;
using kernhub::test::cacheadmin::none_exist;
using kernhub::test::cacheadmin::write_receipts;

namespace {

const std::string k_repo = "kernhub-test/vector-add";

struct Fetched {
    std::string commit;
    std::string variant;
    fs::path dir;
};

Fetched fetch(const Sandbox& box, const std::string& endpoint) {
    ProcessResult r = box.kh("fetch", "vector-add", endpoint, {"--json"});
    INFO(describe(r));
    REQUIRE(r.exit_code == 0);
    const json out = parse_stdout(r);
    const fs::path dir = out["path"].get<std::string>();
    return Fetched{out["commit"].get<std::string>(), dir.filename().string(), dir};
}

// A file of the variant's folder that is a link, and the blob behind it.
std::pair<fs::path, fs::path> some_link(const fs::path& variant_dir) {
    for (const auto& entry : fs::recursive_directory_iterator(variant_dir)) {
        if (!entry.is_symlink()) continue;
        return {entry.path(), (entry.path().parent_path() / fs::read_symlink(entry.path())).lexically_normal()};
    }
    FAIL("no link in " << variant_dir);
    return {};
}

}  // namespace

TEST_CASE("fetch keeps kernels' receipts of a variant it does not change and removes them when it does",
          "[cli][cache]") {
    KernelHub hub;
    Sandbox box;
    const std::string ep = hub.server().endpoint();
    const Fetched first = fetch(box, ep);
    const auto receipts = write_receipts(box.cache, k_repo, first.commit, first.variant);
    const auto other = write_receipts(box.cache, k_repo, first.commit, "another-variant");
    const fs::path folder = box.cache / "kernels--kernhub-test--vector-add";

    SECTION("a warm fetch, or one that hashes every file and finds them all in place, keeps them") {
        fetch(box, ep);
        CHECK(all_exist(receipts));
        fs::remove_all(folder / ".kernhub" / "variants");
        fetch(box, ep);
        CHECK(all_exist(receipts));
    }
    SECTION("a fetch that links a missing file removes them") {
        const auto [link, blob] = some_link(first.dir);
        fs::remove(link);
        fetch(box, ep);
        CHECK(fs::is_symlink(link));
        CHECK(none_exist(receipts));
    }
    SECTION("a fetch that replaces a damaged blob removes them") {
        const auto [link, blob] = some_link(first.dir);
        flip_first_byte(blob);
        fs::remove_all(folder / ".kernhub" / "variants");  // else the record vouches for the blob
        fetch(box, ep);
        CHECK(none_exist(receipts));
    }
    CHECK(all_exist(other));
}
