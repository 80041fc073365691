#include "common/text.hpp"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <utility>

namespace kernhub {

std::string trim(std::string_view text) {
    constexpr std::string_view k_space = " \t\n\v\f\r";
    auto begin = text.find_first_not_of(k_space);
    if (begin == std::string_view::npos) return {};
    auto end = text.find_last_not_of(k_space);
    return std::string(text.substr(begin, end - begin + 1));
}

std::string ascii_lowercase(std::string_view text) {
    std::string out(text);
    for (char& c : out) {
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    }
    return out;
}

namespace {

// Length of the well-formed UTF-8 sequence at the start of `text`, or 0
// when it does not start one (stray continuation byte, overlong form,
// surrogate, past U+10FFFF, or cut short).
std::size_t utf8_sequence(std::string_view text) {
    const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
    const unsigned char lead = byte(0);
    std::size_t length = 0;
    unsigned char low = 0x80;
    unsigned char high = 0xbf;
    if (lead >= 0xc2 && lead <= 0xdf) {
        length = 2;
    } else if (lead >= 0xe0 && lead <= 0xef) {
        length = 3;
        if (lead == 0xe0) low = 0xa0;   // overlong
        if (lead == 0xed) high = 0x9f;  // surrogates
    } else if (lead >= 0xf0 && lead <= 0xf4) {
        length = 4;
        if (lead == 0xf0) low = 0x90;   // overlong
        if (lead == 0xf4) high = 0x8f;  // past U+10FFFF
    } else {
        return 0;
    }
    if (text.size() < length) return 0;
    if (byte(1) < low || byte(1) > high) return 0;
    for (std::size_t i = 2; i < length; ++i) {
        if (byte(i) < 0x80 || byte(i) > 0xbf) return 0;
    }
    return length;
}

void append_hex_escape(std::string& out, unsigned value, const char* prefix, int digits) {
    static constexpr char k_hex[] = "0123456789abcdef";
    out += prefix;
    for (int shift = (digits - 1) * 4; shift >= 0; shift -= 4) out += k_hex[(value >> shift) & 0xfu];
}

// The code point of a well-formed UTF-8 sequence of two to four bytes.
unsigned decode(std::string_view sequence) {
    const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(sequence[i]) & 0x3fu; };
    const auto lead = static_cast<unsigned char>(sequence[0]);
    if (sequence.size() == 2) return ((lead & 0x1fu) << 6) | byte(1);
    if (sequence.size() == 3) return ((lead & 0x0fu) << 12) | (byte(1) << 6) | byte(2);
    return ((lead & 0x07u) << 18) | (byte(1) << 12) | (byte(2) << 6) | byte(3);
}

// Invisible characters that change what a reader sees: line and paragraph
// separators and the bidirectional overrides, isolates and marks
// (U+2028..U+202E, U+2066..U+2069, U+061C) break a line or reorder it; the
// soft hyphen, the Mongolian vowel separator, the zero-width spaces,
// joiners and direction marks (U+00AD, U+180E, U+200B..U+200F), the word
// joiner and invisible operators (U+2060..U+2064), the deprecated format
// controls (U+206A..U+206F), the byte order mark (U+FEFF), the
// interlinear annotation controls (U+FFF9..U+FFFB) and the tag characters
// (U+E0000..U+E007F) make two different names look the same.
bool is_invisible_format(unsigned code) {
    return code == 0xad || code == 0x61c || code == 0x180e || (code >= 0x200b && code <= 0x200f) ||
           (code >= 0x2028 && code <= 0x202e) || (code >= 0x2060 && code <= 0x2064) ||
           (code >= 0x2066 && code <= 0x206f) || code == 0xfeff || (code >= 0xfff9 && code <= 0xfffb) ||
           (code >= 0xe0000 && code <= 0xe007f);
}

// The escape printable() shows for the byte at text[i] when it is not to be
// kept, with the number of bytes it stands for; an empty escape keeps them.
std::pair<std::string, std::size_t> escape_at(std::string_view text, std::size_t i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte >= 0x20 && byte < 0x7f) return {"", 1};
    if (byte == '\n') return {"\\n", 1};
    if (byte == '\r') return {"\\r", 1};
    if (byte == '\t') return {"\\t", 1};
    std::string escape;
    if (byte < 0x80) {
        append_hex_escape(escape, byte, "\\x", 2);  // other C0 controls, DEL
        return {escape, 1};
    }
    const std::size_t length = utf8_sequence(text.substr(i));
    if (length == 0) {
        append_hex_escape(escape, byte, "\\x", 2);  // not UTF-8: a raw 0x9b is CSI to some terminals
        return {escape, 1};
    }
    const auto second = static_cast<unsigned char>(text[i + 1]);
    if (byte == 0xc2 && second < 0xa0) {
        append_hex_escape(escape, second, "\\u00", 2);  // U+0080..U+009F: the C1 controls
        return {escape, 2};
    }
    if (const unsigned code = decode(text.substr(i, length)); is_invisible_format(code)) {
        if (code > 0xffff) {
            append_hex_escape(escape, code, "\\U", 8);
        } else {
            append_hex_escape(escape, code, "\\u", 4);
        }
        return {escape, length};
    }
    return {"", length};
}

}  // namespace

bool is_utf8(std::string_view text) {
    for (std::size_t i = 0; i < text.size();) {
        if (static_cast<unsigned char>(text[i]) < 0x80) {
            ++i;
            continue;
        }
        const std::size_t length = utf8_sequence(text.substr(i));
        if (length == 0) return false;
        i += length;
    }
    return true;
}

std::string printable(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    std::size_t i = 0;
    while (i < text.size()) {
        auto [escape, length] = escape_at(text, i);
        if (escape.empty()) {
            out.append(text.substr(i, length));
        } else {
            out += escape;
        }
        i += length;
    }
    return out;
}

std::string quoted_name(std::string_view text) {
    const bool cut = text.size() > k_max_quoted_bytes;
    return "'" + printable(text.substr(0, k_max_quoted_bytes)) + (cut ? "...'" : "'");
}

std::string quoted_name(const char* text) {
    return quoted_name(std::string_view(text, ::strnlen(text, k_max_quoted_bytes + 1)));
}

namespace {

std::size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<std::size_t> previous(b.size() + 1);
    std::vector<std::size_t> current(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) previous[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        current[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const std::size_t substitute = previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
            current[j] = std::min({previous[j] + 1, current[j - 1] + 1, substitute});
        }
        std::swap(previous, current);
    }
    return previous[b.size()];
}

}  // namespace

std::string nearest_name(std::string_view wanted, const std::vector<std::string_view>& candidates) {
    // Names longer than this are not a typo of a setting; the distance is
    // quadratic in the lengths.
    constexpr std::size_t k_max_compared_bytes = 64;
    if (wanted.size() > k_max_compared_bytes) return {};
    std::string_view best_name;
    std::size_t best = 3;  // farther than two edits is a different word, not a typo
    for (std::string_view candidate : candidates) {
        const std::size_t distance = edit_distance(wanted, candidate);
        if (distance < best) {
            best = distance;
            best_name = candidate;
        }
    }
    return std::string(best_name);
}

// Cutting. Long words (runs without a space: paths, tokens) are shortened
// first, each keeping its start and end, so that the sentence around them
// (the reason and the next step, "...: Permission denied; run: chown ...")
// survives; only if that is not enough is the middle of the whole text
// cut, keeping its last quarter, where messages put the reason. A cut never
// falls inside a UTF-8 character: its edges move to the nearest character
// start (at most three bytes, so text that is not UTF-8 is cut near where
// it would be). Every marker fits in k_cut_marker_bytes.
namespace {

bool continuation_byte(char c) {
    return (static_cast<unsigned char>(c) & 0xC0U) == 0x80U;
}

std::size_t char_start_back(const std::string& text, std::size_t at) {
    for (int step = 0; step < 3 && at > 0 && at < text.size() && continuation_byte(text[at]); ++step) --at;
    return at;
}

std::size_t char_start_forward(const std::string& text, std::size_t at) {
    for (int step = 0; step < 3 && at < text.size() && continuation_byte(text[at]); ++step) ++at;
    return at;
}

std::string shorten_words(const std::string& text, std::size_t max_bytes) {
    constexpr std::size_t k_long_word = 512;
    constexpr std::size_t k_kept_each_end = 160;
    std::string out;
    out.reserve(std::min(text.size(), max_bytes * 2));
    std::size_t excess = text.size() - max_bytes;
    for (std::size_t at = 0; at < text.size();) {
        std::size_t end = text.find(' ', at);
        if (end == std::string::npos) end = text.size();
        const std::size_t length = end - at;
        if (excess > 0 && length > k_long_word) {
            // No more than the text is over, and room for the marker.
            std::size_t kept_each_end = k_kept_each_end;
            if (length > excess + k_cut_marker_bytes + 2 * kept_each_end) {
                kept_each_end = (length - excess - k_cut_marker_bytes) / 2;
            }
            const std::size_t head_end = char_start_back(text, at + kept_each_end);
            const std::size_t tail_start = char_start_forward(text, end - kept_each_end);
            const std::size_t cut = tail_start - head_end;
            out.append(text, at, head_end - at);
            out += "...(" + std::to_string(cut) + " bytes cut)...";
            out.append(text, tail_start, end - tail_start);
            excess = cut >= excess + k_cut_marker_bytes ? 0 : excess + k_cut_marker_bytes - cut;
        } else {
            out.append(text, at, length);
        }
        if (end < text.size()) out += ' ';
        at = end + 1;
    }
    return out;
}

// What earlier cuts removed, as their markers "(N bytes cut)" in
// text[from, to) say (a marker goes with its dots); a marker astride an edge widens the range to take it
// whole. So a text cut twice (a retry's message quoting an Error's, already
// cut) still says how much of the original is gone.
struct EarlierCuts {
    std::size_t original_bytes = 0;  // the markers' N, added up
    std::size_t marker_bytes = 0;    // the markers' own length
};
EarlierCuts earlier_cuts(const std::string& text, std::size_t& from, std::size_t& to) {
    constexpr std::string_view k_tail = " bytes cut)";
    constexpr std::size_t k_max_digits = 19;  // std::stoull cannot overflow
    EarlierCuts earlier;
    const std::size_t look_from = from > k_cut_marker_bytes ? from - k_cut_marker_bytes : 0;
    for (std::size_t at = text.find(k_tail, look_from); at != std::string::npos && at <= to + k_max_digits + 1;
         at = text.find(k_tail, at + 1)) {
        std::size_t open = at;
        while (open > 0 && std::isdigit(static_cast<unsigned char>(text[open - 1])) != 0) --open;
        if (open == at || open == 0 || text[open - 1] != '(' || at - open > k_max_digits) continue;
        // With its dots: "... (N bytes cut) ..." or "...(N bytes cut)...".
        std::size_t start = open - 1;
        std::size_t end = at + k_tail.size();
        for (std::string_view dots : {"... ", "..."}) {
            if (start >= dots.size() && text.compare(start - dots.size(), dots.size(), dots) == 0) {
                start -= dots.size();
                break;
            }
        }
        for (std::string_view dots : {" ...", "..."}) {
            if (text.compare(end, dots.size(), dots) == 0) {
                end += dots.size();
                break;
            }
        }
        if (end <= from || start >= to) continue;  // outside the cut
        from = std::min(from, start);
        to = std::max(to, end);
        earlier.original_bytes += std::stoull(text.substr(open, at - open));
        earlier.marker_bytes += end - start;
    }
    return earlier;
}

}  // namespace

std::string cut_middle(const std::string& text, std::size_t max_bytes) {
    if (text.size() <= max_bytes) return text;
    if (max_bytes < 2 * k_cut_marker_bytes) return text.substr(0, char_start_back(text, max_bytes));
    const std::size_t room = max_bytes - k_cut_marker_bytes;
    std::string shorter = shorten_words(text, room);
    if (shorter.size() <= max_bytes) return shorter;
    const std::size_t tail = room / 4;
    std::size_t head_end = char_start_back(shorter, room - tail);
    std::size_t tail_start = char_start_forward(shorter, shorter.size() - tail);
    // Bytes of this text cut now, less the markers of earlier cuts that go
    // with them, plus what those cuts removed.
    const EarlierCuts earlier = earlier_cuts(shorter, head_end, tail_start);
    const std::size_t cut = tail_start - head_end - earlier.marker_bytes + earlier.original_bytes;
    return shorter.substr(0, head_end) + "... (" + std::to_string(cut) + " bytes cut) ..." + shorter.substr(tail_start);
}

// Escaping takes up to four bytes for one (\\xNN): when what is shown is
// over the bound, the text is cut shorter in proportion, and at last to a
// quarter, which shows within the bound whatever it holds.
std::string cut_to_show(const std::string& text, std::size_t max_bytes) {
    std::string cut = cut_middle(text, max_bytes);
    std::size_t shown = printable(cut).size();
    if (shown <= max_bytes) return cut;
    cut = cut_middle(text, max_bytes * max_bytes / shown);
    if (printable(cut).size() <= max_bytes) return cut;
    return cut_middle(text, max_bytes / 4);
}

std::string bounded(const std::string& text, std::size_t max_bytes) {
    return printable(cut_to_show(text, max_bytes));
}

}  // namespace kernhub
