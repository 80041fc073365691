// Text that reaches a terminal: errors and progress quote what a hub, a
// registry or the cache held, so control characters must not get through.
#include <catch2/catch.hpp>

#include "common/text.hpp"
#include "kernhub/error.hpp"

using kernhub::Error;
using kernhub::ErrorCode;

TEST_CASE("printable shows control characters as '?' and keeps everything else", "[common]") {
    CHECK(kernhub::printable("plain/path.so") == "plain/path.so");
    CHECK(kernhub::printable("a\033]0;title\007b") == "a?]0;title?b");
    CHECK(kernhub::printable("line\nnext\r\t\x7f") == "line?next???");
    CHECK(kernhub::printable("caf\xc3\xa9") == "caf\xc3\xa9");  // UTF-8 stays
}

TEST_CASE("an Error is one printable line, message and context alike", "[common]") {
    Error e(ErrorCode::verification, "hub sent \033[2Jbuild/x\n.so", "detail\033[31m");
    CHECK(e.message() == "hub sent ?[2Jbuild/x?.so");
    CHECK(e.context() == "detail?[31m");
    CHECK(std::string(e.what()).find('\033') == std::string::npos);
    CHECK(std::string(e.what()).find('\n') == std::string::npos);
}
