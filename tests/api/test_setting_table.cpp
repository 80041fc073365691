// The one table of settings (src/api/setting_table.cpp) against what it
// drives: docs/configuration.md's generated table, the environment
// variables resolve_settings reads, kh_hub_set's keys, and the warnings
// for names that are no setting.
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "api/setting_table.hpp"
#include "api/settings.hpp"
#include "support/build_paths.hpp"
#include "support/slurp.hpp"

using namespace kernhub;
namespace fs = std::filesystem;

namespace {

constexpr const char* k_begin = "<!-- settings-table:begin -->";
constexpr const char* k_end = "<!-- settings-table:end -->";

std::string code(std::string_view text) {
    return text.empty() ? "" : "`" + std::string(text) + "`";
}

const char* type_name(api::SettingType type) {
    switch (type) {
        case api::SettingType::text:
            return "text";
        case api::SettingType::path:
            return "path";
        case api::SettingType::url:
            return "URL";
        case api::SettingType::list:
            return "list";
        case api::SettingType::names:
            return "names";
        case api::SettingType::flag:
            return "switch";
        case api::SettingType::strict:
            return "strict switch";
        case api::SettingType::integer:
            return "integer";
        case api::SettingType::bytes:
            return "bytes";
    }
    return "?";
}

// The table as docs/configuration.md holds it between the markers.
std::string render_table() {
    std::ostringstream out;
    out << k_begin << "\n"
        << "<!-- Generated from src/api/setting_table.cpp by tests/api/test_setting_table.cpp; do not edit. -->\n"
        << "| variable | `Options` field | C key | type | range | default | what it does |\n"
        << "|---|---|---|---|---|---|---|\n";
    for (const api::SettingSpec& spec : api::setting_table()) {
        out << "| " << code(spec.env) << " | " << code(spec.field) << " | " << code(spec.c_key) << " | "
            << type_name(spec.type) << " | " << api::setting_range_text(spec) << " | "
            << api::setting_default_text(spec) << " | " << spec.doc << " |\n";
    }
    out << k_end;
    return out.str();
}

cache::EnvLookup env_of(std::map<std::string, std::string> values) {
    return [values](const std::string& name) -> std::optional<std::string> {
        auto it = values.find(name);
        if (it == values.end()) return std::nullopt;
        return it->second;
    };
}

}  // namespace

TEST_CASE("docs/configuration.md's settings table is the one rendered from the settings table", "[api]") {
    const fs::path page = fs::path(test::build::source_dir) / "docs" / "configuration.md";
    const std::string text = test::slurp(page.string());
    const std::size_t begin = text.find(k_begin);
    const std::size_t end = text.find(k_end);
    REQUIRE(begin != std::string::npos);
    REQUIRE(end != std::string::npos);
    const std::string found = text.substr(begin, end + std::string(k_end).size() - begin);
    const std::string wanted = render_table();
    const char* update = std::getenv("KERNHUB_TEST_UPDATE_DOCS");
    if (found != wanted && update != nullptr && std::string(update) == "1") {
        // Regenerate: the page with the table replaced, written whole.
        const fs::path temp = page.string() + ".tmp";
        {
            std::ofstream out(temp, std::ios::binary);
            out << text.substr(0, begin) << wanted << text.substr(end + std::string(k_end).size());
        }
        fs::rename(temp, page);
        WARN("docs/configuration.md regenerated");
        return;
    }
    INFO("run `KERNHUB_TEST_UPDATE_DOCS=1 ctest -R 'settings table is the one rendered'` to regenerate it");
    CHECK(found == wanted);
}

TEST_CASE("every setting row is whole: a doc line, names unique, integer bounds in order", "[api]") {
    std::set<std::string_view> fields;
    std::set<std::string_view> variables;
    std::set<std::string_view> keys;
    for (const api::SettingSpec& spec : api::setting_table()) {
        INFO(spec.field << " " << spec.env << " " << spec.c_key);
        CHECK_FALSE(spec.doc.empty());
        CHECK((!spec.field.empty() || !spec.env.empty()));
        CHECK((spec.c_key.empty() == (spec.apply == nullptr)));
        if (!spec.field.empty()) CHECK(fields.insert(spec.field).second);
        if (!spec.env.empty()) CHECK(variables.insert(spec.env).second);
        if (!spec.c_key.empty()) CHECK(keys.insert(spec.c_key).second);
        if (spec.type == api::SettingType::integer) {
            CHECK(spec.min <= spec.fallback);
            CHECK(spec.fallback <= spec.max);
        } else {
            CHECK_FALSE(spec.range.empty());
            CHECK_FALSE(spec.fallback_text.empty());
        }
    }
}

TEST_CASE("resolve_settings enforces each integer row's range and default, under the row's variable", "[api]") {
    Options options;
    options.cache_dir = "/tmp/kernhub-setting-table-test";
    for (const api::SettingSpec& spec : api::setting_table()) {
        if (spec.type != api::SettingType::integer) continue;
        INFO(spec.env);
        const std::string name(spec.env);
        // The default when unset, each bound accepted, one past each refused
        // naming the variable: read back through the Settings field the
        // table says (the C key sets the same Options field).
        auto value_of = [&](const api::Settings& s) -> std::int64_t {
            if (spec.field == "retries") return s.retries;
            if (spec.field == "max_wait_seconds") return s.max_wait_seconds;
            if (spec.field == "max_listing_entries") return s.max_listing_entries;
            if (spec.field == "max_listing_bytes") return s.max_listing_bytes;
            if (spec.field == "api_timeout_seconds") return s.api_timeout_seconds;
            if (spec.field == "min_rate") return s.min_rate;
            if (spec.field == "min_rate_window_seconds") return s.min_rate_window_seconds;
            if (spec.field == "max_connections") return s.max_connections;
            if (spec.field == "ref_ttl_seconds") return s.ref_ttl_seconds;
            if (spec.field == "archive_max_entries") return s.archive_max_entries;
            if (spec.field == "archive_max_path") return s.archive_max_path;
            FAIL("an integer setting this test does not read back: " << spec.field);
            return -1;
        };
        CHECK(value_of(api::resolve_settings(options, env_of({}))) == spec.fallback);
        CHECK(value_of(api::resolve_settings(options, env_of({{name, std::to_string(spec.min)}}))) == spec.min);
        CHECK(value_of(api::resolve_settings(options, env_of({{name, std::to_string(spec.max)}}))) == spec.max);
        try {
            (void)api::resolve_settings(options, env_of({{name, std::to_string(spec.max + 1)}}));
            FAIL("accepted one past the maximum");
        } catch (const Error& e) {
            CHECK(e.code() == ErrorCode::usage);
            CHECK(std::string(e.what()).find(name + " must be a whole number from " + std::to_string(spec.min) +
                                             " to " + std::to_string(spec.max)) != std::string::npos);
        }
        // The C key sets the field the variable would.
        Options from_c = options;
        spec.apply(from_c, std::string(spec.c_key).c_str(), std::to_string(spec.max).c_str());
        CHECK(value_of(api::resolve_settings(from_c, env_of({}))) == spec.max);
    }
}

TEST_CASE("a KERNHUB_ variable that is no setting is found, with the nearest setting's name", "[api]") {
    const char* environment[] = {
        "KERNHUB_RETRYS=3", "KERNHUB_RETRIES=3",        "PATH=/bin", "KERNHUB_TEST_ANYTHING=1", "KERNHUB_COLOUR=red",
        "KERNHUB_OFLINE=1", "KERNHUB_MAX_CONECTIONS=2", nullptr};
    const auto unknown = api::unknown_variables(environment);
    REQUIRE(unknown.size() == 4);
    CHECK(unknown[0].name == "KERNHUB_RETRYS");
    CHECK(unknown[0].nearest == "KERNHUB_RETRIES");
    CHECK(unknown[1].name == "KERNHUB_COLOUR");
    CHECK(unknown[1].nearest.empty());
    CHECK(unknown[2].nearest == "KERNHUB_OFFLINE");
    CHECK(unknown[3].nearest == "KERNHUB_MAX_CONNECTIONS");
    CHECK(api::unknown_variables(nullptr).empty());
}

TEST_CASE("an unknown variable's name is cut, with ..., past 200 bytes", "[api]") {
    const std::string name = "KERNHUB_" + std::string(300, 'X');
    const std::string entry = name + "=1";
    const char* environment[] = {entry.c_str(), nullptr};
    const auto unknown = api::unknown_variables(environment);
    REQUIRE(unknown.size() == 1);
    CHECK(unknown[0].name == name.substr(0, 200) + "...");
    CHECK(unknown[0].nearest.empty());
}

TEST_CASE("a C key or variable spelled as the Options field is told the right name", "[api]") {
    CHECK(api::nearest_c_key("retrys") == "retries");
    CHECK(api::nearest_c_key("project_dir") == "project");
    CHECK(api::nearest_c_key("ref_ttl_seconds") == "ref_ttl");
    CHECK(api::nearest_c_key("registries") == "registry");
    CHECK(api::nearest_c_key("KERNHUB_MAX_WAIT") == "max_wait_seconds");
    CHECK(api::nearest_c_key("colour").empty());
    CHECK(api::nearest_variable("KERNHUB_REF_TTL_SECONDS") == "KERNHUB_REF_TTL");
    CHECK(api::nearest_variable("KERNHUB_MAX_WAIT_SECONDS") == "KERNHUB_MAX_WAIT");
    CHECK(api::nearest_variable("KERNHUB_RETRYS") == "KERNHUB_RETRIES");
    CHECK(api::nearest_variable("KERNHUB_COLOUR").empty());
}
