// A variant's metadata.json: the per-file digests that check the files
// downloaded after it.
#include "fetch/stream_check.hpp"
#include "fuzz_target.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string text = fuzz::as_text(data, size);
    fuzz::expect_error_or_success([&] { (void)kernhub::fetch::parse_metadata_digest(text, "fuzz-variant"); });
    return 0;
}
