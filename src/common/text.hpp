// Small ASCII text helpers shared by the modules that parse headers,
// environment values and uname(2) fields, and by anything that shows text
// from outside.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "kernhub/error.hpp"

namespace kernhub {

// `text` without leading and trailing ASCII white space (space, \t, \n, \v,
// \f, \r). Locale-independent, unlike std::isspace, so that header values
// and environment values trim the same way everywhere.
std::string trim(std::string_view text);

// `text` with A-Z mapped to a-z and every other byte kept: header names,
// URL schemes and hosts, flag values and uname fields are ASCII, and a
// locale must not change how they compare.
std::string ascii_lowercase(std::string_view text);

// printable(), which messages and the CLI share, is public: kernhub/error.hpp.

// Every marker of a cut, "...(N bytes cut)..." in a long word or
// "... (N bytes cut) ..." in the middle, fits in this many bytes.
constexpr std::size_t k_cut_marker_bytes = 40;

// `text` cut to at most `max_bytes`, markers included: a longer one loses
// the middle of each word over 512 bytes, from the first, while it is
// over, then its own middle, keeping the last quarter; each marker says how
// many bytes of the original were cut there (a text cut again counts what
// the first cut removed). No cut splits a UTF-8 character. Under
// 2 * k_cut_marker_bytes, the text's start without a marker. Cutting again
// at the same bound changes nothing. Every event's text is cut so.
std::string cut_middle(const std::string& text, std::size_t max_bytes);

// cut_middle() as many bytes as leaves printable()'s form of the result
// within `max_bytes` (escaping takes up to four bytes for one); the result
// itself is not escaped.
std::string cut_to_show(const std::string& text, std::size_t max_bytes);

// printable(cut_to_show()): at most `max_bytes` once escaped. An Error's
// message and context (error.cpp), a C program's message line.
std::string bounded(const std::string& text, std::size_t max_bytes);

// An event's text is cut to this many bytes, escaped or not (cut_to_show
// in api/client_impl.hpp, SerialSink): it may quote a hub's header or a
// path.
constexpr std::size_t k_max_event_text_bytes = 4096;

// Names quoted in a message are cut to this many bytes: room for a cache
// path or an archive entry's path of a few folders, and for every name the
// registry, the hub or a caller gives, which are shorter.
constexpr std::size_t k_max_quoted_bytes = 200;

// `text` as printable() shows it, in single quotes, cut to
// k_max_quoted_bytes with "..." when longer: a name from a caller, a hub or
// a file can be megabytes, and a message must stay a line. The one quoting
// of names in kernhub's messages.
std::string quoted_name(std::string_view text);
// The same for a C string, of which no more than k_max_quoted_bytes + 1
// bytes are read: a caller's string need not end within the bound.
std::string quoted_name(const char* text);

// Whether `text` is well-formed UTF-8 throughout.
bool is_utf8(std::string_view text);

// The candidate closest to `wanted` within two edits (a typo, for "did you
// mean"), the first of equals; "" when none is that close. A `wanted`
// over 64 bytes is no typo of a name (and the search is quadratic).
std::string nearest_name(std::string_view wanted, const std::vector<std::string_view>& candidates);

}  // namespace kernhub
