#include "common/text.hpp"

#include <algorithm>

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

}  // namespace kernhub
