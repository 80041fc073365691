// CUDA fatbins and cubins as `kernhub inspect` and variant checks read
// them: format detection, both parsers, and entry selection over whatever
// parsed (selection must stay inside the parsed entries).
#include "fatbin/fatbin.hpp"
#include "fuzz_target.hpp"

namespace fb = kernhub::fatbin;

static void select_everywhere(const fb::Fatbin& parsed) {
    for (int major : {5, 7, 8, 9, 10, 12})
        for (int minor : {0, 3, 9}) (void)fb::select_entry(parsed, major, minor);
    (void)fb::describe_archs(parsed);
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    (void)fb::detect_format(data, size);
    fuzz::expect_error_or_success([&] { select_everywhere(fb::parse_fatbin(data, size, "fuzz.fatbin")); });
    fuzz::expect_error_or_success([&] { select_everywhere(fb::parse_cubin(data, size, "fuzz.cubin")); });
    return 0;
}
