// Helpers shared by the ELF inspector tests: reading files, compiling small
// shared objects at test time, and the "parses or rejects cleanly" check the
// robustness sweeps apply to every damaged copy.
#pragma once

#include <catch2/catch.hpp>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "elf/elf_inspect.hpp"
#include "kernhub/error.hpp"
#include "support/build_paths.hpp"
#include "support/process.hpp"
#include "support/slurp.hpp"

namespace kernhub::test::elf {

namespace fs = std::filesystem;

inline const fs::path k_fixtures = KERNHUB_FIXTURE_DIR;
inline const fs::path k_good = k_fixtures / "libkh_good.so";
inline const fs::path k_undefined = k_fixtures / "libkh_undefined.so";
inline const fs::path k_vector_add = fs::path(KERNHUB_BINARY_DIR) / "examples" / "libvector_add.so";

inline std::vector<std::uint8_t> read_bytes(const fs::path& path) {
    return kernhub::test::slurp_bytes(path);
}

inline kernhub::elf::ElfFacts inspect_path(const fs::path& path) {
    const std::vector<std::uint8_t> bytes = read_bytes(path);
    return kernhub::elf::inspect_elf(bytes.data(), bytes.size(), path.string());
}

inline void write_text(const fs::path& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary);
    out << text;
    if (!out) throw std::runtime_error("cannot write " + path.string());
}

// Runs a compiler; false (with the compiler's output in the test log) when
// it fails. Callers REQUIRE it: a toolchain a test cannot do without is a
// requirement tag checked before the test starts (test_elf.cpp).
inline bool compile(const std::vector<std::string>& argv) {
    const ProcessResult result = run_process(argv);
    if (result.exit_code != 0) {
        std::string line;
        for (const std::string& arg : argv) line += arg + " ";
        WARN("compiler failed (" << result.exit_code << "): " << line << "\n" << result.err);
    }
    return result.exit_code == 0;
}

// A shared object that calls into libc, so it carries GLIBC_ version needs.
inline std::optional<fs::path> build_glibc_user(const fs::path& dir) {
    const fs::path source = dir / "needs_glibc.c";
    write_text(source,
               "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n"
               "__attribute__((visibility(\"default\"))) int kh_needs_glibc(char* out, const char* in, size_t n) {\n"
               "    memcpy(out, in, n);\n"
               "    return printf(\"%s\\n\", out) + (int)strtol(in, NULL, 10);\n"
               "}\n");
    const fs::path library = dir / "libkh_needs_glibc.so";
    if (!compile({"cc", "-O0", "-fPIC", "-shared", "-fvisibility=hidden", "-Wl,-soname,libkh_needs_glibc.so.1", "-o",
                  library.string(), source.string()})) {
        return std::nullopt;
    }
    return library;
}

// Returns true when the bytes parse, false when they are rejected with
// Error(verification). Anything else (another code, another exception type)
// fails the test; a crash or out-of-bounds read ends it (ASan makes the
// latter visible).
inline bool parses_or_rejects(const std::vector<std::uint8_t>& bytes, const std::string& source) {
    try {
        kernhub::elf::inspect_elf(bytes.data(), bytes.size(), source);
        return true;
    } catch (const kernhub::Error& error) {
        if (error.code() != kernhub::ErrorCode::verification) {
            FAIL_CHECK(source << ": wrong error code " << static_cast<int>(error.code()) << ": " << error.what());
        } else if (error.message().find(source) == std::string::npos) {
            FAIL_CHECK(source << ": message does not name the source: " << error.message());
        }
        return false;
    } catch (const std::exception& error) {
        FAIL_CHECK(source << ": unexpected exception: " << error.what());
        return false;
    }
}

}  // namespace kernhub::test::elf
