// loader::files_to_read: the files a load reads, chosen over the whole
// listing as the kinds choose over a fetched variant (docs/cache-format.md,
// "Partial variants").
#include <catch2/catch.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "loader/kind.hpp"

using kernhub::loader::files_to_read;
using Files = std::set<std::string>;

namespace {

std::optional<Files> read(const std::string& variant, const std::vector<std::string>& files,
                          const std::string& file = {}, bool dependency = false) {
    return files_to_read("org/repo", variant, files, file, dependency);
}

}  // namespace

TEST_CASE("a kernel-builder torch variant loads its op library, _ops.py and metadata.json", "[loader][partial]") {
    const std::string variant = "torch28-cxx11-cu128-x86_64-linux";
    const std::vector<std::string> files = {"metadata.json",    "kh_ops/__init__.py",          "kh_ops/_ops.py",
                                            "kh_ops/layers.py", "kh_ops/_kh_ops_3f2a.abi3.so", "README.md"};
    CHECK(read(variant, files) == Files{"metadata.json", "kh_ops/_ops.py", "kh_ops/_kh_ops_3f2a.abi3.so"});
}

TEST_CASE("in the zip layout a torch op library comes with the variant's top-level zip", "[loader][partial]") {
    const std::string variant = "torch28-cxx11-cpu-x86_64-linux";
    CHECK(read(variant, {"metadata.json", "_kh_ops_3f2a.abi3.so", "kh_ops.zip", "extra/notes.zip", "layers.py"}) ==
          Files{"metadata.json", "_kh_ops_3f2a.abi3.so", "kh_ops.zip"});
}

TEST_CASE("native, CUDA and tvm-ffi variants load one artifact and metadata.json", "[loader][partial]") {
    CHECK(read("native-cpu-x86_64-linux", {"metadata.json", "libvector_add.so", "NOTES.txt"}) ==
          Files{"metadata.json", "libvector_add.so"});
    CHECK(read("native-cuda", {"metadata.json", "vector_add.fatbin", "include/vector_add.h"}) ==
          Files{"metadata.json", "vector_add.fatbin"});
    CHECK(read("tvm-ffi01-cpu-x86_64-linux", {"metadata.json", "__init__.py", "_kh_tvm_ops.so"}) ==
          Files{"metadata.json", "_kh_tvm_ops.so"});
    // No metadata.json listed: none asked for.
    CHECK(read("native-cpu-x86_64-linux", {"libvector_add.so", "NOTES.txt"}) == Files{"libvector_add.so"});
    // A shared object beside the artifact may be its DT_NEEDED through $ORIGIN.
    CHECK(read("native-cpu-x86_64-linux", {"libmain.so", "libhelper.so.1", "sub/libother.so", "NOTES.txt"},
               "libmain.so") == Files{"libmain.so", "libhelper.so.1"});
}

TEST_CASE("a choice that fails, or a kernel with nothing to load, takes the whole variant", "[loader][partial]") {
    // Several loadable files: the load's own error, after the whole fetch, as before.
    CHECK_FALSE(read("native-cpu-x86_64-linux", {"metadata.json", "liba.so", "libb.so"}).has_value());
    // A registry "file" the variant lacks.
    CHECK_FALSE(read("native-cpu-x86_64-linux", {"metadata.json", "liba.so"}, "libmissing.so").has_value());
    // Nothing to load: the kernel's refusal stays the load's.
    CHECK_FALSE(read("torch-universal", {"metadata.json", "kh/__init__.py"}).has_value());
    // A dependency with nothing to open needs only its metadata.json.
    CHECK(read("torch-universal", {"metadata.json", "kh/__init__.py"}, {}, true) == Files{"metadata.json"});
}
