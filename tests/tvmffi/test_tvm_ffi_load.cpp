// tvm-ffi variants end to end through kernhub: fetched from a loopback hub,
// selected by the runtime's version, loaded with the runtime bound first,
// called through TvmFunction and the C API, with the kernel's own errors
// coming back; and the CLI's answers for a missing runtime, a missing
// function and a variant for another tvm-ffi version.
#include <dlfcn.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cli/cli_support.hpp"
#include "kernhub/cuda.hpp"
#include "kernhub/kernhub.h"
#include "kernhub/kernhub.hpp"
#include "kernhub/tvm_ffi.hpp"
#include "support/requirements.hpp"
#include "support/tvm_ffi_fixture.hpp"
#include "tvmffi/tvm_hub.hpp"

#if KERNHUB_TVM_FFI_HEADERS
#include <dlpack/dlpack.h>
#endif

namespace fs = std::filesystem;
using namespace kernhub::test;
using namespace kernhub::test::tvm;
using kernhub::ErrorCode;

namespace {

#if KERNHUB_TVM_FFI_HEADERS
using Tensor = DLTensor;  // dlpack.h's own: an unnamed struct, taken by layout
#else
// DLPack's tensor descriptor, for a build without the wheel's headers (the
// tests then skip, but still compile).
struct Tensor {
    void* data;
    struct {
        std::int32_t device_type;
        std::int32_t device_id;
    } device;
    std::int32_t ndim;
    struct {
        std::uint8_t code;
        std::uint8_t bits;
        std::uint16_t lanes;
    } dtype;
    std::int64_t* shape;
    std::int64_t* strides;
    std::uint64_t byte_offset;
};
#endif

// A 1-D CPU tensor over `values` (float32, or int32 when `int32`).
struct HostVector {
    std::vector<float> floats;
    std::vector<std::int32_t> ints;
    std::int64_t length = 0;
    Tensor tensor{};

    explicit HostVector(std::vector<float> values) : floats(std::move(values)) { describe(floats.data(), 2, 32); }
    explicit HostVector(std::vector<std::int32_t> values) : ints(std::move(values)) { describe(ints.data(), 0, 32); }
    HostVector(const HostVector&) = delete;
    HostVector& operator=(const HostVector&) = delete;

private:
    void describe(void* data, std::uint8_t code, std::uint8_t bits) {
        length = static_cast<std::int64_t>(floats.empty() ? ints.size() : floats.size());
        tensor.data = data;
        tensor.device.device_type = static_cast<decltype(tensor.device.device_type)>(1);  // kDLCPU
        tensor.device.device_id = 0;
        tensor.ndim = 1;
        tensor.dtype.code = code;  // kDLFloat = 2, kDLInt = 0
        tensor.dtype.bits = bits;
        tensor.dtype.lanes = 1;
        tensor.shape = &length;
        tensor.strides = nullptr;
        tensor.byte_offset = 0;
    }
};

// A Client for the tvm hub with the wheel's runtime named in Options.
struct Setup {
    TempDir dir;
    TvmHub hub;
    fs::path registry = write_registry(dir.path());

    kernhub::Options options(bool verify_on_load = false) {
        kernhub::Options o;
        o.endpoint = hub.server().endpoint();
        o.cache_dir = (dir.path() / "cache").string();
        o.registries = {registry.string()};
        o.no_default_registry = true;
        o.tvm_ffi_library = tvm_ffi_runtime_library().string();
        o.verify_on_load = verify_on_load;
        o.retries = 0;
        return o;
    }

    // A C API handle on the same hub, cache and registry (the runtime left
    // to the setting or the search); the caller frees it.
    kh_hub* c_hub() {
        kh_hub* handle = kh_hub_new();
        REQUIRE(handle != nullptr);
        CHECK(kh_hub_set(handle, "endpoint", hub.server().endpoint().c_str()) == 0);
        CHECK(kh_hub_set(handle, "cache_dir", (dir.path() / "cache").c_str()) == 0);
        CHECK(kh_hub_set(handle, "registry", registry.c_str()) == 0);
        return handle;
    }
};

kernhub::Error error_of(const std::function<void()>& call) {
    try {
        call();
    } catch (const kernhub::Error& e) {
        return e;
    }
    FAIL("no kernhub::Error was thrown");
    return kernhub::Error(ErrorCode::ok, "");
}

}  // namespace

TEST_CASE("a tvm-ffi variant is fetched, loaded and called with correct results", "[tvm-ffi][needs:tvm-ffi]") {
    Setup setup;
    kernhub::Client client(setup.options());
    const kernhub::LoadResult loaded = client.load("tvm-add-one");
    CHECK(loaded.fetch.variant == cpu_variant());
    CHECK(loaded.kind == kernhub::LoadKind::tvm_ffi);
    CHECK(loaded.symbol == "__tvm_ffi_add_one");
    CHECK(fs::path(loaded.file).filename() == tvm_ffi_fixture_so().filename());
    // A load takes what it reads, the library and metadata.json, each
    // verified against metadata.json's digest; the variant's Python stays
    // on the hub, and the part lies outside the snapshot.
    REQUIRE(loaded.fetch.files.size() == 2);
    CHECK(loaded.fetch.files[0].path == "metadata.json");
    CHECK(loaded.fetch.files[1].path == tvm_ffi_fixture_so().filename().string());
    CHECK(loaded.fetch.path.find("/.kernhub/partial/") != std::string::npos);

    const kernhub::TvmFfiRuntimeInfo runtime = kernhub::tvm_ffi_runtime();
    CHECK(runtime.version.rfind("0.1.", 0) == 0);
    CHECK(fs::equivalent(runtime.library, tvm_ffi_runtime_library()));

    auto add_one = kernhub::TvmFunction::from(client.loaded("tvm-add-one"));
    CHECK(add_one.name() == "add_one");
    CHECK(reinterpret_cast<void*>(add_one.get()) == loaded.address);
    CHECK(client.loaded("tvm-add-one").address == loaded.address);
    HostVector x(std::vector<float>{1.5F, -2.0F, 10.0F, 0.25F});
    HostVector y(std::vector<float>(4, 0.0F));
    const kernhub::TvmResult result = add_one(&x.tensor, &y.tensor);
    CHECK(result.is_none());
    CHECK(y.floats == std::vector<float>{2.5F, -1.0F, 11.0F, 1.25F});

    // Integers, floats and null through the other functions.
    client.load("tvm-add-int");
    client.load("tvm-scaled-sum");
    client.load("tvm-length");
    CHECK(kernhub::TvmFunction::from(client.loaded("tvm-add-int"))(40, std::int64_t{2}).as_int() == 42);
    CHECK(kernhub::TvmFunction::from(client.loaded("tvm-add-int"))(-7, 3).type() == kernhub::TvmType::integer);
    CHECK(kernhub::TvmFunction::from(client.loaded("tvm-scaled-sum"))(&x.tensor, 2.0).as_double() == Approx(19.5));
    auto length = kernhub::TvmFunction::from(client.loaded("tvm-length"));
    CHECK(length(nullptr).as_int() == -1);
    CHECK(length(&x.tensor).as_int() == 4);
    CHECK(length(kernhub::TvmArg::tensor(&y.tensor)).as_int() == 4);
    // The result's type is checked when read.
    CHECK(error_of([&] { (void)length(nullptr).as_bool(); }).code() == ErrorCode::usage);
}

TEST_CASE("an error the kernel raises comes back as Error(kernel) with its message", "[tvm-ffi][needs:tvm-ffi]") {
    Setup setup;
    kernhub::Client client(setup.options());
    client.load("tvm-add-one");
    auto add_one = kernhub::TvmFunction::from(client.loaded("tvm-add-one"));
    HostVector ints(std::vector<std::int32_t>{1, 2, 3});
    HostVector y(std::vector<float>(3, 0.0F));
    kernhub::Error e = error_of([&] { add_one(&ints.tensor, &y.tensor); });
    CHECK(e.code() == ErrorCode::kernel);
    CHECK(std::string(kernhub::to_string(e.code())) == "kernel error");
    INFO(e.message());
    CHECK(e.message().find("'add_one' raised TypeError") != std::string::npos);
    CHECK(e.message().find("add_one: x must be float32, got int32") != std::string::npos);
    CHECK(y.floats == std::vector<float>(3, 0.0F));

    // Too few arguments is the runtime's own TypeError, and a shape
    // mismatch the kernel's ValueError; each call leaves nothing behind.
    e = error_of([&] { add_one(&y.tensor); });
    CHECK(e.code() == ErrorCode::kernel);
    CHECK(e.message().find("TypeError") != std::string::npos);
    HostVector longer(std::vector<float>(5, 1.0F));
    e = error_of([&] { add_one(&longer.tensor, &y.tensor); });
    CHECK(e.message().find("raised ValueError: add_one: x and y must have the same length") != std::string::npos);
    HostVector x(std::vector<float>{1.0F, 2.0F, 3.0F});
    add_one(&x.tensor, &y.tensor);
    CHECK(y.floats == std::vector<float>{2.0F, 3.0F, 4.0F});
}

TEST_CASE("a result kernhub does not read fails the call: a small string, and a string object released",
          "[tvm-ffi][needs:tvm-ffi]") {
    Setup setup;
    kernhub::Client client(setup.options());
    client.load("tvm-greeting");
    auto greeting = kernhub::TvmFunction::from(client.loaded("tvm-greeting"));
    kernhub::Error e = error_of([&] { greeting(false); });
    CHECK(e.code() == ErrorCode::usage);
    CHECK(e.message().find("returned a value of type index 11") != std::string::npos);
    e = error_of([&] { greeting(true); });
    CHECK(e.code() == ErrorCode::usage);
    CHECK(e.message().find("returned an object of type index 65") != std::string::npos);

    kh_hub* hub = setup.c_hub();
    REQUIRE(kh_load(hub, "tvm-greeting") == 0);
    kh_tvm_any arg;
    std::memset(&arg, 0, sizeof arg);
    arg.type_index = KH_TVM_BOOL;
    arg.value.v_int64 = 1;
    kh_tvm_any result;
    std::memset(&result, 0, sizeof result);
    CHECK(kh_tvm_call(hub, kh_symbol(hub, "tvm-greeting"), &arg, 1, &result) == 2);
    CHECK(result.type_index == KH_TVM_NONE);  // nothing is handed out
    kh_hub_free(hub);
}

TEST_CASE("verify_on_load loads the tvm-ffi library from its checked copy", "[tvm-ffi][needs:tvm-ffi]") {
    Setup setup;
    kernhub::Client client(setup.options(true));
    const kernhub::LoadResult loaded = client.load("tvm-add-one");
    CHECK(loaded.kind == kernhub::LoadKind::tvm_ffi);
    auto add_one = kernhub::TvmFunction::from(client.loaded("tvm-add-one"));
    HostVector x(std::vector<float>{41.0F});
    HostVector y(std::vector<float>{0.0F});
    add_one(&x.tensor, &y.tensor);
    CHECK(y.floats == std::vector<float>{42.0F});
}

TEST_CASE("a missing tvm-ffi function is not_found naming the ones that exist", "[tvm-ffi][needs:tvm-ffi]") {
    Setup setup;
    kernhub::Client client(setup.options());
    kernhub::Error e = error_of([&] { client.load("tvm-missing"); });
    CHECK(e.code() == ErrorCode::not_found);
    INFO(e.message());
    CHECK(e.message().find("no tvm-ffi function 'add_two' (symbol __tvm_ffi_add_two)") != std::string::npos);
    CHECK(e.message().find(
              "its functions: add_int, add_one, current_stream, greeting, length_or_minus_one, scaled_sum;") !=
          std::string::npos);
    // tvm-ffi's internal symbols are not functions to load.
    e = error_of([&] { client.load("tvm-add-one", "__tvm_ffi__library_ctx"); });
    CHECK(e.code() == ErrorCode::usage);
    // Nor is a name that becomes one with the prefix (_x -> __tvm_ffi__x).
    e = error_of([&] { client.load("tvm-internal"); });
    CHECK(e.code() == ErrorCode::usage);
    CHECK(e.message().find("__tvm_ffi__library_ctx") != std::string::npos);
    // A data object named like a function is no function.
    e = error_of([&] { client.load("tvm-data"); });
    CHECK(e.code() == ErrorCode::not_found);
    CHECK(e.message().find("exports data, not a tvm-ffi function, as 'not_code'") != std::string::npos);
    // A tvm-ffi entry is no plain C function and no CUDA kernel.
    client.load("tvm-add-int");
    e = error_of([&] { client.resolve<std::int64_t(std::int64_t, std::int64_t)>("tvm-add-int"); });
    CHECK(e.code() == ErrorCode::usage);
    CHECK(e.message().find("a tvm-ffi function; call it through TvmFunction") != std::string::npos);
    e = error_of([&] { kernhub::CudaKernel::from(client.loaded("tvm-add-int")); });
    CHECK(e.code() == ErrorCode::usage);
    CHECK(e.message().find("TvmFunction") != std::string::npos);
    // A library inside a package folder of the variant is found there.
    const kernhub::LoadResult nested = client.load("tvm-nested");
    CHECK(nested.file.find("/kh_tvm_ops/" + tvm_ffi_fixture_so().filename().string()) != std::string::npos);
    CHECK(kernhub::TvmFunction::from(client.loaded("tvm-nested"))(2, 3).as_int() == 5);
    // The zip build layout: the library beside <id>.zip loads as in the files layout.
    const kernhub::LoadResult zipped = client.load("tvm-zipped");
    CHECK(zipped.kind == kernhub::LoadKind::tvm_ffi);
    CHECK(fs::path(zipped.file).filename() == tvm_ffi_fixture_so().filename());
    // The tvm-ffi kind reads nothing inside the zip, so a load leaves it on the hub.
    CHECK(std::none_of(zipped.fetch.files.begin(), zipped.fetch.files.end(),
                       [](const kernhub::FileInfo& f) { return f.path == "_tvm_zipped_5e2a.zip"; }));
    CHECK(kernhub::TvmFunction::from(client.loaded("tvm-zipped"))(40, 2).as_int() == 42);
    // TvmFunction only takes what a tvm-ffi load stored.
    CHECK(error_of([&] { kernhub::TvmFunction::from(client.loaded("never-loaded")); }).code() == ErrorCode::not_found);
    CHECK(error_of([] { kernhub::TvmFunction::from(kernhub::LoadResult{}); }).code() == ErrorCode::usage);
}

TEST_CASE("a process binds one tvm-ffi runtime, and naming another fails to load", "[tvm-ffi][needs:tvm-ffi]") {
    Setup setup;
    kernhub::Client client(setup.options());
    client.load("tvm-add-one");
    const fs::path copy = setup.dir.path() / "libtvm_ffi.so";
    fs::copy_file(tvm_ffi_runtime_library(), copy);
    kernhub::Options other = setup.options();
    other.tvm_ffi_library = copy.string();
    kernhub::Client second(other);
    kernhub::Error e = error_of([&] { second.load("tvm-add-int"); });
    CHECK(e.code() == ErrorCode::load);
    CHECK(e.message().find("already uses the tvm-ffi runtime") != std::string::npos);
    CHECK(e.message().find(copy.string()) != std::string::npos);
    // The same file under its own name is the bound runtime.
    kernhub::Client third(setup.options());
    CHECK(third.load("tvm-add-int").kind == kernhub::LoadKind::tvm_ffi);
}

// Like every test here, this relies on ctest running each test case in a
// process of its own (catch_discover_tests): the runtime binding is
// process-wide, and this case needs a process where none happened yet.
TEST_CASE("a runtime already in the process is the one kernhub binds, and no other may join it",
          "[tvm-ffi][needs:tvm-ffi]") {
    // The host application (or Python) loaded libtvm_ffi.so before kernhub.
    void* own = dlopen(tvm_ffi_runtime_library().c_str(), RTLD_NOW | RTLD_GLOBAL);
    REQUIRE(own != nullptr);
    Setup setup;
    const fs::path copy = setup.dir.path() / "libtvm_ffi.so";
    fs::copy_file(tvm_ffi_runtime_library(), copy);
    kernhub::Options other = setup.options();
    other.tvm_ffi_library = copy.string();
    kernhub::Client refused(other);
    kernhub::Error e = error_of([&] { refused.load("tvm-add-one"); });
    CHECK(e.code() == ErrorCode::load);
    CHECK(e.message().find("already holds the tvm-ffi runtime") != std::string::npos);
    // Nothing named: the loaded one is found before any search.
    kernhub::Options unnamed = setup.options();
    unnamed.tvm_ffi_library.clear();
    kernhub::Client client(unnamed);
    CHECK(client.load("tvm-add-one").kind == kernhub::LoadKind::tvm_ffi);
    CHECK(fs::equivalent(kernhub::tvm_ffi_runtime().library, tvm_ffi_runtime_library()));
}

TEST_CASE("the C API prewarms a tvm-ffi kernel and calls it through kh_tvm_call", "[tvm-ffi][capi][needs:tvm-ffi]") {
    Setup setup;
    kh_hub* hub = setup.c_hub();
    CHECK(kh_hub_set(hub, "tvm_ffi_library", tvm_ffi_runtime_library().c_str()) == 0);
    REQUIRE(kh_load(hub, "tvm-add-int") == 0);
    REQUIRE(kh_load(hub, "tvm-add-one") == 0);
    void* add_int = kh_symbol(hub, "tvm-add-int");
    REQUIRE(add_int != nullptr);

    kh_tvm_any args[2];
    std::memset(args, 0, sizeof args);
    args[0].type_index = KH_TVM_INT;
    args[0].value.v_int64 = 40;
    args[1].type_index = KH_TVM_INT;
    args[1].value.v_int64 = 2;
    kh_tvm_any result;
    std::memset(&result, 0, sizeof result);
    CHECK(kh_tvm_call(hub, add_int, args, 2, &result) == 0);
    CHECK(kh_last_error(hub) == nullptr);
    CHECK(result.type_index == KH_TVM_INT);
    CHECK(result.value.v_int64 == 42);

    // The raw pointer is the TVM FFI safe call itself.
    kh_tvm_any direct;
    std::memset(&direct, 0, sizeof direct);
    CHECK(reinterpret_cast<kh_tvm_safe_call>(add_int)(nullptr, args, 2, &direct) == 0);
    CHECK(direct.value.v_int64 == 42);

    // A kernel's error is 9 with its message.
    HostVector ints(std::vector<std::int32_t>{1});
    HostVector y(std::vector<float>{0.0F});
    kh_tvm_any tensors[2];
    std::memset(tensors, 0, sizeof tensors);
    tensors[0].type_index = KH_TVM_DLTENSOR;
    tensors[0].value.v_ptr = &ints.tensor;
    tensors[1].type_index = KH_TVM_DLTENSOR;
    tensors[1].value.v_ptr = &y.tensor;
    CHECK(kh_tvm_call(hub, kh_symbol(hub, "tvm-add-one"), tensors, 2, nullptr) == 9);
    REQUIRE(kh_last_error(hub) != nullptr);
    CHECK(std::string(kh_last_error(hub)).find("kernel error: ") == 0);
    CHECK(std::string(kh_last_error(hub)).find("TypeError: add_one: x must be float32, got int32") !=
          std::string::npos);
    CHECK(std::string(kh_error_name(9)) == "kernel error");
    CHECK(kh_tvm_call(hub, nullptr, args, 0, nullptr) == 2);
    CHECK(kh_tvm_call(hub, add_int, nullptr, 2, nullptr) == 2);
    CHECK(kh_tvm_call(nullptr, add_int, args, 2, nullptr) == 2);
    kh_hub_free(hub);
}

TEST_CASE("on_stream sets the runtime's stream for the call and restores it, also after a raise",
          "[tvm-ffi][needs:tvm-ffi]") {
    Setup setup;
    kernhub::Client client(setup.options());
    client.load("tvm-add-int");
    client.load("tvm-add-one");
    // The runtime only records a stream: no device is needed to see the
    // round trip.
    int marker = 0;
    void* const outer = &marker;
    void* const inner = reinterpret_cast<void*>(0x1000);
    CHECK(kernhub::set_tvm_ffi_stream(3, outer) == nullptr);
    // The kernel sees the caller's stream during the call (current_stream
    // returns what a CUDA kernel would launch on), and the previous one after.
    client.load("tvm-current-stream");
    auto current_stream = kernhub::TvmFunction::from(client.loaded("tvm-current-stream"));
    CHECK(current_stream(3).as_pointer() == outer);
    CHECK(current_stream.on_stream(3, inner, 3).as_pointer() == inner);
    CHECK(current_stream.on_stream(3, inner, 4).as_pointer() == nullptr);  // another device: untouched
    CHECK(current_stream(3).as_pointer() == outer);
    auto add_int = kernhub::TvmFunction::from(client.loaded("tvm-add-int"));
    CHECK(add_int.on_stream(3, inner, 1, 2).as_int() == 3);
    CHECK(kernhub::set_tvm_ffi_stream(3, outer) == outer);
    auto add_one = kernhub::TvmFunction::from(client.loaded("tvm-add-one"));
    HostVector ints(std::vector<std::int32_t>{1});
    CHECK(error_of([&] { add_one.on_stream(3, reinterpret_cast<void*>(0x2000), &ints.tensor, &ints.tensor); }).code() ==
          ErrorCode::kernel);
    CHECK(kernhub::set_tvm_ffi_stream(3, nullptr) == outer);
    CHECK(current_stream(3).as_pointer() == nullptr);
    // Each device has its own.
    CHECK(kernhub::set_tvm_ffi_stream(4, nullptr) == nullptr);
    // A device number the runtime could not index is refused before it.
    for (int device : {-1, 1024, 50000000}) {
        INFO("device " << device);
        CHECK(error_of([&] { kernhub::set_tvm_ffi_stream(device, outer); }).code() == ErrorCode::usage);
        CHECK(error_of([&] { add_int.on_stream(device, outer, 1, 2); }).code() == ErrorCode::usage);
    }
    kh_hub* hub = kh_hub_new();
    REQUIRE(hub != nullptr);
    void* previous = outer;
    CHECK(kh_tvm_set_stream(hub, -1, nullptr, &previous) == 2);
    CHECK(kh_tvm_set_stream(hub, 5, outer, &previous) == 0);
    CHECK(previous == nullptr);
    kh_hub_free(hub);
}

namespace {

// The CLI in a sandbox whose environment can find no tvm-ffi runtime: no
// Python environment, an empty home, no library path.
EnvChanges without_runtime(const cli::Sandbox& box, const EnvChanges& extra = {}) {
    EnvChanges env{{"KERNHUB_TVM_FFI_LIBRARY", std::nullopt},
                   {"VIRTUAL_ENV", std::nullopt},
                   {"CONDA_PREFIX", std::nullopt},
                   {"LD_LIBRARY_PATH", std::nullopt},
                   {"HOME", box.dir.path().string()}};
    for (const auto& [name, value] : extra) env[name] = value;
    return env;
}

EnvChanges with_runtime() {
    return {{"KERNHUB_TVM_FFI_LIBRARY", tvm_ffi_runtime_library().string()}};
}

}  // namespace

TEST_CASE("kernhub load of a tvm-ffi kernel prints the function and the runtime", "[tvm-ffi][cli][needs:tvm-ffi]") {
    cli::Sandbox box;
    TvmHub hub;
    const fs::path registry = write_registry(box.dir.path());
    const std::string endpoint = hub.server().endpoint();
    auto r = box.kh("load", "tvm-add-one", endpoint, {"--registry", registry.string()}, with_runtime());
    INFO(cli::describe(r));
    CHECK(r.exit_code == 0);
    CHECK(r.err.find("loaded tvm-add-one variant " + cpu_variant()) != std::string::npos);
    CHECK(r.err.find("tvm-ffi function add_one (__tvm_ffi_add_one) at 0x") != std::string::npos);
    CHECK(r.err.find("tvm-ffi runtime 0.1.") != std::string::npos);

    auto j = cli::parse_stdout(
        box.kh("load", "tvm-add-one", endpoint, {"--registry", registry.string(), "--json"}, with_runtime()));
    CHECK(j["kind"] == "tvm-ffi");
    CHECK(j["symbol"] == "__tvm_ffi_add_one");
    CHECK(j["tvm_ffi_runtime"]["version"].get<std::string>().rfind("0.1.", 0) == 0);
    CHECK(fs::equivalent(j["tvm_ffi_runtime"]["library"].get<std::string>(), tvm_ffi_runtime_library()));

    // A function the library lacks: exit 3 naming the ones it has.
    cli::check_error(box.kh("load", "tvm-missing", endpoint, {"--registry", registry.string(), "-q"}, with_runtime()),
                     3, {"'add_two'", "add_int, add_one, current_stream, greeting, length_or_minus_one, scaled_sum"});
}

TEST_CASE("kernhub inspect lists the functions of a tvm-ffi library", "[tvm-ffi][cli][needs:tvm-ffi]") {
    cli::Sandbox box;
    auto r = box.run({"inspect", tvm_ffi_fixture_so().string()});
    INFO(cli::describe(r));
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("NEEDED libtvm_ffi.so\n") != std::string::npos);
    CHECK(r.out.find("  tvm-ffi functions (6):\n    add_int\n    add_one\n    current_stream\n    greeting\n    "
                     "length_or_minus_one\n    "
                     "scaled_sum\n") != std::string::npos);
    auto j = cli::parse_stdout(box.run({"inspect", tvm_ffi_fixture_so().string(), "--json"}));
    CHECK(j["tvm_ffi_functions"] == nlohmann::json::array({"add_int", "add_one", "current_stream", "greeting",
                                                           "length_or_minus_one", "scaled_sum"}));
    // A plain C library has none.
    j = cli::parse_stdout(box.run({"inspect", good_fixture_so().string(), "--json"}));
    CHECK(j["tvm_ffi_functions"] == nlohmann::json::array());
}

TEST_CASE("a variant for another tvm-ffi version is not selected, and not loaded by --target",
          "[tvm-ffi][cli][needs:tvm-ffi]") {
    cli::Sandbox box;
    TvmHub hub;
    const fs::path registry = write_registry(box.dir.path());
    const std::string endpoint = hub.server().endpoint();
    auto j = cli::parse_stdout(
        box.kh("info", "tvm-add-one", endpoint, {"--registry", registry.string(), "--json"}, with_runtime()));
    CHECK(j["selected"] == cpu_variant());
    CHECK(j["tvm_ffi_runtime"].get<std::string>().find(" at ") != std::string::npos);
    bool saw_future = false;
    for (const auto& variant : j["variants"]) {
        if (variant["name"] != future_variant()) continue;
        saw_future = true;
        CHECK(variant["selected"] == false);
        CHECK(variant["reason"] == "needs tvm-ffi 0.2, the runtime is tvm-ffi 0.1");
    }
    CHECK(saw_future);
    // Forced with --target it is fetched, and refused at load: exit 7.
    cli::check_error(box.kh("load", "tvm-add-one", endpoint,
                            {"--registry", registry.string(), "-q", "--target", future_variant()}, with_runtime()),
                     7, {future_variant(), "needs tvm-ffi 0.2", "is 0.1."});
}

TEST_CASE("without a tvm-ffi runtime a load exits 7 saying what to install", "[tvm-ffi][cli][needs:tvm-ffi]") {
    cli::Sandbox box;
    TvmHub hub;
    const fs::path registry = write_registry(box.dir.path());
    const std::string endpoint = hub.server().endpoint();
    const std::vector<std::string> flags{"--registry", registry.string(), "-q"};
    // Nothing to find: detection rejects the variant and the fetch says why.
    cli::check_error(box.kh("load", "tvm-add-one", endpoint, flags, without_runtime(box)), 7,
                     {cpu_variant(), "runtime (libtvm_ffi.so), which kernhub did not find",
                      "pip install apache-tvm-ffi", "KERNHUB_TVM_FFI_LIBRARY"});
    // info explains it without failing.
    auto j = cli::parse_stdout(
        box.kh("info", "tvm-add-one", endpoint, {"--registry", registry.string(), "--json"}, without_runtime(box)));
    CHECK(j["selected"].is_null());
    CHECK(j["tvm_ffi_runtime"].get<std::string>().find("pip install apache-tvm-ffi") != std::string::npos);
    // A --target choice skips detection; the load still needs the runtime.
    std::vector<std::string> target = flags;
    target.insert(target.end(), {"--target", cpu_variant()});
    cli::check_error(box.kh("load", "tvm-add-one", endpoint, target, without_runtime(box)), 7,
                     {"pip install apache-tvm-ffi"});
    // A named runtime that is not there is named.
    const std::string missing = (box.dir.path() / "nowhere" / "libtvm_ffi.so").string();
    cli::check_error(
        box.kh("load", "tvm-add-one", endpoint, target, without_runtime(box, {{"KERNHUB_TVM_FFI_LIBRARY", missing}})),
        7, {missing, "does not exist"});
    // A bare name is left to the dynamic loader's search, and is the
    // runtime kernhub then binds (selection and load both ask for it).
    auto bare = box.kh("load", "tvm-add-one", endpoint, flags,
                       without_runtime(box, {{"KERNHUB_TVM_FFI_LIBRARY", "libtvm_ffi.so"},
                                             {"LD_LIBRARY_PATH", tvm_ffi_runtime_library().parent_path().string()}}));
    CHECK(bare.exit_code == 0);
    CHECK(bare.err.empty());
    // A library that is not a tvm-ffi runtime is refused by name.
    cli::check_error(box.kh("load", "tvm-add-one", endpoint, target,
                            without_runtime(box, {{"KERNHUB_TVM_FFI_LIBRARY", good_fixture_so().string()}})),
                     7, {good_fixture_so().string(), "exports no TVMFFIGetVersion"});
}

TEST_CASE("the runtime of the active virtual environment is found without naming it", "[tvm-ffi][cli][needs:tvm-ffi]") {
    cli::Sandbox box;
    TvmHub hub;
    const fs::path registry = write_registry(box.dir.path());
    // <venv>/lib/python3.X/site-packages/tvm_ffi/lib/libtvm_ffi.so
    const fs::path venv =
        tvm_ffi_runtime_library().parent_path().parent_path().parent_path().parent_path().parent_path().parent_path();
    REQUIRE(fs::exists(venv / "pyvenv.cfg"));
    auto r = box.kh("load", "tvm-add-one", hub.server().endpoint(), {"--registry", registry.string()},
                    without_runtime(box, {{"VIRTUAL_ENV", venv.string()}}));
    INFO(cli::describe(r));
    CHECK(r.exit_code == 0);
    CHECK(r.err.find("tvm-ffi runtime 0.1.") != std::string::npos);
    CHECK(r.err.find(venv.string()) != std::string::npos);
}

TEST_CASE("a tvm-ffi dependency is opened first, after its runtime is bound, and the kernel then loads and runs",
          "[tvm-ffi][needs:tvm-ffi]") {
    Setup setup;
    kernhub::Client client(setup.options());
    const kernhub::LoadResult loaded = client.load("tvm-needs-ops");
    REQUIRE(loaded.fetch.dependencies.size() == 1);
    CHECK(loaded.fetch.dependencies[0].repo_id == k_repo);
    CHECK(loaded.fetch.dependencies[0].variant == cpu_variant());
    REQUIRE(loaded.dependency_files.size() == 1);
    CHECK(fs::path(loaded.dependency_files[0]).filename() == tvm_ffi_fixture_so().filename());
    CHECK(loaded.dependency_files[0].find("kernels--kernhub-test--tvm-ops") != std::string::npos);
    // The dependency's exports are in the global scope now.
    CHECK(::dlsym(RTLD_DEFAULT, "__tvm_ffi_add_int") != nullptr);
    CHECK(kernhub::TvmFunction::from(loaded)(40, std::int64_t{2}).as_int() == 42);
}
