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
// is cut, then escaped, within its bound (bounded(), common/text.cpp).
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
