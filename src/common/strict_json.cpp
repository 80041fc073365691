// The strict, bounded JSON reader: nlohmann's SAX parser feeding its own
// DOM builder, with the checks in between.
#include "common/strict_json.hpp"

#include <algorithm>
#include <unordered_set>

#include "common/text.hpp"

namespace kernhub::strict_json {

using nlohmann::json;

namespace {

// Tokens between two looks at the cancel flag.
constexpr std::size_t k_cancel_stride = 512;

class Builder {
public:
    Builder(json& document, const Limits& limits) : m_dom(document, false), m_limits(limits) {}

    bool null() { return value() && m_dom.null(); }
    bool boolean(bool v) { return value() && m_dom.boolean(v); }
    bool number_integer(json::number_integer_t v) { return value() && m_dom.number_integer(v); }
    bool number_unsigned(json::number_unsigned_t v) { return value() && m_dom.number_unsigned(v); }
    bool number_float(json::number_float_t v, const std::string& text) {
        return value() && m_dom.number_float(v, text);
    }
    bool string(std::string& v) { return value() && m_dom.string(v); }
    bool binary(json::binary_t& v) { return value() && m_dom.binary(v); }
    bool start_object(std::size_t size) { return value() && enter(true) && m_dom.start_object(size); }
    bool start_array(std::size_t size) { return value() && enter(false) && m_dom.start_array(size); }
    bool end_object() {
        leave();
        return m_dom.end_object();
    }
    bool end_array() {
        leave();
        return m_dom.end_array();
    }
    bool key(std::string& name) {
        if (!tick()) return false;
        Frame& frame = m_frames.back();
        m_path.back().key = name;
        if (!frame.keys.insert(name).second) return stop(Problem::Kind::duplicate_key);
        if (!count(frame)) return false;
        return m_dom.key(name);
    }
    bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& error) {
        // A parse_error knows its byte; others (a number too large for a
        // double: out_of_range) come at the position the lexer reached.
        const auto* parse = dynamic_cast<const json::parse_error*>(&error);
        Problem problem;
        problem.kind = Problem::Kind::syntax;
        problem.byte = parse != nullptr ? parse->byte : position;
        problem.what = error.what();
        m_problem = std::move(problem);
        return false;
    }

    std::optional<Problem>& problem() { return m_problem; }

private:
    // One open container; its Step is m_path's entry at the same depth,
    // kept apart so that cap_at and a problem read the path without a copy.
    struct Frame {
        std::unordered_set<std::string> keys;
        std::size_t members = 0;
        MemberCap cap;
    };

    bool tick() {
        if (++m_tokens % k_cancel_stride == 0 && m_limits.cancel != nullptr && m_limits.cancel->load()) {
            return stop(Problem::Kind::cancelled);
        }
        return true;
    }

    // A value starts: in an array it is a member.
    bool value() {
        if (!tick()) return false;
        if (++m_values > m_limits.max_values) {
            Problem problem = make(Problem::Kind::too_many_values);
            problem.cap = MemberCap{m_limits.max_values, "k_max_json_values", {}};
            m_problem = std::move(problem);
            return false;
        }
        if (m_frames.empty() || m_path.back().object) return true;
        return count(m_frames.back());
    }

    bool count(Frame& frame) {
        if (frame.cap.limit != 0 && ++frame.members > frame.cap.limit) {
            Problem problem = make(Problem::Kind::too_many_members);
            problem.cap = frame.cap;
            m_problem = std::move(problem);
            return false;
        }
        return true;
    }

    bool enter(bool object) {
        if (m_frames.size() >= m_limits.max_depth) {
            Problem problem = make(Problem::Kind::too_deep);
            problem.cap = MemberCap{m_limits.max_depth, m_limits.depth_name, {}};
            m_problem = std::move(problem);
            return false;
        }
        Frame frame;
        frame.cap = m_limits.members;
        if (m_limits.cap_at) {
            if (std::optional<MemberCap> cap = m_limits.cap_at(m_path)) frame.cap = std::move(*cap);
        }
        m_frames.push_back(std::move(frame));
        m_path.push_back(Step{object, {}});
        return true;
    }

    void leave() {
        m_frames.pop_back();
        m_path.pop_back();
    }

    Problem make(Problem::Kind kind) const {
        Problem problem;
        problem.kind = kind;
        problem.path = m_path;
        return problem;
    }

    bool stop(Problem::Kind kind) {
        m_problem = make(kind);
        return false;
    }

    nlohmann::detail::json_sax_dom_parser<json> m_dom;
    const Limits& m_limits;
    std::vector<Frame> m_frames;
    std::vector<Step> m_path;
    std::size_t m_tokens = 0;
    std::size_t m_values = 0;
    std::optional<Problem> m_problem;
};

}  // namespace

std::string syntax_position(const Problem& problem, std::string_view text) {
    const std::size_t offset = std::min<std::size_t>(problem.byte == 0 ? 0 : problem.byte - 1, text.size());
    const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<long>(offset), '\n');
    const std::size_t line_start = text.rfind('\n', offset == 0 ? 0 : offset - 1);
    const std::size_t column = line_start == std::string_view::npos || offset == 0 ? offset + 1 : offset - line_start;
    std::string detail = problem.what;
    const std::size_t column_word = detail.find("column ");
    const std::size_t colon = detail.find(": ", column_word == std::string::npos ? 0 : column_word);
    if (colon != std::string::npos) {
        detail = detail.substr(colon + 2);
    } else if (const std::size_t tag_end = detail.find("] "); tag_end != std::string::npos) {
        detail = detail.substr(tag_end + 2);  // "[json.exception.out_of_range.406] number overflow ..."
    }
    return "at line " + std::to_string(line) + ", column " + std::to_string(column) + " (byte " +
           std::to_string(problem.byte) + "): " + detail;
}

Parsed parse(std::string_view text, const Limits& limits) {
    Parsed parsed;
    Builder builder(parsed.document, limits);
    const bool complete = json::sax_parse(text.begin(), text.end(), &builder);
    if (!complete || builder.problem()) {
        parsed.problem = std::move(builder.problem());
        if (!parsed.problem) parsed.problem = Problem{};  // sax_parse said no without saying why
        parsed.document = nullptr;
    }
    return parsed;
}

nlohmann::json parse_or_discard(std::string_view text) {
    Limits limits;
    limits.max_depth = k_max_json_depth;
    limits.depth_name = "k_max_json_depth";
    Parsed parsed = parse(text, limits);
    if (parsed.problem) return nlohmann::json(nlohmann::json::value_t::discarded);
    return std::move(parsed.document);
}

std::string describe(const Problem& problem, std::string_view text) {
    switch (problem.kind) {
        case Problem::Kind::syntax:
            return "invalid JSON " + syntax_position(problem, text) + "; fix the JSON syntax there";
        case Problem::Kind::too_deep:
            return "nested deeper than " + std::to_string(problem.cap.limit) + " levels (" + problem.cap.limit_name +
                   ")";
        case Problem::Kind::too_many_members:
            return (problem.cap.what.empty() ? std::string("an object or array") : problem.cap.what) +
                   " has more than " + std::to_string(problem.cap.limit) + " entries (" + problem.cap.limit_name + ")";
        case Problem::Kind::too_many_values:
            return "holds more than " + std::to_string(problem.cap.limit) + " values (" + problem.cap.limit_name + ")";
        case Problem::Kind::duplicate_key:
            return "key " + quoted_name(problem.path.empty() ? std::string() : problem.path.back().key) +
                   " appears twice in one object";
        case Problem::Kind::cancelled:
            return "reading was cancelled";
    }
    return "invalid JSON";
}

}  // namespace kernhub::strict_json
