// A torch op library's listing and namespace, read from its bytes: each
// byte is scanned once however many section headers point at it, the lists
// are bounded and hold no duplicates, a cancel flag stops the scan, and the
// namespace an _ops.py claims must be one the bytes name. On the stripped
// kernel-builder-style library of the fuzz corpus (the unstripped fixtures
// are checked in the torch tests) and on copies of it made hostile here.
#include <atomic>
#include <catch2/catch.hpp>

#include "elf/elf_binding.hpp"
#include "kernhub/error.hpp"
#include "loader/torch_namespace.hpp"
#include "loader/torch_ops.hpp"
#include "support/build_paths.hpp"
#include "support/elf_craft.hpp"
#include "support/slurp.hpp"

using kernhub::Error;
using kernhub::ErrorCode;
using kernhub::loader::NamespaceClaim;
using kernhub::loader::read_ops_py;
using kernhub::loader::TorchOpListing;

namespace {

const std::string k_library = std::string(KERNHUB_SOURCE_DIR) + "/tests/fuzz/corpus/elf/torch_pydata_ops.so";
constexpr const char* k_ns = "_kh_torch_pydata_9e1b2c7";

TorchOpListing listing_of(const std::vector<std::uint8_t>& bytes, const std::atomic<bool>* cancel = nullptr) {
    return kernhub::loader::list_torch_ops(bytes.data(), bytes.size(), "lib.so", cancel);
}

Error error_of(const std::function<void()>& call) {
    try {
        call();
    } catch (const Error& e) {
        return e;
    }
    FAIL("no kernhub::Error was thrown");
    return Error(ErrorCode::ok, "");
}

kernhub::loader::TorchNamespace choose(const std::vector<std::uint8_t>& bytes, const NamespaceClaim& claim) {
    return kernhub::loader::choose_namespace(listing_of(bytes), claim, bytes.data(), bytes.size(), "lib.so");
}

}  // namespace

TEST_CASE("a listing reads each byte once: 10,000 headers over .rodata list what one does", "[loader]") {
    const std::vector<std::uint8_t> bytes = kernhub::test::slurp_bytes(k_library);
    const TorchOpListing plain = listing_of(bytes);
    CHECK(plain.ops == std::vector<std::string>{"add_one", "add_one.out", "scale"});
    CHECK(plain.names.count(k_ns) == 1);
    CHECK(plain.names_complete);
    // Stripped: no symbol names the namespace.
    CHECK(plain.defined_namespaces.empty());
    for (std::size_t copies : {1000u, 10000u}) {
        INFO(copies << " copies");
        const TorchOpListing crafted = listing_of(kernhub::test::with_section_copies(bytes, ".rodata", copies));
        CHECK(crafted.ops == plain.ops);
        CHECK(crafted.schemas == plain.schemas);
        CHECK(crafted.names == plain.names);
    }
}

TEST_CASE("the op and schema lists are bounded by k_max_torch_ops and hold no duplicates", "[loader]") {
    const std::vector<std::uint8_t> bytes = kernhub::test::slurp_bytes(k_library);
    const auto schemas = [](std::size_t count, std::size_t repeat) {
        std::vector<std::uint8_t> payload;
        for (std::size_t r = 0; r < repeat; ++r) {
            for (std::size_t i = 0; i < count; ++i) {
                const std::string schema = "op_" + std::to_string(i) + "(Tensor x) -> Tensor";
                payload.insert(payload.end(), schema.begin(), schema.end());
                payload.push_back(0);
            }
        }
        return payload;
    };
    const std::size_t limit = kernhub::loader::k_max_torch_ops;
    const std::size_t own = listing_of(bytes).schemas.size();
    // The limit's worth, three times over: no duplicate, no refusal.
    const TorchOpListing full = listing_of(kernhub::test::with_read_only_section(bytes, schemas(limit - 3, 3)));
    CHECK(full.ops.size() == limit);  // the library's own three and the planted ones
    CHECK(full.schemas.size() == limit - 3 + own);
    const Error over = error_of([&] { listing_of(kernhub::test::with_read_only_section(bytes, schemas(limit, 1))); });
    CHECK(over.code() == ErrorCode::verification);
    CHECK_THAT(over.what(), Catch::Contains("k_max_torch_ops"));
}

TEST_CASE("a listing stops with Error(interrupted) once the cancel flag is set", "[loader]") {
    const std::vector<std::uint8_t> bytes = kernhub::test::slurp_bytes(k_library);
    std::atomic<bool> cancel{true};
    CHECK(error_of([&] { listing_of(bytes, &cancel); }).code() == ErrorCode::interrupted);
    cancel = false;
    CHECK(listing_of(bytes, &cancel).ops.size() == 3);
}

TEST_CASE("_ops.py is read as Python runs it: the last top-level assignment, identifiers only", "[loader]") {
    // kernel-builder's own shape.
    CHECK(read_ops_py("import torch\nfrom . import _act_1a2b\nops = torch.ops._act_1a2b\n\n\n"
                      "def add_op_namespace_prefix(op_name: str):\n    return f\"_act_1a2b::{op_name}\"\n")
              .name == "_act_1a2b");
    CHECK(read_ops_py("ops=torch.ops._x9").name == "_x9");
    CHECK(read_ops_py("ops = torch.ops._a  # the namespace\r\n").name == "_a");
    // The last assignment wins, as in Python.
    CHECK(read_ops_py("ops = torch.ops._first\nops = torch.ops._second\n").name == "_second");
    // Text that only looks like an assignment: comments, strings, expressions.
    CHECK(read_ops_py("# ops = torch.ops._c\nops = torch.ops._mine\n").name == "_mine");
    CHECK(read_ops_py("ops = torch.ops._mine\n\"\"\"\nops = torch.ops._doc\n\"\"\"\n").name == "_mine");
    CHECK(read_ops_py("ops = torch.ops._mine\nx = f(\nops = torch.ops._arg)\n").name == "_mine");
    CHECK(read_ops_py("ops = torch.ops._mine\ny = 1 + \\\nops == 2\n").name == "_mine");
    CHECK(read_ops_py("ops = torch.ops._mine\ns = 'ops = torch.ops._str'\n").name == "_mine");
    // Statements after a ';', and an annotated assignment, assign too.
    CHECK(read_ops_py("import torch; ops = torch.ops._b\n").name == "_b");
    CHECK(read_ops_py("ops = torch.ops._a; ops = torch.ops._b\n").name == "_b");
    CHECK(read_ops_py("ops: object = torch.ops._b\n").name == "_b");
    CHECK(read_ops_py("ops = torch.ops._a\nops: object\n").name == "_a");
    CHECK_THAT(read_ops_py("x = 1;ops=torch.ops.__class__\n").problem, Catch::Contains("attribute of torch.ops"));
    // A one-line compound statement runs its body only sometimes.
    CHECK_THAT(read_ops_py("ops = torch.ops._a\nif True: ops = torch.ops._b\n").problem,
               Catch::Contains("inside a block"));
    CHECK_THAT(read_ops_py("ops = torch.ops._a\nelse: x = 1; ops = torch.ops._b\n").problem,
               Catch::Contains("inside a block"));
    CHECK(read_ops_py("ops = torch.ops._a\niffy = 1\nif x: y = {'ops': 1}\n").name == "_a");
    // Lines end at \r too, and a backslash joins lines, in code and in a string.
    CHECK(read_ops_py("ops = torch.ops._a\rops = torch.ops._b\r").name == "_b");
    CHECK(read_ops_py("ops = torch.ops._a\n_s = 'x\\\n'; ops = torch.ops._b\n").name == "_b");
    CHECK(read_ops_py("ops = torch.ops._a\nops \\\n= torch.ops._b\n").name == "_b");
    CHECK(read_ops_py("ops = torch.ops._a \\\n\n").name == "_a");
    CHECK(read_ops_py("ops = torch.ops._a\nx = f(\n  ops=1)\nprint(ops)\ny = ops.add_one\n").name == "_a");
    // Other forms of binding ops, last, are refused.
    for (const char* other :
         {"_y = ops = torch.ops.zzz", "ops, _x = torch.ops.zzz, 1", "(ops) = torch.ops.zzz", "[ops] = [torch.ops.zzz]",
          "*ops, = [1]", "(ops := torch.ops.zzz)", "for ops in [1]: pass", "with f() as ops: pass", "def ops(): pass",
          "class ops: pass", "import torch.ops as ops", "from x import ops", "del ops", "ops += 1"}) {
        INFO(other);
        CHECK_THAT(read_ops_py(std::string("ops = torch.ops._a\n") + other + "\n").problem,
                   Catch::Contains("form kernhub does not read") || Catch::Contains("inside a block"));
    }
    CHECK_THAT(read_ops_py("ops = torch.ops._a\n\xef\xbd\x8fps = torch.ops.zzz\n").problem,
               Catch::Contains("outside ASCII"));
    CHECK(read_ops_py("ops = torch.ops._a  # \xe2\x9c\x93 fine in a comment\ns = '\xc3\xa9'\n").name == "_a");
    // No assignment: nothing said, the file name decides.
    const auto none = read_ops_py("import torch\nops_prefix = 1\n");
    CHECK(none.name.empty());
    CHECK(none.problem.empty());
    // What is no namespace, or that kernhub cannot run, is a problem.
    CHECK_THAT(read_ops_py("ops = torch.ops.__class__\n").problem, Catch::Contains("attribute of torch.ops"));
    CHECK_THAT(read_ops_py("ops = torch.ops._a\nops = None\n").problem,
               Catch::Contains("something other than torch.ops"));
    CHECK_THAT(read_ops_py("ops = torch.ops.a.b\n").problem, Catch::Contains("no namespace name"));
    CHECK_THAT(read_ops_py("ops = torch.ops._a\nif x:\n    ops = torch.ops._b\n").problem,
               Catch::Contains("inside a block"));
    const auto long_name = read_ops_py("ops = torch.ops._" + std::string(5000, 'n') + "\n");
    CHECK_THAT(long_name.problem, Catch::Contains("no namespace name"));
    CHECK(long_name.problem.size() < 400);  // the name is cut in the message
    CHECK(kernhub::loader::is_op_name("add_one.out"));
    CHECK_FALSE(kernhub::loader::is_op_name("add one"));
    CHECK_FALSE(kernhub::loader::is_op_name("a.b.c"));
}

TEST_CASE("a stripped library's namespace must be a whole string of its bytes and none of its ops", "[loader]") {
    const std::vector<std::uint8_t> bytes = kernhub::test::slurp_bytes(k_library);
    const auto honest = choose(bytes, {k_ns, true});
    CHECK(honest.name == k_ns);
    CHECK(honest.registered == std::set<std::string>{k_ns});
    CHECK(choose(bytes, {k_ns, false}).name == k_ns);  // the file name, no _ops.py

    const Error spoof = error_of([&] { choose(bytes, {"zzz", true}); });
    CHECK(spoof.code() == ErrorCode::verification);
    CHECK_THAT(spoof.what(), Catch::Contains("'zzz'") && Catch::Contains("_ops.py"));
    const Error renamed = error_of([&] { choose(bytes, {"_renamed_ns", false}); });
    CHECK(renamed.code() == ErrorCode::verification);
    CHECK_THAT(renamed.what(), Catch::Contains("no _ops.py") && Catch::Contains("renamed"));
    // A piece of the name, or an op's name, is no namespace.
    CHECK(error_of([&] { choose(bytes, {"_kh_torch_pydata", true}); }).code() == ErrorCode::verification);
    CHECK_THAT(error_of([&] { choose(bytes, {"add_one", true}); }).what(), Catch::Contains("one of its ops"));
}

TEST_CASE("the read-only sections are visited once however many headers name them", "[loader]") {
    const std::vector<std::uint8_t> bytes = kernhub::test::slurp_bytes(k_library);
    const auto visited = [](const std::vector<std::uint8_t>& file) {
        std::size_t total = 0, visits = 0;
        kernhub::elf::for_each_read_only_section(file.data(), file.size(), "lib.so",
                                                 [&](const std::uint8_t*, std::size_t length) {
                                                     total += length;
                                                     ++visits;
                                                 });
        return std::make_pair(total, visits);
    };
    const auto plain = visited(bytes);
    REQUIRE(plain.first > 0);
    CHECK(visited(kernhub::test::with_section_copies(bytes, ".rodata", 10000)) == plain);
    // A section overlapping another in part is one range with it.
    const std::vector<std::uint8_t> payload(4096, 'x');
    const auto extra =
        visited(kernhub::test::with_last_section_copies(kernhub::test::with_read_only_section(bytes, payload), 1000));
    CHECK(extra.first == plain.first + payload.size());
    CHECK(extra.second == plain.second + 1);
}

TEST_CASE("a library whose symbols name several namespaces needs an _ops.py naming one, and registers all",
          "[loader]") {
    TorchOpListing listing;
    listing.defined_namespaces = {"_ns_a", "_ns_b"};
    listing.ops = {"add_one"};
    const auto chosen = kernhub::loader::choose_namespace(listing, {"_ns_b", true}, nullptr, 0, "lib.so");
    CHECK(chosen.name == "_ns_b");
    CHECK(chosen.registered == std::set<std::string>{"_ns_a", "_ns_b"});
    // The file name may name one of them too; otherwise nothing says which.
    CHECK(kernhub::loader::choose_namespace(listing, {"_ns_a", false}, nullptr, 0, "lib.so").name == "_ns_a");
    const Error several = error_of([&] {
        kernhub::loader::choose_namespace(listing, {"_other", false}, nullptr, 0, "lib.so");
    });
    CHECK(several.code() == ErrorCode::verification);
    CHECK_THAT(several.what(), Catch::Contains("'_ns_a', '_ns_b'") && Catch::Contains("cannot tell which"));
    // One namespace and no _ops.py: that one, whatever the file is called.
    listing.defined_namespaces = {"_ns_a"};
    CHECK(kernhub::loader::choose_namespace(listing, {"_renamed", false}, nullptr, 0, "lib.so").name == "_ns_a");
}
