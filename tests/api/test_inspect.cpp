// parse_compute_capability and inspect_file through the public API.
#include <algorithm>
#include <catch2/catch.hpp>

#include "kernhub/inspect.hpp"
#include "support/kernel_hub.hpp"

using namespace kernhub;

TEST_CASE("compute capabilities are written 9.0, 10.3, sm_90 or 90", "[api]") {
    struct Row {
        const char* text;
        int major;
        int minor;
    };
    for (const Row& row : {Row{"9.0", 9, 0}, Row{"10.3", 10, 3}, Row{"sm_90", 9, 0}, Row{"90", 9, 0}, Row{"120", 12, 0},
                           Row{"sm_121", 12, 1}, Row{"8.6", 8, 6}}) {
        INFO(row.text);
        ComputeCapability cc = parse_compute_capability(row.text);
        CHECK(cc.major == row.major);
        CHECK(cc.minor == row.minor);
    }
    for (const char* bad : {"", "9", "9.", ".0", "9.10", "sm_", "sm_9a", "ninety", "9.0.1", "-9.0", "0.5"}) {
        INFO(bad);
        try {
            parse_compute_capability(bad);
            FAIL("accepted");
        } catch (const Error& e) {
            CHECK(e.code() == ErrorCode::usage);
        }
    }
}

TEST_CASE("inspect_file on the nvcc fixture selects per capability", "[api][needs:nvcc]") {
    auto fatbin = test::cuda_fixture_fatbin();
    InspectResult result = inspect_file(fatbin.string(), ComputeCapability{9, 0});
    CHECK(result.format == InspectResult::Format::fatbin);
    CHECK(std::string(to_string(result.format)) == "fatbin");
    CHECK_FALSE(result.elf);
    REQUIRE(result.fatbin);
    CHECK(result.fatbin->entries.size() == 3);
    REQUIRE(result.fatbin->selected);
    CHECK(result.fatbin->selected->arch == "sm_90a");
    CHECK(result.fatbin->selected->kind == BinaryEntry::Kind::sass);
    try {
        inspect_file(fatbin.string(), ComputeCapability{7, 0});
        FAIL("7.0 accepted");
    } catch (const Error& e) {
        CHECK(e.code() == ErrorCode::load);
    }
}

TEST_CASE("inspect_file of a shared object fills the ELF part only", "[api]") {
    InspectResult result = inspect_file(test::vector_add_so().string());
    CHECK(result.format == InspectResult::Format::elf);
    CHECK_FALSE(result.fatbin);
    REQUIRE(result.elf);
    CHECK(result.elf->elf_class == 64);
    CHECK(result.elf->type == "DYN");
    CHECK(std::find(result.elf->exported_functions.begin(), result.elf->exported_functions.end(), "kh_vector_add") !=
          result.elf->exported_functions.end());
}
