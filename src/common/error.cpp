#include "kernhub/error.hpp"

#include <algorithm>
#include <utility>

#include "common/hint.hpp"
#include "common/text.hpp"

namespace kernhub {

const char* to_string(ErrorCode code) noexcept {
    switch (code) {
        case ErrorCode::ok:
            return "ok";
        case ErrorCode::internal:
            return "internal error";
        case ErrorCode::usage:
            return "usage error";
        case ErrorCode::not_found:
            return "not found";
        case ErrorCode::verification:
            return "verification failed";
        case ErrorCode::network:
            return "network error";
        case ErrorCode::offline:
            return "offline";
        case ErrorCode::load:
            return "load failed";
        case ErrorCode::lock_outdated:
            return "lock out of date";
        case ErrorCode::kernel:
            return "kernel error";
        case ErrorCode::interrupted:
            return "interrupted";
    }
    return "unknown error";
}

static std::string join_what(const std::string& message, const std::string& context) {
    return context.empty() ? message : message + " (" + context + ")";
}

// A message may quote what a hub sent (a parser's error names the token it
// stopped at, which can be megabytes) or name paths of up to PATH_MAX, often
// more than one (the file, the folder in the way, the cache root): each part
// is cut before escaping. Long words (runs without a space: paths, tokens)
// are shortened first, keeping their start and end, so that the sentence
// around them (the reason and the next step, "…: Permission denied; run:
// chown …") survives; only if that is not enough is the middle of the whole
// text cut, keeping its last quarter, where messages put the reason. A cut
// never falls inside a UTF-8 character: the edges move to the nearest
// character start (at most three bytes, so text that is not UTF-8 is cut
// near where it would be).
static std::size_t char_start_back(const std::string& text, std::size_t at) {
    for (int step = 0;
         step < 3 && at > 0 && at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0U) == 0x80U; ++step) {
        --at;
    }
    return at;
}
static std::size_t char_start_forward(const std::string& text, std::size_t at) {
    for (int step = 0; step < 3 && at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0U) == 0x80U;
         ++step) {
        ++at;
    }
    return at;
}

// The marker of a cut, "...(N bytes cut)...", is at most this long.
constexpr std::size_t k_cut_marker_room = 40;

static std::string shorten_words(const std::string& text, std::size_t max_bytes) {
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
            if (length > excess + k_cut_marker_room + 2 * kept_each_end) {
                kept_each_end = (length - excess - k_cut_marker_room) / 2;
            }
            const std::size_t head_end = char_start_back(text, at + kept_each_end);
            const std::size_t tail_start = char_start_forward(text, end - kept_each_end);
            const std::size_t cut = tail_start - head_end;
            out.append(text, at, head_end - at);
            out += "...(" + std::to_string(cut) + " bytes cut)...";
            out.append(text, tail_start, end - tail_start);
            excess = cut >= excess + k_cut_marker_room ? 0 : excess + k_cut_marker_room - cut;
        } else {
            out.append(text, at, length);
        }
        if (end < text.size()) out += ' ';
        at = end + 1;
    }
    return out;
}

std::string cut_middle(const std::string& text, std::size_t max_bytes) {
    if (text.size() <= max_bytes) return text;
    std::string shorter = shorten_words(text, max_bytes);
    if (shorter.size() <= max_bytes) return shorter;
    const std::size_t tail = max_bytes / 4;
    const std::size_t head_end = char_start_back(shorter, max_bytes - tail);
    const std::size_t tail_start = char_start_forward(shorter, shorter.size() - tail);
    return shorter.substr(0, head_end) + "... (" + std::to_string(tail_start - head_end) + " bytes cut) ..." +
           shorter.substr(tail_start);
}

// Escaping takes up to four bytes for one (\xNN): when what is shown is
// over the bound, the text is cut shorter in proportion, and at last to a
// quarter, which shows within it whatever it holds.
std::string bounded(const std::string& text, std::size_t max_bytes) {
    std::string shown = printable(cut_middle(text, max_bytes));
    if (shown.size() <= max_bytes + k_cut_marker_room) return shown;
    shown = printable(cut_middle(text, max_bytes * max_bytes / shown.size()));
    if (shown.size() <= max_bytes + k_cut_marker_room) return shown;
    return printable(cut_middle(text, max_bytes / 4));
}

constexpr std::size_t k_max_message_bytes = 4096;
constexpr std::size_t k_max_context_bytes = 1024;

// The hint's name, in whichever vocabulary, follows the advice it belongs
// to in parentheses: the message's last clause is the advice.
static std::string with_hint(const std::string& message, const std::string& name) {
    return name.empty() ? message : message + " (" + name + ")";
}

// Messages quote hub answers, paths and registry text: every Error is one
// printable line, whoever shows it.
// NOLINTNEXTLINE(performance-unnecessary-value-param): the exported signature; const& would change its ABI.
Error::Error(ErrorCode code, const std::string& message, std::string context)
    : Error(code, message, ErrorHint{}, std::move(context)) {}

// NOLINTNEXTLINE(performance-unnecessary-value-param): context as in the constructor above.
Error::Error(ErrorCode code, const std::string& message, ErrorHint hint, std::string context)
    : std::runtime_error(std::string()),
      m_code(code),
      m_context(bounded(context, k_max_context_bytes)),
      m_hint(std::move(hint)),
      m_plain_message(bounded(message, k_max_message_bytes)) {
    m_message = with_hint(m_plain_message, printable(hint::cpp_name(m_hint)));
    std::runtime_error::operator=(std::runtime_error(join_what(m_message, m_context)));
}

std::string Error::what_with(const std::string& hint_name) const {
    if (m_hint.kind == ErrorHint::Kind::none) return what();
    return join_what(with_hint(m_plain_message, printable(hint_name)), m_context);
}

}  // namespace kernhub
