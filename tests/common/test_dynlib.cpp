// The run-time binding helper behind libcurl, libcrypto and libarchive:
// the first soname that opens wins, a missing library or symbol is an
// Error(internal) naming what to install, and a failed binding is kept.
#include <catch2/catch.hpp>
#include <cstring>
#include <string>

#include "common/dynlib.hpp"
#include "kernhub/error.hpp"

using kernhub::Error;
using kernhub::ErrorCode;
namespace dynlib = kernhub::dynlib;

namespace {

int g_bind_calls = 0;

struct NoTable {
    int unused = 0;
};

NoTable bind_missing() {
    ++g_bind_calls;
    dynlib::open_first({"libkernhub-no-such-library.so.9"}, "to test", "install nothing");
    return NoTable{};
}

}  // namespace

TEST_CASE("open_first takes the first soname that opens and resolves its symbols", "[common]") {
    const dynlib::Library lib = dynlib::open_first({"libkernhub-no-such-library.so.9", "libc.so.6"}, "to test", "hint");
    CHECK(lib.name == "libc.so.6");
    decltype(&::strlen) length = nullptr;
    dynlib::resolve(lib, "strlen", length);
    REQUIRE(length != nullptr);
    CHECK(length("four") == 4);
}

TEST_CASE("a library that cannot be opened is an internal error naming every soname and the fix", "[common]") {
    try {
        dynlib::open_first({"libkernhub-a.so.1", "libkernhub-b.so"}, "to download kernels", "install libkernhub-a");
        FAIL("open_first did not throw");
    } catch (const Error& error) {
        CHECK(error.code() == ErrorCode::internal);
        CHECK_THAT(error.message(),
                   Catch::Contains("cannot load libkernhub-a.so.1, libkernhub-b.so to download kernels"));
        CHECK_THAT(error.message(), Catch::Contains("install libkernhub-a"));
        CHECK_THAT(error.context(), Catch::Contains("libkernhub-b.so"));  // the dynamic loader's reason
    }
}

TEST_CASE("a missing symbol is an internal error naming the library and the symbol", "[common]") {
    const dynlib::Library lib = dynlib::open_first({"libc.so.6"}, "to test", "install a newer libc");
    try {
        dynlib::find_symbol(lib, "kernhub_no_such_symbol");
        FAIL("find_symbol did not throw");
    } catch (const Error& error) {
        CHECK(error.code() == ErrorCode::internal);
        CHECK_THAT(error.message(), Catch::Contains("libc.so.6 lacks kernhub_no_such_symbol"));
        CHECK_THAT(error.message(), Catch::Contains("install a newer libc"));
    }
}

TEST_CASE("a failed binding is tried once and the same error is thrown on every use", "[common]") {
    std::string first;
    std::string second;
    try {
        dynlib::bound<NoTable, bind_missing>();
    } catch (const Error& error) {
        first = error.what();
    }
    try {
        dynlib::bound<NoTable, bind_missing>();
    } catch (const Error& error) {
        second = error.what();
    }
    CHECK(g_bind_calls == 1);
    CHECK_FALSE(first.empty());
    CHECK(first == second);
}
