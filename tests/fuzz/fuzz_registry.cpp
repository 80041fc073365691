// Registry documents (kernhub.json, KERNHUB_REGISTRY, --registry): the
// linear parse with duplicate-key checks and every entry's validation.
#include "fuzz_target.hpp"
#include "registry/parse.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string text = fuzz::as_text(data, size);
    fuzz::expect_error_or_success([&] { kernhub::registry::detail::parse_document(text, "fuzz.json"); });
    return 0;
}
