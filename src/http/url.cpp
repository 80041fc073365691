#include <algorithm>
#include <cctype>

#include "common/text.hpp"
#include "http/http.hpp"

namespace kernhub::http {

std::optional<Url> parse_url(const std::string& url) {
    auto scheme_end = url.find("://");
    if (scheme_end == std::string::npos) return std::nullopt;
    Url parsed;
    parsed.scheme = ascii_lowercase(url.substr(0, scheme_end));
    if (parsed.scheme != "http" && parsed.scheme != "https") return std::nullopt;
    auto authority_start = scheme_end + 3;
    auto target_start = url.find_first_of("/?#", authority_start);
    std::string authority = url.substr(authority_start, target_start - authority_start);
    parsed.target = target_start == std::string::npos ? "/" : url.substr(target_start);
    if (parsed.target[0] != '/') parsed.target.insert(0, "/");
    if (auto at = authority.rfind('@'); at != std::string::npos) authority = authority.substr(at + 1);
    // Bracketed IPv6 literals keep their colons.
    auto port_sep = authority.rfind(':');
    if (port_sep != std::string::npos && authority.find(']', port_sep) == std::string::npos) {
        std::string port = authority.substr(port_sep + 1);
        authority = authority.substr(0, port_sep);
        if (port.empty() || port.size() > 5 ||
            !std::all_of(port.begin(), port.end(), [](unsigned char c) { return std::isdigit(c); })) {
            return std::nullopt;
        }
        parsed.port = std::stoi(port);
        if (parsed.port < 1 || parsed.port > 65535) return std::nullopt;
    } else {
        parsed.port = parsed.scheme == "https" ? 443 : 80;
    }
    if (authority.empty()) return std::nullopt;
    parsed.host = ascii_lowercase(authority);
    return parsed;
}

bool same_origin(const std::string& a, const std::string& b) {
    auto ua = parse_url(a);
    auto ub = parse_url(b);
    return ua && ub && ua->scheme == ub->scheme && ua->host == ub->host && ua->port == ub->port;
}

std::string redact(const std::string& url) {
    std::string out = url;
    if (auto q = out.find_first_of("?#"); q != std::string::npos) out.erase(q);
    auto scheme_end = out.find("://");
    if (scheme_end != std::string::npos) {
        auto authority_start = scheme_end + 3;
        auto authority_end = out.find('/', authority_start);
        auto at = out.rfind('@', authority_end);
        if (at != std::string::npos && at >= authority_start) out.erase(authority_start, at + 1 - authority_start);
    }
    return out;
}

std::string Response::header(const std::string& name) const {
    auto it = headers.find(ascii_lowercase(name));
    return it == headers.end() ? std::string() : it->second;
}

}  // namespace kernhub::http
