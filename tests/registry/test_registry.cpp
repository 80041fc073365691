// Parsing and validation of one registry document (Registry::add_json).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "kernhub/error.hpp"
#include "registry/registry.hpp"

using kernhub::ErrorCode;
using kernhub::RepoType;
using kernhub::registry::KernelSpec;
using kernhub::registry::Registry;

namespace {

const std::string k_source = "/projects/demo/kernhub.json";

std::string document_with(const std::string& name, const std::string& entry) {
    return R"({"format": 1, "kernels": {")" + name + R"(": )" + entry + "}}";
}

// Runs add_json on a registry that already holds one entry and returns the
// message of the Error(usage) it must throw. A rejected document must add
// nothing, so the earlier entry must be all that is left.
std::string usage_error(const std::string& text) {
    Registry registry;
    registry.add_json(R"({"format": 1, "kernels": {"keep": {"repo_id": "a/b", "version": 1, "symbol": "s"}}})", "base");
    std::string message;
    bool threw = false;
    try {
        registry.add_json(text, k_source);
    } catch (const kernhub::Error& error) {
        threw = true;
        CHECK(error.code() == ErrorCode::usage);
        message = error.message();
    }
    INFO("document: " << text);
    REQUIRE(threw);
    CHECK(message.find('\n') == std::string::npos);
    CHECK(registry.entries().size() == 1);
    return message;
}

// The message names the source, the entry and the field.
void require_names(const std::string& message, const std::vector<std::string>& parts) {
    INFO("message: " << message);
    CHECK_THAT(message, Catch::StartsWith("registry " + k_source + ": "));
    for (const auto& part : parts) CHECK_THAT(message, Catch::Contains(part));
}

void require_entry_error(const std::string& name, const std::string& entry, const std::string& field,
                         const std::vector<std::string>& extra = {}) {
    std::vector<std::string> parts = {"kernel \"" + name + "\"", "\"" + field + "\""};
    parts.insert(parts.end(), extra.begin(), extra.end());
    require_names(usage_error(document_with(name, entry)), parts);
}

}  // namespace

TEST_CASE("a valid document yields every field", "[registry]") {
    Registry registry;
    registry.add_json(R"({
        "$schema": "./schema.json",
        "description": "test registry",
        "format": 1,
        "kernels": {
            "vector-add": {"repo_id": "kernhub-demo/vector-add", "revision": "main",
                           "symbol": "kh_vector_add", "file": "libvector_add.so"},
            "flash-attn3": {"repo_id": "kernels-community/flash-attn3", "version": 1,
                            "symbol": "flash_attn_func"},
            "pinned": {"repo_id": "org/model", "revision": "0123456789abcdef0123456789abcdef01234567",
                       "symbol": "fn", "file": "sub/dir/lib.so", "repo_type": "model"},
            "v0": {"repo_id": "org/k", "version": 0, "symbol": "f", "repo_type": "kernel"}
        }})",
                      k_source);

    const KernelSpec* flash = registry.find("flash-attn3");
    REQUIRE(flash != nullptr);
    CHECK(flash->name == "flash-attn3");
    CHECK(flash->repo_id == "kernels-community/flash-attn3");
    CHECK(flash->repo_type == RepoType::kernel);
    CHECK(flash->revision.empty());
    CHECK(flash->version == 1);
    CHECK(flash->symbol == "flash_attn_func");
    CHECK(flash->file.empty());
    CHECK(flash->source == k_source);
    CHECK(flash->effective_revision() == "v1");

    const KernelSpec* add = registry.find("vector-add");
    REQUIRE(add != nullptr);
    CHECK(add->revision == "main");
    CHECK_FALSE(add->version.has_value());
    CHECK(add->file == "libvector_add.so");
    CHECK(add->effective_revision() == "main");

    const KernelSpec* pinned = registry.find("pinned");
    REQUIRE(pinned != nullptr);
    CHECK(pinned->repo_type == RepoType::model);
    CHECK(pinned->file == "sub/dir/lib.so");
    CHECK(pinned->effective_revision() == "0123456789abcdef0123456789abcdef01234567");

    CHECK(registry.find("v0")->effective_revision() == "v0");
    CHECK(registry.find("missing") == nullptr);

    std::vector<std::string> names;
    for (const auto& spec : registry.entries()) names.push_back(spec.name);
    CHECK(names == std::vector<std::string>{"flash-attn3", "pinned", "v0", "vector-add"});
}

TEST_CASE("empty kernels, long names and refs with slashes are accepted", "[registry]") {
    Registry registry;
    registry.add_json(R"({"format": 1, "kernels": {}})", k_source);
    CHECK(registry.entries().empty());

    const std::string name(128, 'n');
    registry.add_json(document_with(name, R"({"repo_id": "a/b", "revision": "refs/pr/3", "symbol": "s"})"), k_source);
    registry.add_json(document_with("A.b_c-9", R"({"repo_id": "a/b", "revision": "v1.2.0", "symbol": "_ZN1a1bEv"})"),
                      k_source);
    CHECK(registry.find(name)->revision == "refs/pr/3");
    CHECK(registry.find("A.b_c-9")->symbol == "_ZN1a1bEv");
}

TEST_CASE("a later document wins per name and keeps the others", "[registry]") {
    Registry registry;
    registry.add_json(R"({"format": 1, "kernels": {
        "a": {"repo_id": "org/a", "version": 1, "symbol": "first"},
        "b": {"repo_id": "org/b", "version": 1, "symbol": "first"}}})",
                      "first.json");
    registry.add_json(R"({"format": 1, "kernels": {
        "b": {"repo_id": "org/b2", "revision": "dev", "symbol": "second"}}})",
                      "second.json");
    CHECK(registry.find("a")->source == "first.json");
    const KernelSpec* b = registry.find("b");
    CHECK(b->source == "second.json");
    CHECK(b->repo_id == "org/b2");
    CHECK(b->effective_revision() == "dev");
    CHECK_FALSE(b->version.has_value());
}

TEST_CASE("malformed JSON names the file and the position", "[registry]") {
    require_names(usage_error("{\"format\": 1,\n  \"kernels\": {,}}"), {"invalid JSON", "line 2", "column 15"});
    require_names(usage_error(""), {"invalid JSON", "line 1"});
    require_names(usage_error(R"({"format": 1, "kernels": {}} trailing)"), {"invalid JSON", "byte"});
    require_names(usage_error("[1, 2]"), {"must be a JSON object"});
    // A number no double holds is not a syntax error to nlohmann, but it
    // still gets its position.
    require_names(usage_error("{\"format\": 1,\n \"kernels\": {\"x\": 1e999}}"),
                  {"invalid JSON", "line 2", "number overflow"});
}

TEST_CASE("a document nested deeper than k_max_registry_depth stops at that depth", "[registry]") {
    require_names(usage_error(std::string(1000000, '[') + std::string(1000000, ']')), {"k_max_registry_depth"});
    const std::string deep_field =
        R"({"format": 1, "kernels": {"x": {"repo_id": )" + std::string(40, '[') + std::string(40, ']') + "}}}";
    require_names(usage_error(deep_field), {"nested deeper than 32 levels"});
}

TEST_CASE("the format field is required and must be 1", "[registry]") {
    require_names(usage_error(R"({"kernels": {}})"), {"missing field \"format\"", "\"format\": 1"});
    require_names(usage_error(R"({"format": 2, "kernels": {}})"), {"\"format\"", "unsupported format 2"});
    require_names(usage_error(R"({"format": "1", "kernels": {}})"), {"\"format\"", "got string \"1\""});
    require_names(usage_error(R"({"format": 1.0, "kernels": {}})"), {"\"format\"", "integer"});
}

TEST_CASE("top-level keys are checked", "[registry]") {
    require_names(usage_error(R"({"format": 1, "kernel": {}})"),
                  {"unknown top-level key \"kernel\"", "did you mean \"kernels\"?"});
    require_names(usage_error(R"({"format": 1, "kernels": {}, "$schema": 3})"), {"\"$schema\"", "string"});
    require_names(usage_error(R"({"format": 1, "description": null, "kernels": {}})"), {"\"description\""});
    require_names(usage_error(R"({"format": 1})"), {"missing field \"kernels\""});
    require_names(usage_error(R"({"format": 1, "kernels": []})"), {"\"kernels\"", "got array"});
}

TEST_CASE("an unknown field is named with the allowed ones", "[registry]") {
    const std::string message =
        usage_error(document_with("flash-attn3", R"({"repo_id": "a/b", "revison": "main", "symbol": "s"})"));
    CHECK(message == "registry " + k_source +
                         ": kernel \"flash-attn3\": unknown field \"revison\" (allowed: repo_id, revision, "
                         "version, symbol, file, op, repo_type, signature); did you mean \"revision\"?");
    require_entry_error("k", R"({"repo_id": "a/b", "version": 1, "symbol": "s", "checksum": "x"})", "checksum",
                        {"allowed:"});
    require_entry_error("k", R"("kernels-community/flash-attn3")", "repo_id", {"must be an object"});
}

TEST_CASE("repo_id and symbol are required non-empty strings", "[registry]") {
    require_entry_error("k", R"({"version": 1, "symbol": "s"})", "repo_id", {"missing required field"});
    require_entry_error("k", R"({"repo_id": "a/b", "version": 1})", "symbol", {"missing required field"});
    require_entry_error("k", R"({"repo_id": "", "version": 1, "symbol": "s"})", "repo_id", {"empty"});
    require_entry_error("k", R"({"repo_id": "a/b", "version": 1, "symbol": ""})", "symbol", {"empty"});
    require_entry_error("k", R"({"repo_id": 7, "version": 1, "symbol": "s"})", "repo_id", {"got number 7"});
    require_entry_error("k", R"({"repo_id": "a/b", "version": 1, "symbol": ["s"]})", "symbol", {"got array"});
    require_entry_error("k", R"({"repo_id": "a/b", "version": 1, "symbol": "two words"})", "symbol");
}

TEST_CASE("exactly one of revision and version", "[registry]") {
    require_entry_error("both", R"({"repo_id": "a/b", "revision": "main", "version": 1, "symbol": "s"})", "revision",
                        {"\"version\"", "only one"});
    require_entry_error("neither", R"({"repo_id": "a/b", "symbol": "s"})", "revision", {"\"version\""});
}

TEST_CASE("version must be a non-negative integer", "[registry]") {
    const std::string head = R"({"repo_id": "a/b", "symbol": "s", "version": )";
    require_entry_error("k", head + "-1}", "version", {"negative", "-1"});
    require_entry_error("k", head + "1.5}", "version", {"got number 1.5"});
    require_entry_error("k", head + "1.0}", "version", {"integer"});
    require_entry_error("k", head + "\"1\"}", "version", {"got string \"1\""});
    require_entry_error("k", head + "true}", "version", {"got boolean true"});
    require_entry_error("k", head + "null}", "version", {"got null"});
    require_entry_error("k", head + "4294967296}", "version", {"too large"});
}

TEST_CASE("revision must be a usable git ref", "[registry]") {
    const std::string head = R"({"repo_id": "a/b", "symbol": "s", "revision": )";
    require_entry_error("k", head + "\"\"}", "revision", {"empty"});
    require_entry_error("k", head + "1}", "revision", {"must be a string"});
    require_entry_error("k", head + "\"../../etc\"}", "revision", {"'..'"});
    require_entry_error("k", head + "\"my branch\"}", "revision", {"space"});
    require_entry_error("k", head + "\"0123456789ABCDEF0123456789abcdef01234567\"}", "revision", {"lowercase"});
}

TEST_CASE("repo_id and repo_type are validated", "[registry]") {
    const std::string tail = R"(, "version": 1, "symbol": "s"})";
    require_entry_error("k", R"({"repo_id": "noslash")" + tail, "repo_id", {"ORG/NAME"});
    require_entry_error("k", R"({"repo_id": "a/b/c")" + tail, "repo_id", {"invalid repo id"});
    require_entry_error("k", R"({"repo_id": "../x")" + tail, "repo_id", {"invalid repo id"});
    require_entry_error("k", R"({"repo_id": "a/b", "repo_type": "dataset")" + tail, "repo_type",
                        {"\"kernel\" or \"model\"", "\"dataset\""});
    require_entry_error("k", R"({"repo_id": "a/b", "repo_type": 1)" + tail, "repo_type", {"string"});
}

TEST_CASE("kernel names are 1-128 safe characters", "[registry]") {
    const std::string entry = R"({"repo_id": "a/b", "version": 1, "symbol": "s"})";
    const std::vector<std::string> bad_names = {"flash attn", "", std::string(129, 'x'), "a/b", "caf\u00e9"};
    for (const auto& name : bad_names) {
        require_names(usage_error(document_with(name, entry)),
                      {"kernel \"" + name + "\"", "invalid name", "\"kernels\""});
    }
    // A control character in a name is escaped so the message stays on one line.
    require_names(usage_error(document_with("a\\nb", entry)), {"kernel \"a\\nb\""});
}

TEST_CASE("file must stay inside the variant directory", "[registry]") {
    const std::string head = R"({"repo_id": "a/b", "version": 1, "symbol": "s", "file": )";
    require_entry_error("k", head + "\"/usr/lib/libc.so.6\"}", "file", {"'/'"});
    require_entry_error("k", head + "\"../lib.so\"}", "file", {"'..'"});
    require_entry_error("k", head + "\"a/../../lib.so\"}", "file", {"'..'"});
    require_entry_error("k", head + "\"./lib.so\"}", "file", {"'.'"});
    require_entry_error("k", head + "\"a//lib.so\"}", "file", {"empty path part"});
    require_entry_error("k", head + "\"lib\\\\x.so\"}", "file", {"backslash"});
    require_entry_error("k", head + "\"\"}", "file", {"empty"});
    require_entry_error("k", head + "5}", "file", {"must be a string"});
}

TEST_CASE("duplicate keys are reported instead of silently dropped", "[registry]") {
    const std::string entry = R"({"repo_id": "a/b", "version": 1, "symbol": "s"})";
    require_names(usage_error(R"({"format": 1, "kernels": {"k": )" + entry + R"(, "k": )" + entry + "}}"),
                  {"kernel \"k\"", "defined twice"});
    require_entry_error("k", R"({"repo_id": "a/b", "version": 1, "symbol": "s", "symbol": "t"})", "symbol",
                        {"appears twice"});
    require_names(usage_error(R"({"format": 1, "format": 1, "kernels": {}})"), {"\"format\"", "twice"});
}

TEST_CASE("a signature policy is parsed with its issuer, identities and repository", "[registry][signature]") {
    Registry registry;
    registry.add_json(document_with("signed", R"({"repo_id": "a/b", "version": 1, "symbol": "s",
        "signature": {"issuer": "https://token.actions.githubusercontent.com",
                      "identities": ["https://github.com/o/r/.github/workflows/build.yaml@refs/heads/main",
                                     "release@example.com"],
                      "repository": "o/r"}})"),
                      k_source);
    const KernelSpec* spec = registry.find("signed");
    REQUIRE(spec != nullptr);
    REQUIRE(spec->signature);
    CHECK(spec->signature->issuer == "https://token.actions.githubusercontent.com");
    CHECK(spec->signature->identities ==
          std::vector<std::string>{"https://github.com/o/r/.github/workflows/build.yaml@refs/heads/main",
                                   "release@example.com"});
    CHECK(spec->signature->repository == "o/r");

    registry.add_json(document_with("plain", R"({"repo_id": "a/b", "version": 1, "symbol": "s"})"), k_source);
    CHECK_FALSE(registry.find("plain")->signature);
}

TEST_CASE("a malformed signature policy is a usage error naming the field", "[registry][signature]") {
    const auto entry = [](const std::string& signature) {
        return document_with("k", R"({"repo_id": "a/b", "version": 1, "symbol": "s", "signature": )" + signature + "}");
    };
    require_names(usage_error(entry(R"("https://issuer")")), {"kernel \"k\"", "\"signature\"", "must be an object"});
    require_names(usage_error(entry(R"({"identities": ["x"]})")), {"\"signature\"", "missing \"issuer\""});
    require_names(usage_error(entry(R"({"issuer": "", "identities": ["x"]})")), {"signature.issuer", "non-empty"});
    require_names(usage_error(entry(R"({"issuer": "i"})")), {"signature.identities", "non-empty list"});
    require_names(usage_error(entry(R"({"issuer": "i", "identities": []})")), {"signature.identities"});
    require_names(usage_error(entry(R"({"issuer": "i", "identities": [7]})")), {"signature.identities"});
    require_names(usage_error(entry(R"({"issuer": "i", "identities": ["a b"]})")),
                  {"signature.identities", "space or control character"});
    require_names(usage_error(entry(R"({"issuer": "i", "identities": ["x"], "repository": 1})")),
                  {"signature.repository"});
    require_names(usage_error(entry(R"({"issuer": "i", "identities": ["x"], "identity": "y"})")),
                  {"unknown field \"identity\""});
    std::string many = "[";
    for (int i = 0; i < 65; ++i) many += std::string(i == 0 ? "" : ",") + "\"id" + std::to_string(i) + "\"";
    many += "]";
    require_names(usage_error(entry(R"({"issuer": "i", "identities": )" + many + "}")), {"more than 64"});
    require_names(usage_error(entry(R"({"issuer": ")" + std::string(1025, 'x') + R"(", "identities": ["x"]})")),
                  {"longer than 1024"});
}
