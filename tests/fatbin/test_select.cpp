// Which entry a GPU of compute capability major.minor runs: a table over the
// nvcc fixtures and over hand-built entry lists.
#include <catch2/catch.hpp>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "fatbin/fatbin.hpp"
#include "fatbin_builder.hpp"

using namespace kernhub::fatbin;
using namespace fatbin_test;

namespace {

struct Row {
    std::string fatbin;  // fixture file name or key of the hand-built map
    int major;
    int minor;
    std::string expected;  // arch_name, or "none"
};

std::string chosen(const Fatbin& fatbin, int major, int minor) {
    const std::optional<Entry> entry = select_entry(fatbin, major, minor);
    return entry ? entry->arch_name() : "none";
}

void check_rows(const std::map<std::string, Fatbin>& fatbins, const std::vector<Row>& rows) {
    for (const Row& row : rows) {
        INFO(row.fatbin << " on " << row.major << "." << row.minor);
        CHECK(chosen(fatbins.at(row.fatbin), row.major, row.minor) == row.expected);
    }
}

}  // namespace

TEST_CASE("select_entry over the nvcc fixtures", "[fatbin][needs:nvcc]") {
    std::map<std::string, Fatbin> fatbins;
    for (const char* name :
         {"multi.fatbin", "compressed.fatbin", "ptx_only.fatbin", "sm100.fatbin", "two_containers.fatbin"}) {
        fatbins[name] = parse(read_fixture(name));
    }
    // multi / compressed: sm_80, sm_90a, compute_90. sm100: sm_100, sm_100a,
    // sm_103f, compute_100f. two_containers: compute_80 + multi.
    check_rows(fatbins, {
                            {"multi.fatbin", 7, 5, "none"},
                            {"multi.fatbin", 8, 0, "sm_80"},
                            {"multi.fatbin", 8, 6, "sm_80"},
                            {"multi.fatbin", 8, 9, "sm_80"},
                            {"multi.fatbin", 9, 0, "sm_90a"},
                            {"multi.fatbin", 9, 1, "compute_90"},
                            {"multi.fatbin", 10, 0, "compute_90"},
                            {"multi.fatbin", 10, 3, "compute_90"},
                            {"multi.fatbin", 12, 0, "compute_90"},
                            {"compressed.fatbin", 9, 0, "sm_90a"},
                            {"compressed.fatbin", 12, 1, "compute_90"},
                            {"ptx_only.fatbin", 7, 5, "none"},
                            {"ptx_only.fatbin", 8, 0, "compute_80"},
                            {"ptx_only.fatbin", 8, 6, "compute_80"},
                            {"ptx_only.fatbin", 12, 1, "compute_80"},
                            {"sm100.fatbin", 9, 0, "none"},
                            {"sm100.fatbin", 10, 0, "sm_100a"},
                            {"sm100.fatbin", 10, 1, "sm_100"},
                            {"sm100.fatbin", 10, 3, "sm_103f"},
                            {"sm100.fatbin", 11, 0, "none"},
                            {"sm100.fatbin", 12, 0, "none"},
                            {"two_containers.fatbin", 7, 5, "none"},
                            {"two_containers.fatbin", 8, 6, "sm_80"},
                            {"two_containers.fatbin", 9, 0, "sm_90a"},
                            {"two_containers.fatbin", 10, 0, "compute_90"},
                        });
}

TEST_CASE("select_entry over hand-built entry lists", "[fatbin]") {
    const std::map<std::string, Fatbin> fatbins = {
        {"empty", fatbin_of({})},
        {"ampere", fatbin_of({"sm_80", "sm_86"})},
        {"hopper_a", fatbin_of({"sm_90a"})},
        {"sass_vs_ptx", fatbin_of({"sm_80", "compute_86"})},
        {"f_vs_plain", fatbin_of({"sm_100", "sm_100f"})},
        {"ptx_variants", fatbin_of({"compute_90", "compute_100a", "compute_100f"})},
        {"ptx_a", fatbin_of({"compute_100a"})},
        {"ptx_f", fatbin_of({"compute_100f"})},
        {"blackwell", fatbin_of({"sm_120", "sm_121a", "compute_120"})},
        {"ada", fatbin_of({"sm_89", "compute_90"})},
        {"turing", fatbin_of({"compute_75"})},
    };
    check_rows(fatbins, {
                            {"empty", 9, 0, "none"},
                            {"ampere", 8, 0, "sm_80"},
                            {"ampere", 8, 6, "sm_86"},
                            {"ampere", 8, 9, "sm_86"},
                            {"ampere", 9, 0, "none"},
                            {"hopper_a", 9, 0, "sm_90a"},
                            {"hopper_a", 10, 0, "none"},
                            // SASS wins over a closer PTX.
                            {"sass_vs_ptx", 8, 6, "sm_80"},
                            {"sass_vs_ptx", 9, 0, "compute_86"},
                            {"f_vs_plain", 10, 0, "sm_100f"},
                            {"f_vs_plain", 10, 3, "sm_100f"},
                            {"f_vs_plain", 12, 0, "none"},
                            {"ptx_variants", 9, 0, "compute_90"},
                            {"ptx_variants", 10, 0, "compute_100a"},
                            {"ptx_variants", 10, 3, "compute_100f"},
                            {"ptx_variants", 12, 0, "compute_90"},
                            {"ptx_a", 10, 0, "compute_100a"},
                            {"ptx_a", 10, 3, "none"},
                            {"ptx_f", 10, 3, "compute_100f"},
                            {"ptx_f", 9, 0, "none"},
                            {"ptx_f", 12, 0, "none"},
                            {"blackwell", 12, 0, "sm_120"},
                            {"blackwell", 12, 1, "sm_121a"},
                            {"blackwell", 12, 2, "sm_120"},
                            {"blackwell", 13, 0, "compute_120"},
                            {"ada", 8, 9, "sm_89"},
                            {"ada", 8, 6, "none"},
                            {"ada", 9, 0, "compute_90"},
                            {"turing", 7, 0, "none"},
                            {"turing", 7, 5, "compute_75"},
                        });
}

TEST_CASE("select_entry keeps the first of equal entries", "[fatbin]") {
    Fatbin fatbin;
    fatbin.containers = 2;
    fatbin.entries = {entry_named("sm_90", 0), entry_named("sm_90", 1)};
    const std::optional<Entry> entry = select_entry(fatbin, 9, 0);
    REQUIRE(entry);
    CHECK(entry->container == 0);
}

TEST_CASE("arch names, compute capabilities and descriptions", "[fatbin]") {
    CHECK(entry_named("sm_90a").arch_name() == "sm_90a");
    CHECK(entry_named("compute_100f").arch_name() == "compute_100f");
    const Entry blackwell = entry_named("sm_121");
    CHECK(blackwell.cc_major() == 12);
    CHECK(blackwell.cc_minor() == 1);
    CHECK(entry_named("sm_100").cc_major() == 10);
    CHECK(entry_named("sm_100").cc_minor() == 0);
    CHECK(entry_named("compute_75").cc_major() == 7);
    CHECK(describe_archs(fatbin_of({})) == "none");
    CHECK(describe_archs(fatbin_of({"sm_80", "sm_90a", "compute_90", "sm_80"})) == "sm_80, sm_90a, compute_90");
}
