// The op namespace is read from the library's own bytes, and no library
// makes LibTorch register a namespace twice (docs/kernels.md, "Torch ops"):
// each shape of the attack on a loopback hub, in both registration forms
// (TORCH_LIBRARY and STABLE_TORCH_LIBRARY), loaded in this process through
// the real dispatcher. After every refusal the process still loads an
// honest kernel and calls its op.
#include "torch/torch_setup.hpp"  // first: torch's headers before Catch's

#include <link.h>

#include "support/requirements.hpp"

using namespace kernhub::test;
using namespace kernhub::test::torch_hub;
using kernhub::ErrorCode;

namespace {

KERNHUB_TEST_REQUIREMENT("needs:torch", why_no_torch);

using UnaryOp = at::Tensor(const at::Tensor&);

// The two forms: the repo prefix and the namespace of its library.
struct Form {
    std::string prefix;
    std::string ns;
};

Form form_under_test() {
    return GENERATE(Form{"ops", k_ops_ns}, Form{"stable", k_stable_ns});
}

std::string repo(const Form& form, const std::string& shape) {
    return "kernhub-test/" + form.prefix + "-" + shape;
}

kernhub::LoadResult load_op(kernhub::Client& client, const std::string& ref) {
    kernhub::LoadOptions options;
    options.op = "add_one";
    return client.load(ref, options);
}

// The honest kernel of the form loads and its op adds one.
void check_honest_loads(kernhub::Client& client, const Form& form) {
    const kernhub::LoadResult result = load_op(client, repo(form, "honest"));
    CHECK(result.torch_op == form.ns + "::add_one");
    CHECK(values(kernhub::torch::op<UnaryOp>(result).call(tensor({1.0f, 41.0f}))) == (std::vector<float>{2.0f, 42.0f}));
}

}  // namespace

TEST_CASE("an _ops.py that claims a namespace the bytes do not register is refused before dlopen (exit 4)",
          "[torch][needs:torch]") {
    const Form form = form_under_test();
    INFO(form.prefix);
    Setup setup;
    kernhub::Client client(setup.options(cxx11_variant()));
    for (const std::string shape : {"spoof", "spoof-stripped", "real", "class", "two-lines"}) {
        INFO(shape);
        const kernhub::Error error = error_of([&] { load_op(client, repo(form, shape)); });
        CHECK(error.code() == ErrorCode::verification);
        const std::string message = error.what();
        if (shape == "class") {
            CHECK(contains(message, "__class__, an attribute of torch.ops"));
        } else {
            CHECK(contains(message, "'zzz'"));
            CHECK(contains(message, shape == "spoof-stripped" ? "does not name" : "'" + form.ns + "'"));
        }
        CHECK_FALSE(namespace_loaded(form.ns));
    }
    check_honest_loads(client, form);
    // The same bytes again, now loaded, with the spoofed _ops.py: the
    // library that serves them says which namespace it registered.
    const kernhub::Error again = error_of([&] { load_op(client, repo(form, "spoof")); });
    CHECK(again.code() == ErrorCode::verification);
    CHECK(contains(again.what(), "holds the bytes of"));
    CHECK(contains(again.what(), "'zzz'"));
}

TEST_CASE("a library renamed without _ops.py loads under the namespace its symbols name, and stripped it is exit 4",
          "[torch][needs:torch]") {
    const Form form = form_under_test();
    INFO(form.prefix);
    Setup setup;
    kernhub::Client client(setup.options(cxx11_variant()));
    // GENERATE runs the forms in one process: count what this form adds.
    const int renamed_before = objects_named("_renamed_ns");
    const kernhub::Error stripped = error_of([&] { load_op(client, repo(form, "renamed-stripped")); });
    CHECK(stripped.code() == ErrorCode::verification);
    CHECK(contains(stripped.what(), "'_renamed_ns'"));
    CHECK(contains(stripped.what(), "no _ops.py"));
    CHECK(objects_named("_renamed_ns") == renamed_before);
    const kernhub::LoadResult renamed = load_op(client, repo(form, "renamed"));
    CHECK(renamed.torch_op == form.ns + "::add_one");
    CHECK(values(kernhub::torch::op<UnaryOp>(renamed).call(tensor({2.0f}))) == (std::vector<float>{3.0f}));
    CHECK(objects_named("_renamed_ns") == renamed_before + 1);
    // The honest kernel holds the same bytes: the library already loaded serves it.
    check_honest_loads(client, form);
    CHECK(objects_named(form.ns) == 0);
}

TEST_CASE("a stripped kernel-builder build loads: the namespace literal its registration passes is in its bytes",
          "[torch][needs:torch]") {
    const Form form = form_under_test();
    INFO(form.prefix);
    Setup setup;
    kernhub::Client client(setup.options(cxx11_variant()));
    const kernhub::LoadResult result = load_op(client, repo(form, "stripped"));
    CHECK(result.torch_op == form.ns + "::add_one");
    CHECK(values(kernhub::torch::op<UnaryOp>(result).call(tensor({-1.0f}))) == (std::vector<float>{0.0f}));
}

TEST_CASE(
    "the same bytes twice in one tree are opened once, and another build of the namespace is exit 7 before dlopen",
    "[torch][needs:torch]") {
    const Form form = form_under_test();
    INFO(form.prefix);
    Setup setup;
    kernhub::Client client(setup.options(cxx11_variant()));
    const kernhub::LoadResult twice = load_op(client, repo(form, "twice"));
    CHECK(twice.torch_op == form.ns + "::add_one");
    CHECK(objects_named(form.ns) == 1);
    CHECK(values(kernhub::torch::op<UnaryOp>(twice).call(tensor({5.0f}))) == (std::vector<float>{6.0f}));

    // The other build's tree holds the copy (loaded above) and the other bytes.
    const kernhub::Error other = error_of([&] { load_op(client, repo(form, "other")); });
    CHECK(other.code() == ErrorCode::load);
    CHECK(contains(other.what(), "'" + form.ns + "' is already registered in this process by"));
    CHECK(objects_named(form.ns) == 1);
    check_honest_loads(client, form);
}

TEST_CASE("a dependency claiming the kernel's namespace is refused as a lie, and no longer blocks the kernel",
          "[torch][needs:torch]") {
    const Form form = form_under_test();
    INFO(form.prefix);
    Setup setup;
    kernhub::Client client(setup.options(cxx11_variant()));
    const kernhub::Error blocked = error_of([&] { load_op(client, repo(form, "blocked")); });
    CHECK(blocked.code() == ErrorCode::verification);
    CHECK(contains(blocked.what(), "its _ops.py says the namespace is '" + form.ns + "'"));
    check_honest_loads(client, form);
}

// Each order in a process of its own (ctest runs each test case apart):
// what one loads stays loaded.
TEST_CASE("a stripped library holding another kernel's namespace as a string keeps that kernel out",
          "[torch][needs:torch]") {
    Setup setup;
    kernhub::Client client(setup.options(cxx11_variant()));
    CHECK(load_op(client, "kernhub-test/ops-holds-stable").torch_op == std::string(k_ops_ns) + "::add_one");
    const kernhub::Error error = error_of([&] { load_op(client, repo({"stable", k_stable_ns}, "honest")); });
    CHECK(error.code() == ErrorCode::load);
    CHECK(contains(error.what(), "may already be registered in this process (its name is a string of"));
    CHECK_FALSE(namespace_loaded(k_stable_ns));
}

TEST_CASE("a stripped library holding a loaded kernel's namespace as a string is kept out", "[torch][needs:torch]") {
    Setup setup;
    kernhub::Client client(setup.options(cxx11_variant()));
    check_honest_loads(client, {"stable", k_stable_ns});
    const kernhub::Error error = error_of([&] { load_op(client, "kernhub-test/ops-holds-stable"); });
    CHECK(error.code() == ErrorCode::load);
    CHECK(contains(error.what(), "it may register the op namespace '" + std::string(k_stable_ns) + "'"));
    CHECK_FALSE(namespace_loaded(k_ops_ns));
}

TEST_CASE("a torch variant in the zip build layout loads with the namespace its zipped _ops.py names",
          "[torch][needs:torch]") {
    const Form form = form_under_test();
    INFO(form.prefix);
    Setup setup;
    kernhub::Client client(setup.options(cxx11_variant()));
    // The zip's _ops.py is read in memory: a claim the bytes do not make is
    // refused before dlopen, as beside the library.
    const kernhub::Error spoof = error_of([&] { load_op(client, repo(form, "zip-spoof")); });
    CHECK(spoof.code() == ErrorCode::verification);
    CHECK(contains(spoof.what(), "'zzz'"));
    CHECK(contains(spoof.what(), "_ops.py says the namespace is 'zzz'"));
    CHECK_FALSE(namespace_loaded(form.ns));
    const kernhub::Error twice = error_of([&] { load_op(client, repo(form, "zip-twice")); });
    CHECK(twice.code() == ErrorCode::verification);
    CHECK(contains(twice.what(), "in the zip twice"));
    const kernhub::Error missing = error_of([&] { load_op(client, repo(form, "zip-no-zip")); });
    CHECK(missing.code() == ErrorCode::not_found);
    CHECK(contains(missing.what(), "zipped_7c1d.zip"));
    const kernhub::Error unknown = error_of([&] { load_op(client, repo(form, "zip-unknown-layout")); });
    CHECK(unknown.code() == ErrorCode::load);
    CHECK(contains(unknown.what(), "'tar'"));
    CHECK(contains(unknown.what(), "kernels 0.19.1"));
    CHECK_FALSE(namespace_loaded(form.ns));

    const kernhub::LoadResult result = load_op(client, repo(form, "zip-honest"));
    CHECK(result.torch_op == form.ns + "::add_one");
    CHECK(values(kernhub::torch::op<UnaryOp>(result).call(tensor({1.0f, 41.0f}))) == (std::vector<float>{2.0f, 42.0f}));
    // The zip was fetched and verified like any file, and nothing was unpacked.
    const auto zip = std::find_if(result.fetch.files.begin(), result.fetch.files.end(),
                                  [](const kernhub::FileInfo& f) { return f.path.size() > 4 && f.path.substr(f.path.size() - 4) == ".zip"; });
    REQUIRE(zip != result.fetch.files.end());
    CHECK(zip->sha256.size() == 64);
    CHECK_FALSE(fs::exists(fs::path(result.fetch.path) / "_ops.py"));
    CHECK_FALSE(fs::exists(fs::path(result.fetch.path) / "__init__.py"));
}
