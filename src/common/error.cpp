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
        case ErrorCode::interrupted:
            return "interrupted";
    }
    return "unknown error";
}

static std::string join_what(const std::string& message, const std::string& context) {
    return context.empty() ? message : message + " (" + context + ")";
}

// Messages quote hub answers, paths and registry text: every Error is one
// printable line, whoever shows it.
// NOLINTNEXTLINE(performance-unnecessary-value-param): the exported signature; const& would change its ABI.
Error::Error(ErrorCode code, const std::string& message, std::string context)
    : std::runtime_error(join_what(printable(message), printable(context))),
      m_code(code),
      m_message(printable(message)),
      m_context(printable(context)) {}

}  // namespace kernhub
