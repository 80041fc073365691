// The strict JSON reader every document from outside goes through: a key
// twice, nesting and member counts over their caps, and a cancel flag stop
// it where they happen, with the path to them; a document within its
// bounds comes out as nlohmann's own parser builds it.
#include <atomic>
#include <catch2/catch.hpp>
#include <string>

#include "common/strict_json.hpp"

using kernhub::strict_json::Limits;
using kernhub::strict_json::MemberCap;
using kernhub::strict_json::Problem;
using kernhub::strict_json::Step;
using nlohmann::json;

namespace {

// {"k0": {}, "k1": {}, ...} with n members.
std::string object_of_objects(std::size_t n) {
    std::string text = "{";
    for (std::size_t i = 0; i < n; ++i) text += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":{\"v\":[1,2]}";
    return text + "}";
}

}  // namespace

TEST_CASE("strict_json builds what nlohmann builds for a document within its bounds", "[common]") {
    const std::string text =
        R"({"a": [1, 2.5, "x", null, true, {"b": {}}], "c": {"d": -3, "e": 18446744073709551615}})";
    const auto parsed = kernhub::strict_json::parse(text, Limits{});
    REQUIRE_FALSE(parsed.problem);
    CHECK(parsed.document == json::parse(text));
    const std::string many = object_of_objects(20000);
    const auto big = kernhub::strict_json::parse(many, Limits{});
    REQUIRE_FALSE(big.problem);
    CHECK(big.document.size() == 20000);
    CHECK(big.document == json::parse(many));
}

TEST_CASE("strict_json refuses a key twice in one object, with the path to it", "[common]") {
    const std::string text = R"({"kernels": {"a": {"x": 1}, "b": {"y": 1, "y": 2}}})";
    const auto parsed = kernhub::strict_json::parse(text, Limits{});
    REQUIRE(parsed.problem);
    CHECK(parsed.problem->kind == Problem::Kind::duplicate_key);
    REQUIRE(parsed.problem->path.size() == 3);
    CHECK(parsed.problem->path[0].key == "kernels");
    CHECK(parsed.problem->path[1].key == "b");
    CHECK(parsed.problem->path[2].key == "y");
    CHECK(parsed.document.is_null());
    CHECK(kernhub::strict_json::describe(*parsed.problem, text) == "key 'y' appears twice in one object");
    // Equal keys in different objects are fine.
    CHECK_FALSE(kernhub::strict_json::parse(R"({"a": {"x": 1}, "b": {"x": 1}})", Limits{}).problem);
}

TEST_CASE("strict_json stops at the first container over its depth or member cap, naming the cap", "[common]") {
    Limits limits;
    limits.max_depth = 3;
    limits.depth_name = "k_max_test_depth";
    const auto deep = kernhub::strict_json::parse("[[[[1]]]]", limits);
    REQUIRE(deep.problem);
    CHECK(deep.problem->kind == Problem::Kind::too_deep);
    CHECK(kernhub::strict_json::describe(*deep.problem, "") == "nested deeper than 3 levels (k_max_test_depth)");
    CHECK_FALSE(kernhub::strict_json::parse("[[[1]]]", limits).problem);

    // A cap for one path, the default for the rest; arrays count elements.
    Limits capped;
    capped.members = MemberCap{5, "k_max_default", {}};
    capped.cap_at = [](const std::vector<Step>& path) -> std::optional<MemberCap> {
        if (path.size() == 1 && path[0].key == "files") return MemberCap{2, "k_max_files", "\"files\""};
        return std::nullopt;
    };
    CHECK_FALSE(kernhub::strict_json::parse(R"({"files": {"a": 1, "b": 2}, "list": [1, 2, 3, 4, 5]})", capped).problem);
    const std::string over = R"({"files": {"a": 1, "b": 2, "c": 3}})";
    const auto files = kernhub::strict_json::parse(over, capped);
    REQUIRE(files.problem);
    CHECK(files.problem->kind == Problem::Kind::too_many_members);
    CHECK(kernhub::strict_json::describe(*files.problem, over) == "\"files\" has more than 2 entries (k_max_files)");
    const auto list = kernhub::strict_json::parse(R"({"list": [1, 2, 3, 4, 5, [6]]})", capped);
    REQUIRE(list.problem);
    CHECK(list.problem->cap.limit_name == "k_max_default");
    // The cap stops the parse at the member over it: what follows, broken
    // or not, is never read.
    const auto early = kernhub::strict_json::parse(R"({"files": {"a": 1, "b": 2, "c": 3, )", capped);
    REQUIRE(early.problem);
    CHECK(early.problem->kind == Problem::Kind::too_many_members);
}

TEST_CASE("strict_json says where the text stopped being JSON", "[common]") {
    const std::string text = "{\n  \"a\": 1,\n  \"b\": }";
    const auto parsed = kernhub::strict_json::parse(text, Limits{});
    REQUIRE(parsed.problem);
    CHECK(parsed.problem->kind == Problem::Kind::syntax);
    const std::string words = kernhub::strict_json::describe(*parsed.problem, text);
    CHECK_THAT(words, Catch::StartsWith("invalid JSON at line 3, column 8"));
    CHECK_THAT(kernhub::strict_json::syntax_position(*parsed.problem, text), Catch::StartsWith("at line 3, column 8"));
}

TEST_CASE("strict_json ends with `cancelled` once the flag is set", "[common]") {
    std::atomic<bool> cancel{true};
    Limits limits;
    limits.cancel = &cancel;
    const std::string text = object_of_objects(2000);
    const auto stopped = kernhub::strict_json::parse(text, limits);
    REQUIRE(stopped.problem);
    CHECK(stopped.problem->kind == Problem::Kind::cancelled);
    cancel = false;
    CHECK_FALSE(kernhub::strict_json::parse(text, limits).problem);
}

TEST_CASE("strict_json stops at its cap on the values of the whole document, naming it", "[common]") {
    Limits limits;
    limits.max_values = 1000;
    std::string text = "[";
    for (int i = 0; i < 999; ++i) text += i ? ",{}" : "{}";
    CHECK_FALSE(kernhub::strict_json::parse(text + "]", limits).problem);  // 999 objects and the array
    const auto over = kernhub::strict_json::parse(text + ",[]]", limits);
    REQUIRE(over.problem);
    CHECK(over.problem->kind == Problem::Kind::too_many_values);
    CHECK(kernhub::strict_json::describe(*over.problem, "") == "holds more than 1000 values (k_max_json_values)");
    CHECK(Limits{}.max_values == kernhub::strict_json::k_max_json_values);
}
