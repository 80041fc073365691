#include "kernhub/error.hpp"

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
// stopped at, which can be megabytes) or a path of up to PATH_MAX: each part
// is cut before escaping. The cut is in the middle, keeping the last quarter,
// because messages end with the reason and the next step ("cannot create
// PATH: No space left on device; free some space"), which a cut at the end
// would lose with the long path before them.
static std::string bounded(const std::string& text, std::size_t max_bytes) {
    if (text.size() <= max_bytes) return printable(text);
    const std::size_t tail = max_bytes / 4;
    const std::size_t head = max_bytes - tail;
    return printable(text.substr(0, head)) + "... (" + std::to_string(text.size() - max_bytes) + " bytes cut) ..." +
           printable(text.substr(text.size() - tail));
}

constexpr std::size_t k_max_message_bytes = 4096;
constexpr std::size_t k_max_context_bytes = 1024;

// Messages quote hub answers, paths and registry text: every Error is one
// printable line, whoever shows it.
// NOLINTNEXTLINE(performance-unnecessary-value-param): the exported signature; const& would change its ABI.
Error::Error(ErrorCode code, const std::string& message, std::string context)
    : std::runtime_error(join_what(bounded(message, k_max_message_bytes), bounded(context, k_max_context_bytes))),
      m_code(code),
      m_message(bounded(message, k_max_message_bytes)),
      m_context(bounded(context, k_max_context_bytes)) {}

}  // namespace kernhub
