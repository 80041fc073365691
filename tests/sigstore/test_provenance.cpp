// The committed Sigstore data carries its provenance: every file of
// src/sigstore/root/ (the root kernhub builds in) and tests/sigstore/vectors/
// (the real bundles the tests verify) is listed in its folder's
// provenance.json with its size, SHA-256, where it came from and when. A
// file without a record, a record without its file, or a file that no longer
// matches its record fails. A built-in root older than docs/trust.md's refresh rule
// (183 days since it was retrieved) only warns.
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "digest/digest.hpp"
#include "sigstore/detail.hpp"
#include "support/temp_dir.hpp"
#include "vectors.hpp"

namespace kernhub::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// docs/trust.md, "Signatures": the built-in root is refreshed at least this often.
constexpr long k_refresh_days = 183;

// Days since 1970-01-01 of a YYYY-MM-DD date; nullopt for anything else.
std::optional<long> civil_days(const std::string& text) {
    int year = 0;
    int month = 0;
    int day = 0;
    char tail = 0;
    if (text.size() != 10 || std::sscanf(text.c_str(), "%4d-%2d-%2d%c", &year, &month, &day, &tail) != 3) {
        return std::nullopt;
    }
    if (year < 2000 || month < 1 || month > 12 || day < 1 || day > 31) return std::nullopt;
    return static_cast<long>(sigstore::unix_time(year, month, day, 0, 0, 0) / 86400);
}

long today_days() {
    using namespace std::chrono;
    return static_cast<long>(duration_cast<hours>(system_clock::now().time_since_epoch()).count() / 24);
}

// The warning for a built-in root retrieved on day `retrieved`, seen on day
// `today`; empty while it is within the refresh rule.
std::string age_warning(long retrieved, long today) {
    const long age = today - retrieved;
    if (age <= k_refresh_days) return "";
    return "WARNING: src/sigstore/root/trusted_root.json was retrieved " + std::to_string(age) +
           " days ago, more than docs/trust.md's " + std::to_string(k_refresh_days) +
           "-day refresh rule: refresh it (docs/trust.md, \"Signatures\")";
}

void check_entry(const std::filesystem::path& folder, const nlohmann::json& entry, std::set<std::string>& recorded,
                 std::vector<std::string>& problems);

// What is wrong with `folder`'s provenance.json; empty when every file of the
// folder is recorded and matches its record.
std::vector<std::string> provenance_problems(const fs::path& folder) {
    std::vector<std::string> problems;
    const fs::path record = folder / "provenance.json";
    if (!fs::is_regular_file(record)) return {record.string() + " is missing"};
    json doc = json::parse(sigstore_vectors::read(record), nullptr, false);
    if (doc.is_discarded() || !doc.is_object() || !doc.contains("files") || !doc["files"].is_array() ||
        doc["files"].empty()) {
        return {record.string() + " is not a provenance record (an object with a non-empty \"files\" array)"};
    }
    std::set<std::string> recorded;
    for (const json& entry : doc["files"]) {
        if (!entry.is_object()) {
            problems.push_back("an entry that is not an object: " + entry.dump());
            continue;
        }
        try {
            check_entry(folder, entry, recorded, problems);
        } catch (const json::exception& e) {
            problems.push_back("an entry of the wrong shape (" + std::string(e.what()) + "): " + entry.dump());
        }
    }
    for (const auto& item : fs::directory_iterator(folder)) {
        const std::string name = item.path().filename().string();
        if (name != "provenance.json" && recorded.count(name) == 0) {
            problems.push_back(name + ": in " + folder.string() + " without a provenance record");
        }
    }
    return problems;
}

// One record of provenance.json against its file.
void check_entry(const fs::path& folder, const json& entry, std::set<std::string>& recorded,
                 std::vector<std::string>& problems) {
    const std::string name = entry.value("file", "");
    if (name.empty() || name.find('/') != std::string::npos) {
        problems.push_back("an entry without a plain file name: " + entry.dump());
        return;
    }
    recorded.insert(name);
    const fs::path file = folder / name;
    if (fs::is_symlink(file)) {
        problems.push_back(name + ": a symbolic link, not the recorded file");
        return;
    }
    if (!fs::is_regular_file(file)) {
        problems.push_back(name + ": recorded but not in " + folder.string());
        return;
    }
    if (entry.value("source", "").empty()) problems.push_back(name + ": no source");
    if (!civil_days(entry.value("retrieved", ""))) problems.push_back(name + ": no retrieved date (YYYY-MM-DD)");
    const auto size = entry.find("size");
    if (size == entry.end() || !size->is_number_unsigned() || size->get<std::uintmax_t>() != fs::file_size(file)) {
        problems.push_back(name + ": size does not match its record");
    }
    if (entry.value("sha256", "") != digest::sha256_file_hex(file)) {
        problems.push_back(name + ": SHA-256 does not match its record");
    }
}

const fs::path k_root_folder = sigstore_vectors::production_root().parent_path();

std::string join(const std::vector<std::string>& lines) {
    std::string out;
    for (const auto& line : lines) out += line + "\n";
    return out;
}

}  // namespace

TEST_CASE("the built-in trusted root and the test vectors match their provenance records", "[sigstore][provenance]") {
    for (const fs::path& folder : {k_root_folder, sigstore_vectors::dir()}) {
        INFO(folder.string());
        const auto problems = provenance_problems(folder);
        INFO(join(problems));
        CHECK(problems.empty());
    }
}

TEST_CASE("a changed, unrecorded or missing file fails the provenance check", "[sigstore][provenance]") {
    TempDir tmp;
    const fs::path copy = tmp.path() / "root";
    fs::copy(k_root_folder, copy);
    REQUIRE(provenance_problems(copy).empty());

    SECTION("a changed byte") {
        std::string bytes = sigstore_vectors::read(copy / "trusted_root.json");
        bytes[bytes.size() / 2] ^= 0x01;
        std::FILE* out = std::fopen((copy / "trusted_root.json").c_str(), "wb");
        REQUIRE(out != nullptr);
        std::fwrite(bytes.data(), 1, bytes.size(), out);
        std::fclose(out);
        CHECK_THAT(join(provenance_problems(copy)), Catch::Contains("SHA-256 does not match"));
    }
    SECTION("a file without a record") {
        fs::copy_file(copy / "trusted_root.json", copy / "newer_root.json");
        CHECK_THAT(join(provenance_problems(copy)), Catch::Contains("newer_root.json: in"));
    }
    SECTION("no record at all") {
        fs::remove(copy / "provenance.json");
        CHECK_THAT(join(provenance_problems(copy)), Catch::Contains("provenance.json is missing"));
    }
    SECTION("a record without a source") {
        json doc = json::parse(sigstore_vectors::read(copy / "provenance.json"));
        doc["files"][0].erase("source");
        std::FILE* out = std::fopen((copy / "provenance.json").c_str(), "wb");
        REQUIRE(out != nullptr);
        const std::string text = doc.dump(2);
        std::fwrite(text.data(), 1, text.size(), out);
        std::fclose(out);
        CHECK_THAT(join(provenance_problems(copy)), Catch::Contains("trusted_root.json: no source"));
    }
}

TEST_CASE("a built-in root older than the refresh rule warns and does not fail", "[sigstore][provenance]") {
    CHECK(civil_days("1970-01-01") == std::nullopt);  // before 2000: not a retrieval date
    CHECK(civil_days("2026-12-02") == 20789);
    CHECK(*civil_days("2024-03-01") - *civil_days("2024-02-28") == 2);  // a leap year
    const long day = *civil_days("2026-12-02");
    CHECK(age_warning(day, day + k_refresh_days).empty());
    CHECK_THAT(age_warning(day, day + k_refresh_days + 1), Catch::Contains("retrieved 184 days ago"));

    json doc = json::parse(sigstore_vectors::read(k_root_folder / "provenance.json"));
    const json* root = nullptr;
    for (const json& entry : doc["files"]) {
        if (entry.value("file", "") == "trusted_root.json") root = &entry;
    }
    REQUIRE(root != nullptr);
    const auto retrieved = civil_days(root->value("retrieved", ""));
    REQUIRE(retrieved);
    // tests/run.sh repeats "WARNING: " lines of passing tests; the age alone
    // never fails.
    const std::string warning = age_warning(*retrieved, today_days());
    if (!warning.empty()) std::cout << warning << std::endl;
    CHECK(today_days() - *retrieved >=
          -1);  // a retrieval date in the future is a wrong record (a day of slack for time zones)
}

}  // namespace kernhub::test
