// What a response's header lines say: the status line and header fields as
// libcurl hands them over, the waits a hub asks for (Retry-After, RateLimit)
// and the range a 206 carries (Content-Range).
#include <algorithm>
#include <charconv>
#include <ctime>
#include <string_view>
#include <system_error>

#include "common/text.hpp"
#include "http/curl_api.hpp"
#include "http/session_detail.hpp"

namespace kernhub::http {

namespace {

using std::chrono::milliseconds;

// Hub-requested waits above this many seconds all read as "too long"; it
// keeps the conversion to milliseconds from overflowing.
constexpr std::uint64_t k_max_wait_seconds_parsed = 1'000'000'000'000;

// A plain run of decimal digits (no sign, no space); nullopt for anything
// else. Values above `saturate` read as `saturate`.
std::optional<std::uint64_t> parse_digits(std::string_view text, std::uint64_t saturate) {
    if (text.empty()) return std::nullopt;
    std::uint64_t value = 0;
    for (char c : text) {
        if (c < '0' || c > '9') return std::nullopt;
        value = value >= saturate ? saturate : std::min(saturate, value * 10 + static_cast<std::uint64_t>(c - '0'));
    }
    return value;
}

milliseconds seconds_to_ms(std::uint64_t seconds) {
    return milliseconds(static_cast<milliseconds::rep>(std::min(seconds, k_max_wait_seconds_parsed) * 1000));
}

// Retry-After: delta-seconds or an HTTP-date.
std::optional<milliseconds> retry_after(const Response& response, Clock& clock) {
    const std::string value = response.header("retry-after");
    if (value.empty()) return std::nullopt;
    if (auto seconds = parse_digits(value, k_max_wait_seconds_parsed)) return seconds_to_ms(*seconds);
    const std::time_t when = curl_api().getdate(value.c_str(), nullptr);
    if (when == -1) return std::nullopt;
    // In seconds first: a date centuries ahead would overflow the clock's
    // nanoseconds; it saturates as a long delta-seconds does.
    const std::int64_t now_ms = std::chrono::duration_cast<milliseconds>(clock.wall_now().time_since_epoch()).count();
    const std::int64_t now_s = now_ms / 1000;
    const auto when_s = static_cast<std::int64_t>(when);
    if (when_s <= now_s - 1) return milliseconds(0);
    if (static_cast<std::uint64_t>(when_s - now_s) >= k_max_wait_seconds_parsed) {
        return seconds_to_ms(k_max_wait_seconds_parsed);
    }
    return milliseconds(std::max<std::int64_t>(0, when_s * 1000 - now_ms));
}

// The reset time `t` of one RateLimit item such as `"api";r=0;t=55` when
// its quota is exhausted (`r=0`); nullopt otherwise.
std::optional<std::uint64_t> exhausted_reset(std::string_view item) {
    std::optional<std::uint64_t> remaining;
    std::optional<std::uint64_t> reset;
    // The first member is the quota's name; parameters follow after ';'.
    for (std::size_t semi = item.find(';'); semi != std::string_view::npos;) {
        std::size_t next = item.find(';', semi + 1);
        std::string_view param = item.substr(semi + 1, next == std::string_view::npos ? next : next - semi - 1);
        std::size_t eq = param.find('=');
        if (eq != std::string_view::npos) {
            const std::string key = ascii_lowercase(trim(param.substr(0, eq)));
            auto number = parse_digits(trim(param.substr(eq + 1)), k_max_wait_seconds_parsed);
            if (key == "r") remaining = number;
            if (key == "t") reset = number;
        }
        semi = next;
    }
    if (remaining && *remaining == 0) return reset;
    return std::nullopt;
}

// The longest reset time `t` among the exhausted quotas (`r=0`) of a
// RateLimit field such as `"api";r=0;t=55, "burst";r=3;t=1`.
std::optional<milliseconds> ratelimit_reset(const Response& response) {
    const std::string value = response.header("ratelimit");
    std::optional<std::uint64_t> longest;
    std::size_t item_start = 0;
    while (item_start < value.size()) {
        std::size_t item_end = std::min(value.find(',', item_start), value.size());
        std::string_view item(value.data() + item_start, item_end - item_start);
        if (auto reset = exhausted_reset(item)) longest = std::max(longest.value_or(0), *reset);
        item_start = item_end + 1;
    }
    if (!longest) return std::nullopt;
    return seconds_to_ms(*longest);
}

// "HTTP/1.1 200 OK": three digits after the first space; anything else is
// status 0, which no caller takes for success.
long parse_status_line(const std::string& line) {
    auto space = line.find(' ');
    long status = 0;
    if (space != std::string::npos) {
        const char* first = line.c_str() + space + 1;
        const auto parsed = std::from_chars(first, line.c_str() + line.size(), status);
        if (parsed.ec != std::errc() || status < 100 || status > 999) status = 0;
    }
    return status;
}

}  // namespace

std::optional<milliseconds> requested_wait(const Response& response, Clock& clock) {
    auto after = retry_after(response, clock);
    auto reset = ratelimit_reset(response);
    if (after && reset) return std::max(*after, *reset);
    return after ? after : reset;
}

namespace detail {

std::optional<ContentRange> parse_content_range(const std::string& value) {
    constexpr std::string_view k_unit = "bytes ";
    constexpr std::uint64_t k_no_saturation = ~std::uint64_t{0};
    constexpr std::size_t k_max_digits = 19;  // fits in 64 bits
    if (value.size() < k_unit.size() || ascii_lowercase(value.substr(0, k_unit.size())) != k_unit) {
        return std::nullopt;
    }
    std::string_view rest(value);
    rest.remove_prefix(k_unit.size());
    auto number = [&](std::string_view digits) {
        return digits.size() > k_max_digits ? std::nullopt : parse_digits(digits, k_no_saturation);
    };
    std::size_t dash = rest.find('-');
    std::size_t slash = rest.find('/');
    if (dash == std::string_view::npos || slash == std::string_view::npos || dash > slash) return std::nullopt;
    auto first = number(rest.substr(0, dash));
    auto last = number(rest.substr(dash + 1, slash - dash - 1));
    std::string_view total_text = rest.substr(slash + 1);
    auto total = total_text == "*" ? std::optional<std::uint64_t>() : number(total_text);
    if (!first || !last || *last < *first || (total_text != "*" && (!total || *last >= *total))) {
        return std::nullopt;
    }
    return ContentRange{*first, *last, total};
}

// The status tells the body callback whether bytes belong to the target or
// to an error or redirect body.
std::size_t on_header(char* data, std::size_t size, std::size_t count, void* user) {
    auto* attempt = static_cast<Session::Attempt*>(user);
    try {
        std::string line(data, size * count);
        if (line.rfind("HTTP/", 0) == 0) {
            attempt->response.headers.clear();
            attempt->response.status = parse_status_line(line);
            return size * count;
        }
        auto colon = line.find(':');
        if (colon != std::string::npos) {
            attempt->response.headers[ascii_lowercase(line.substr(0, colon))] = trim(line.substr(colon + 1));
        }
        return size * count;
    } catch (...) {
        attempt->target_error = std::current_exception();  // nothing may unwind through libcurl
        return 0;
    }
}

}  // namespace detail

}  // namespace kernhub::http
