// parse_host_spec: a machine described as --host describes it.
#include <catch2/catch.hpp>

#include "kernhub/error.hpp"
#include "select/variant.hpp"

using namespace kernhub;
using namespace kernhub::select;

namespace {

std::string refusal(const std::string& spec) {
    try {
        parse_host_spec(spec);
    } catch (const Error& error) {
        CHECK(error.code() == ErrorCode::usage);
        return error.plain_message();
    }
    return "(accepted)";
}

}  // namespace

TEST_CASE("a host description sets exactly the facts it names", "[select]") {
    const HostFacts host = parse_host_spec("cpu=aarch64,os=linux,cuda=13.0,torch=2.15,cxx11-abi=false,tvm-ffi=0.1");
    CHECK(host.cpu == "aarch64");
    CHECK(host.os == "linux");
    REQUIRE(host.cuda.has_value());
    CHECK(*host.cuda == std::make_pair(13, 0));
    CHECK(backend_spelling(selected_backend(host)) == "cu130");
    CHECK(host.torch == std::make_optional(std::make_pair(2, 15)));
    CHECK(host.torch_cxx11_abi == std::make_optional(false));
    CHECK_FALSE(host.macos.has_value());
    CHECK(host.targets.empty());
    REQUIRE(host.tvm_ffi);
    CHECK(host.tvm_ffi().version == std::make_optional(std::make_pair(0, 1)));

    // A key not named is absent: no CUDA, no torch, no tvm-ffi runtime.
    const HostFacts bare = parse_host_spec("cpu=x86_64,os=darwin,macos=26.1");
    CHECK_FALSE(bare.cuda.has_value());
    CHECK_FALSE(bare.torch.has_value());
    CHECK(backend_spelling(selected_backend(bare)) == "cpu");
    CHECK(bare.macos == std::make_optional(std::make_pair(26, 1)));
    REQUIRE(bare.tvm_ffi);
    CHECK_FALSE(bare.tvm_ffi().version.has_value());

    CHECK(backend_spelling(selected_backend(parse_host_spec("cpu=x86_64,os=linux,rocm=6.3"))) == "rocm63");
    CHECK(backend_spelling(selected_backend(parse_host_spec("cpu=x86_64,os=linux,xpu=2025.1"))) == "xpu20251");
    CHECK(backend_spelling(selected_backend(parse_host_spec("cpu=aarch64,os=darwin,metal=true"))) == "metal");
    CHECK(backend_spelling(selected_backend(parse_host_spec("cpu=aarch64,os=linux,cann=8.1"))) == "cann81");
    CHECK(backend_spelling(selected_backend(parse_host_spec("cpu=x86_64,os=linux,neuron=true"))) == "neuron");
    CHECK(backend_spelling(selected_backend(parse_host_spec("cpu=x86_64,os=linux,tpu=true"))) == "tpu");

    // The Python: unnamed, it is unknown (selection then takes k_default_python, GIL-enabled).
    CHECK_FALSE(bare.python.has_value());
    CHECK_FALSE(bare.free_threaded);
    CHECK_FALSE(bare.mlx);
    const HostFacts python = parse_host_spec("cpu=x86_64,os=linux,python=3.15,free-threaded=true,mlx=true");
    CHECK(python.python == std::make_optional(std::make_pair(3, 15)));
    CHECK(python.free_threaded);
    CHECK(python.mlx);
    CHECK_FALSE(parse_host_spec("cpu=x86_64,os=linux,python=3.12,free-threaded=false").free_threaded);
}

TEST_CASE("a malformed host description is a usage error naming what is wrong", "[select]") {
    CHECK(refusal("os=linux") == "the host description needs both cpu and os");
    CHECK(refusal("cpu=x86_64") == "the host description needs both cpu and os");
    CHECK(refusal("cpu=x86_64,os=linux,gpu=h200").find("key 'gpu' is unknown") != std::string::npos);
    CHECK(refusal("cpu=x86_64,os=linux,cuda=13") == "the host description cuda='13' is not a version X.Y");
    CHECK(refusal("cpu=x86_64,os=linux,torch=2.x") == "the host description torch='2.x' is not a version X.Y");
    CHECK(refusal("cpu=x86_64,os=linux,cuda=13.0,rocm=6.3") ==
          "the host description names two backends: at most one of cuda, rocm, xpu, cann, metal, neuron and tpu");
    CHECK(refusal("cpu=x86_64,cpu=aarch64,os=linux") == "the host description names cpu twice");
    CHECK(refusal("cpu=riscv64,os=linux") == "the host description cpu='riscv64' is not x86_64 or aarch64");
    CHECK(refusal("cpu=x86_64,os=freebsd") == "the host description os='freebsd' is not linux, darwin or windows");
    CHECK(refusal("cpu=x86_64,os=linux,cxx11-abi=yes").find("is neither true nor false") != std::string::npos);
    CHECK(refusal("cpu=x86_64,os=linux,cxx11-abi=true") == "the host description names cxx11-abi without torch");
    CHECK(refusal("cpu=x86_64,os=linux,free-threaded=true") ==
          "the host description names free-threaded without python");
    CHECK(refusal("cpu=x86_64,os=linux,python=3") == "the host description python='3' is not a version X.Y");
    CHECK(refusal("cpu=x86_64,os=linux,neuron=false") ==
          "the host description neuron='false' is not true (leave neuron out for another backend)");
    CHECK(refusal("cpu=x86_64,os=linux,") == "the host description '' is not KEY=VALUE");
    CHECK(refusal("cpu=x86_64,os=linux,cuda") == "the host description 'cuda' is not KEY=VALUE");
    CHECK(refusal("cpu=x86_64,os=linux,cuda=") == "the host description 'cuda=' is not KEY=VALUE");
    CHECK(refusal("cpu=x86_64,os=linux,cuda=12345.0") == "the host description cuda='12345.0' is not a version X.Y");
    CHECK(refusal(std::string(600, 'x')) == "the host description is over 512 bytes");
}
