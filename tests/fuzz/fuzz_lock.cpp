// Lock files: kernhub.lock and both kernels.lock formats, detected by shape.
// A kernhub.lock that parses must be written back and parse to the same
// kernels, as `kernhub lock --check` relies on.
#include <cstdlib>

#include "fuzz_target.hpp"
#include "lockfile/lockfile.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string text = fuzz::as_text(data, size);
    fuzz::expect_error_or_success([&] {
        kernhub::lockfile::AnyLock parsed = kernhub::lockfile::parse_lock(text, "fuzz.lock");
        if (parsed.format != kernhub::lockfile::Format::kernhub_lock) return;
        const std::string written = kernhub::lockfile::write_kernhub_lock(parsed.kernhub);
        kernhub::lockfile::AnyLock again = kernhub::lockfile::parse_lock(written, "rewritten");
        if (again.kernhub.kernels.size() != parsed.kernhub.kernels.size()) std::abort();
    });
    return 0;
}
