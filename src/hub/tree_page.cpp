// Tree listing pages: read with nlohmann's SAX interface, so a page costs
// the entries kept, not a document of every entry the hub sent (a DOM of a
// 64 MiB page takes about ten times that), and written back without a
// document. docs/ci-images.md, "Hub protocol".
#include <nlohmann/json.hpp>

#include "hub/hub_client.hpp"
#include "kernhub/error.hpp"

namespace kernhub::hub {

namespace {

using nlohmann::json;

// A field of an entry as last seen: absent, usable, or of the wrong type
// (a repeated key counts as in a document: the last one wins).
enum class Field { absent, ok, bad };

struct StringField {
    Field state = Field::absent;
    std::string value;
    void set(std::string&& text) {
        state = Field::ok;
        value = std::move(text);
    }
};

struct SizeField {
    Field state = Field::absent;
    std::uint64_t value = 0;
};

// One entry while its object is open.
struct PendingEntry {
    StringField path, type, oid, lfs_oid;
    SizeField size, lfs_size;
    Field lfs = Field::absent;  // ok: an object; bad: neither object nor null
    bool lfs_null = false;
};

class PageReader final : public nlohmann::json_sax<json> {
public:
    PageReader(const std::string& source, const PageFilter& filter, std::vector<TreeEntry>& out)
        : m_source(source), m_filter(filter), m_out(out) {}

    std::size_t seen() const { return m_seen; }
    bool stopped() const { return m_stopped; }

    bool null() override {
        if (entry_value()) {
            if (m_key == "lfs") {
                m_entry.lfs = Field::absent;
                m_entry.lfs_null = true;
            } else {
                wrong_type();
            }
        } else if (lfs_value()) {
            lfs_wrong_type();
        }
        return scalar();
    }
    bool boolean(bool) override { return other_scalar(); }
    bool number_integer(number_integer_t) override { return other_scalar(); }  // negative: never a size
    bool number_float(number_float_t, const string_t&) override { return other_scalar(); }
    bool number_unsigned(number_unsigned_t value) override {
        if (entry_value()) {
            if (m_key == "size") {
                m_entry.size = {Field::ok, value};
            } else {
                wrong_type();
            }
        } else if (lfs_value()) {
            if (m_lfs_key == "size") {
                m_entry.lfs_size = {Field::ok, value};
            } else {
                lfs_wrong_type();
            }
        }
        return scalar();
    }
    bool string(string_t& value) override {
        if (entry_value()) {
            if (m_key == "path") {
                m_entry.path.set(std::move(value));
            } else if (m_key == "type") {
                m_entry.type.set(std::move(value));
            } else if (m_key == "oid") {
                m_entry.oid.set(std::move(value));
            } else {
                wrong_type();
            }
        } else if (lfs_value()) {
            if (m_lfs_key == "oid") {
                m_entry.lfs_oid.set(std::move(value));
            } else {
                lfs_wrong_type();
            }
        }
        return scalar();
    }
    bool binary(binary_t&) override { return other_scalar(); }

    bool start_object(std::size_t) override {
        if (m_depth == 0) not_an_array();
        if (m_depth == 1) {
            m_entry = PendingEntry{};
        } else if (entry_value()) {
            if (m_key == "lfs") {
                m_entry.lfs = Field::ok;
                m_entry.lfs_null = false;
                m_entry.lfs_oid = {};
                m_entry.lfs_size = {};
                m_in_lfs = true;
            } else {
                wrong_type();
            }
        } else if (lfs_value()) {
            lfs_wrong_type();
        }
        ++m_depth;
        return true;
    }
    bool key(string_t& name) override {
        if (m_depth == 2) m_key = name;
        if (m_depth == 3 && m_in_lfs) m_lfs_key = name;
        return true;
    }
    bool end_object() override {
        --m_depth;
        if (m_depth == 2) m_in_lfs = false;
        if (m_depth == 1) return finish_entry();
        return true;
    }
    bool start_array(std::size_t) override {
        if (m_depth == 1) malformed_entry("an entry is not an object");
        if (entry_value()) {
            wrong_type();
        } else if (lfs_value()) {
            lfs_wrong_type();
        }
        ++m_depth;
        return true;
    }
    bool end_array() override {
        --m_depth;
        return true;
    }
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
        throw Error(ErrorCode::network, "hub sent malformed JSON for " + m_source + "; check the endpoint", e.what());
    }

private:
    // A scalar directly inside the entry object, under m_key.
    bool entry_value() const { return m_depth == 2; }
    // A scalar directly inside the entry's "lfs" object, under m_lfs_key.
    bool lfs_value() const { return m_depth == 3 && m_in_lfs; }

    bool scalar() {
        if (m_depth == 0) not_an_array();
        if (m_depth == 1) malformed_entry("an entry is not an object");
        return true;
    }
    bool other_scalar() {
        if (entry_value()) {
            wrong_type();
        } else if (lfs_value()) {
            lfs_wrong_type();
        }
        return scalar();
    }
    // A known key with a value of the wrong type; unknown keys may hold anything.
    void wrong_type() {
        if (m_key == "path") m_entry.path.state = Field::bad;
        if (m_key == "type") m_entry.type.state = Field::bad;
        if (m_key == "oid") m_entry.oid.state = Field::bad;
        if (m_key == "size") m_entry.size.state = Field::bad;
        if (m_key == "lfs") m_entry.lfs = Field::bad;
    }
    void lfs_wrong_type() {
        if (m_lfs_key == "oid") m_entry.lfs_oid.state = Field::bad;
        if (m_lfs_key == "size") m_entry.lfs_size.state = Field::bad;
    }

    [[noreturn]] void not_an_array() const {
        throw Error(ErrorCode::network, "hub tree listing for " + m_source + " is not a JSON array");
    }
    [[noreturn]] void malformed_entry(const std::string& why) const {
        throw Error(ErrorCode::network, "hub tree listing for " + m_source + " has a malformed entry", why);
    }

    // The same rules as for a document: path and type are strings; a file
    // has an unsigned size and a string oid; "lfs", unless null, is an
    // object with a string oid and maybe an unsigned size, the LFS object's.
    bool finish_entry() {
        PendingEntry& e = m_entry;
        if (e.path.state != Field::ok) malformed_entry("\"path\" is missing or not a string");
        if (e.type.state != Field::ok) malformed_entry("\"type\" is missing or not a string");
        TreeEntry entry;
        entry.is_file = e.type.value == "file";
        if (entry.is_file) {
            if (e.size.state != Field::ok) malformed_entry("\"size\" is missing or not a size");
            if (e.oid.state != Field::ok) malformed_entry("\"oid\" is missing or not a string");
            entry.size = e.size.value;
            entry.oid = std::move(e.oid.value);
            if (e.lfs == Field::bad) malformed_entry("\"lfs\" is not an object");
            if (e.lfs == Field::ok) {
                if (e.lfs_oid.state != Field::ok) malformed_entry("\"lfs.oid\" is missing or not a string");
                if (e.lfs_size.state == Field::bad) malformed_entry("\"lfs.size\" is not a size");
                entry.lfs_sha256 = std::move(e.lfs_oid.value);
                if (e.lfs_size.state == Field::ok) entry.size = e.lfs_size.value;
            }
        }
        entry.path = std::move(e.path.value);
        ++m_seen;
        if (m_seen > m_filter.max_entries) {
            m_stopped = true;
            return false;  // ends the parse: the caller refuses the listing
        }
        if (keep(entry)) m_out.push_back(std::move(entry));
        return true;
    }

    bool keep(const TreeEntry& entry) const {
        if (m_filter.files_only && !entry.is_file) return false;
        return entry.path.compare(0, m_filter.keep_prefix.size(), m_filter.keep_prefix) == 0;
    }

    const std::string& m_source;
    const PageFilter& m_filter;
    std::vector<TreeEntry>& m_out;
    std::size_t m_depth = 0;
    std::string m_key;      // the last key of the entry object
    std::string m_lfs_key;  // the last key of its "lfs" object
    bool m_in_lfs = false;
    PendingEntry m_entry;
    std::size_t m_seen = 0;
    bool m_stopped = false;
};

}  // namespace

std::size_t parse_tree_page_into(const std::string& text, const std::string& source, const PageFilter& filter,
                                 std::vector<TreeEntry>& out) {
    PageReader reader(source, filter, out);
    const bool complete = json::sax_parse(text, &reader);
    if (!complete && !reader.stopped()) {
        throw Error(ErrorCode::network, "hub sent malformed JSON for " + source + "; check the endpoint");
    }
    return reader.seen();
}

std::vector<TreeEntry> parse_tree_page(const std::string& text, const std::string& source) {
    std::vector<TreeEntry> entries;
    parse_tree_page_into(text, source, PageFilter{}, entries);
    return entries;
}

// The tree API's format, keys in the order a document would sort them, so
// the bytes are what json::dump() of the same entries gave.
std::string tree_to_json(const std::vector<TreeEntry>& entries) {
    std::string out = "[";
    for (const auto& entry : entries) {
        if (out.size() > 1) out += ',';
        out += '{';
        if (entry.is_file) {
            const std::string size = std::to_string(entry.size);
            if (entry.is_lfs()) out += "\"lfs\":{\"oid\":" + json(entry.lfs_sha256).dump() + ",\"size\":" + size + "},";
            out += "\"oid\":" + json(entry.oid).dump() + ",\"path\":" + json(entry.path).dump() + ",\"size\":" + size +
                   ",\"type\":\"file\"}";
        } else {
            out += "\"path\":" + json(entry.path).dump() + ",\"type\":\"directory\"}";
        }
    }
    out += ']';
    return out;
}

}  // namespace kernhub::hub
