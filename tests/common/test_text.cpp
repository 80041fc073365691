// Text that reaches a terminal: errors and progress quote what a hub, a
// registry or the cache held, so control characters must not get through.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "archive/archive.hpp"
#include "cache/cache.hpp"
#include "common/text.hpp"
#include "kernhub/error.hpp"

using kernhub::Error;
using kernhub::ErrorCode;

TEST_CASE("printable escapes what a terminal would obey and keeps everything else", "[common]") {
    CHECK(kernhub::printable("plain/path.so") == "plain/path.so");
    CHECK(kernhub::printable("a\033]0;title\007b") == "a\\x1b]0;title\\x07b");
    CHECK(kernhub::printable("line\nnext\r\t\x7f") == "line\\nnext\\r\\t\\x7f");
    CHECK(kernhub::printable("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80") ==
          "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
    // C1 controls, in UTF-8 and as raw bytes.
    CHECK(kernhub::printable("a\xc2\x9b"
                             "2Jb") == "a\\u009b2Jb");
    CHECK(kernhub::printable("a\x9b"
                             "2Jb") == "a\\x9b2Jb");
    // Not UTF-8: overlong, surrogate, cut short, stray continuation byte.
    CHECK(kernhub::printable("\xc0\xaf") == "\\xc0\\xaf");
    CHECK(kernhub::printable("\xed\xa0\x80") == "\\xed\\xa0\\x80");
    CHECK(kernhub::printable("x\xe2\x82") == "x\\xe2\\x82");
    CHECK(kernhub::printable("\x80") == "\\x80");
    // A bidirectional override and a line separator are invisible but not harmless.
    CHECK(kernhub::printable("lib\xe2\x80\xae"
                             "os.so") == "lib\\u202eos.so");
    CHECK(kernhub::printable("a\xe2\x80\xa8"
                             "b") == "a\\u2028b");
    // The Arabic letter mark, soft hyphen, Mongolian vowel separator,
    // deprecated format controls, annotation controls and tag characters
    // are invisible too (two, three and four bytes).
    CHECK(kernhub::printable("a\xd8\x9c"
                             "b") == "a\\u061cb");
    CHECK(kernhub::printable("a\xc2\xad"
                             "b") == "a\\u00adb");
    CHECK(kernhub::printable("a\xe1\xa0\x8e"
                             "b") == "a\\u180eb");
    CHECK(kernhub::printable("a\xe2\x81\xaf"
                             "b") == "a\\u206fb");
    CHECK(kernhub::printable("a\xef\xbf\xb9"
                             "b") == "a\\ufff9b");
    CHECK(kernhub::printable("a\xf3\xa0\x80\x81"
                             "b") == "a\\U000e0001b");
    // Visible letters of those lengths stay as they are.
    CHECK(kernhub::printable("\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80") == "\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80");
    // Zero-width and direction marks, word joiner, byte order mark: two
    // names that look alike must not print alike.
    CHECK(kernhub::printable("a\xe2\x80\x8b"
                             "b") == "a\\u200bb");
    CHECK(kernhub::printable("a\xe2\x80\x8f"
                             "b") == "a\\u200fb");
    CHECK(kernhub::printable("a\xe2\x81\xa0"
                             "b") == "a\\u2060b");
    CHECK(kernhub::printable("\xef\xbb\xbf"
                             "x") == "\\ufeffx");
    CHECK(kernhub::printable("caf\xc3\xa9 \xe2\x80\x90") == "caf\xc3\xa9 \xe2\x80\x90");  // kept: visible
    // Escaping twice changes nothing.
    const std::string once = kernhub::printable("\033[2J\n\xc2\x85\xff");
    CHECK(kernhub::printable(once) == once);
    CHECK(kernhub::printable(std::string("nul\0byte", 8)) == "nul\\x00byte");
}

TEST_CASE("an Error's message and context are cut, so a hub's megabyte token cannot flood a terminal", "[common]") {
    Error e(ErrorCode::network, "hub sent " + std::string(100000, '1'), std::string(50000, 'x'));
    CHECK(e.message().size() < 4200);
    CHECK(e.message().find("bytes cut)") != std::string::npos);
    CHECK(e.context().size() < 1100);
    CHECK(std::string(e.what()).size() < 5400);
    Error small(ErrorCode::network, "short", "ctx");
    CHECK(std::string(small.what()) == "short (ctx)");
}

TEST_CASE("a long path is cut out of an Error's message, never the reason after it", "[common]") {
    // A cache path near PATH_MAX before the errno text: the cut must leave
    // the start of the sentence and its end, the reason and the next step.
    const std::string path = "/tmp/" + std::string(4075, 'd');
    Error e(ErrorCode::internal, "cannot create " + path + ": Not a directory; check permissions");
    CHECK(e.message().size() < 4200);
    CHECK(e.message().rfind("cannot create /tmp/ddd", 0) == 0);
    const std::string end = "ddd: Not a directory; check permissions";
    REQUIRE(e.message().size() > end.size());
    CHECK(e.message().compare(e.message().size() - end.size(), end.size(), end) == 0);
    CHECK(e.message().find("bytes cut)") != std::string::npos);
}

TEST_CASE("a message naming a long path three times keeps its reason and advice", "[common]") {
    // What a refusal by another user's file says: the file, the folder in
    // the way and the cache root, each near PATH_MAX.
    const std::string root = "/tmp/" + std::string(3990, 'r');
    const std::string message = "cannot lock " + root + "/.locks/x.lock: Permission denied; " + root +
                                "/.locks is owned by root, not nobody; run: sudo chown -R nobody " + root;
    Error e(ErrorCode::internal, message);
    CHECK(e.message().size() <= 4096);
    CHECK_THAT(e.message(), Catch::Contains(": Permission denied; "));
    CHECK_THAT(e.message(), Catch::Contains("/.locks is owned by root, not nobody; run: sudo chown -R nobody /tmp/"));
    CHECK_THAT(e.message(), Catch::StartsWith("cannot lock /tmp/rrr"));
    CHECK_THAT(e.message(), Catch::EndsWith("rrr"));
}

TEST_CASE("a cut never splits a UTF-8 character, in a long word or in the middle of the text", "[common]") {
    std::string euros;
    for (int i = 0; i < 3000; ++i) euros += "\xe2\x82\xac";  // one 9000-byte word of three-byte characters
    const std::string in_word = kernhub::cut_middle("price " + euros + " due", 4096);
    CHECK(kernhub::is_utf8(in_word));
    CHECK(in_word.size() <= 4096);
    CHECK_THAT(in_word, Catch::Contains("bytes cut"));
    std::string sentence;
    for (int i = 0; i < 3000; ++i) sentence += "\xc3\xa9t\xc3\xa9 ";  // short words only: the middle is cut
    const std::string in_middle = kernhub::cut_middle(sentence, 1001);
    CHECK(kernhub::is_utf8(in_middle));
    CHECK(in_middle.size() <= 1001);
    CHECK_THAT(in_middle, Catch::Contains("bytes cut"));
}

TEST_CASE("a long word loses no more than the text is over the bound", "[common]") {
    // 13 bytes over: the 600-byte word keeps all but the excess and room
    // for the marker, not just 160 bytes at each end.
    const std::string text = "reason: " + std::string(600, 'w') + " tail";
    REQUIRE(text.size() == 613);
    const std::string cut = kernhub::cut_middle(text, 600);
    CHECK(cut.size() <= 600);
    CHECK(cut.size() >= 600 - 2 * kernhub::k_cut_marker_bytes);
    CHECK_THAT(cut, Catch::StartsWith("reason: www"));
    CHECK_THAT(cut, Catch::EndsWith("www tail"));
}

TEST_CASE("a text cut again at its bound is unchanged, and a second cut counts what the first removed", "[common]") {
    // An Error's message, cut once, quoted by a longer retry message and
    // cut at the same bound: the count covers the original's bytes.
    std::string words;
    for (int i = 0; i < 4000; ++i) words += "word ";  // 20000 bytes, short words: the middle is cut
    const std::string once = kernhub::cut_middle(words, 4096);
    REQUIRE(once.size() <= 4096);
    CHECK(kernhub::cut_middle(once, 4096) == once);
    const std::string twice = kernhub::cut_middle("retrying in 1 s after: " + once, 4096);
    CHECK(twice.size() <= 4096);
    INFO(twice.substr(2900, 300));
    const std::size_t marker = twice.find(" bytes cut)");
    REQUIRE(marker != std::string::npos);
    CHECK(twice.find(" bytes cut)", marker + 1) == std::string::npos);  // one marker: the first went with the cut
    const std::size_t open = twice.rfind('(', marker);
    const std::size_t counted = std::stoul(twice.substr(open + 1, marker - open - 1));
    // Everything of the 20023 bytes that the twice-cut text does not show.
    const std::size_t marker_end = marker + std::string(" bytes cut) ...").size();
    const std::size_t shown = twice.size() - (marker_end - (open - std::string("... ").size()));
    CHECK(counted == 20023 - shown);
}

TEST_CASE("what bounded() shows stays within the bound once escaped, however many bytes need escaping", "[common]") {
    const std::string controls(20000, '\x01');  // four bytes each once escaped
    const std::string shown = kernhub::bounded(controls, 4096);
    CHECK(shown.size() <= 4096);
    CHECK(shown.size() >= 2048);
    CHECK_THAT(shown, Catch::Contains("bytes cut"));
    CHECK(shown.find('\x01') == std::string::npos);
    // Half escapes, half plain: the first cut in proportion is enough.
    std::string mixed;
    for (int i = 0; i < 10000; ++i) mixed += (i % 2 == 0) ? "a" : "\x1b";
    const std::string shown_mixed = kernhub::bounded(mixed, 4096);
    CHECK(shown_mixed.size() <= 4096);
    CHECK(shown_mixed.size() >= 3000);
    // Text that fits is only escaped.
    CHECK(kernhub::bounded("a\x1b", 4096) == "a\\x1b");
}

TEST_CASE("an Error is one printable line, message and context alike", "[common]") {
    Error e(ErrorCode::verification, "hub sent \033[2Jbuild/x\n.so", "detail\033[31m");
    CHECK(e.message() == "hub sent \\x1b[2Jbuild/x\\n.so");
    CHECK(e.context() == "detail\\x1b[31m");
    CHECK(std::string(e.what()).find('\033') == std::string::npos);
    CHECK(std::string(e.what()).find('\n') == std::string::npos);
}

TEST_CASE("a quoted name is cut at 200 bytes, in every module's messages", "[common]") {
    using kernhub::k_max_quoted_bytes;
    using kernhub::quoted_name;
    REQUIRE(k_max_quoted_bytes == 200);
    CHECK(quoted_name("vector-add") == "'vector-add'");
    CHECK(quoted_name(std::string(200, 'n')) == "'" + std::string(200, 'n') + "'");
    CHECK(quoted_name(std::string(201, 'n')) == "'" + std::string(200, 'n') + "...'");
    CHECK(quoted_name("a\nb\033") == "'a\\nb\\x1b'");
    // A C string is read no further than the cut needs: this one does not
    // end within the bound, and reading past the buffer would be an error
    // under the sanitizers.
    const std::vector<char> unterminated(k_max_quoted_bytes + 1, 'c');
    CHECK(quoted_name(unterminated.data()) == "'" + std::string(200, 'c') + "...'");
    // The cache's checks and the archive's refusals quote names the same way.
    const std::string long_name = std::string(150, 'p') + std::string(150, 'q');
    const std::string cut = "'" + long_name.substr(0, 200) + "...'";
    try {
        kernhub::cache::check_relative_path(long_name + "/../x");
        FAIL("expected an Error");
    } catch (const Error& e) {
        CHECK_THAT(e.message(), Catch::Contains("unsafe file path " + cut + ";"));
    }
    const Error refusal = kernhub::archive::refusal("a.tar", long_name, "is too long");
    CHECK_THAT(refusal.message(), Catch::Contains("entry " + cut + " is too long"));
}
