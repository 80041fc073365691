// Loader tests against real shared objects built by tests/fixtures. Foreign
// or damaged objects are made by copying the good fixture and patching its
// ELF header bytes, so no cross compiler is needed.
#include <elf.h>
#include <sys/stat.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "elf/elf_header.hpp"
#include "kernhub/error.hpp"
#include "loader/loader.hpp"
#include "loader/resolved_table.hpp"
#include "support/build_paths.hpp"
#include "support/slurp.hpp"
#include "support/temp_dir.hpp"

namespace fs = std::filesystem;
using kernhub::Error;
using kernhub::ErrorCode;
using kernhub::test::TempDir;
using namespace kernhub::loader;
using kernhub::elf::ElfHeaderFacts;
using kernhub::elf::host_elf_machine;
using kernhub::elf::read_elf_header;

namespace {

const fs::path k_fixtures = KERNHUB_FIXTURE_DIR;
const fs::path k_good = k_fixtures / "libkh_good.so";
const fs::path k_undefined = k_fixtures / "libkh_undefined.so";

std::vector<unsigned char> read_bytes(const fs::path& path) {
    return kernhub::test::slurp_bytes(path);
}

fs::path write_bytes(const fs::path& path, const std::vector<unsigned char>& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    REQUIRE(out.good());
    return path;
}

// Stores a 16-bit header field in little-endian order, as the fixture is.
void put_u16_le(std::vector<unsigned char>& bytes, std::size_t offset, int value) {
    bytes.at(offset) = static_cast<unsigned char>(value & 0xff);
    bytes.at(offset + 1) = static_cast<unsigned char>((value >> 8) & 0xff);
}

// Runs f and returns the kernhub::Error it throws; fails the test otherwise.
template <class F>
Error expect_error(F&& f) {
    try {
        f();
    } catch (const Error& e) {
        return e;
    }
    FAIL("no kernhub::Error was thrown");
    return Error(ErrorCode::ok, "unreachable");
}

int foreign_machine() {
    return host_elf_machine() == EM_AARCH64 ? EM_X86_64 : EM_AARCH64;
}

}  // namespace

// ---- reading headers --------------------------------------------------------

TEST_CASE("the good fixture reads as a 64-bit little-endian shared object for this host", "[loader]") {
    const ElfHeaderFacts facts = read_elf_header(k_good);
    CHECK(facts.elf_class == ELFCLASS64);
    CHECK(facts.little_endian);
    CHECK(facts.type == ET_DYN);
    CHECK(facts.machine == host_elf_machine());
    CHECK(facts.os_abi == read_bytes(k_good).at(EI_OSABI));
    CHECK_NOTHROW(validate_shared_object(k_good));
}

TEST_CASE("host_elf_machine agrees with the running executable", "[loader]") {
    CHECK(host_elf_machine() == read_elf_header("/proc/self/exe").machine);
#if defined(__x86_64__)
    CHECK(host_elf_machine() == 62);
#elif defined(__aarch64__)
    CHECK(host_elf_machine() == 183);
#endif
}

TEST_CASE("a missing file is not_found and says to fetch again", "[loader]") {
    TempDir dir;
    const fs::path missing = dir.path() / "libnothing.so";
    for (auto* call :
         {+[](const fs::path& p) { read_elf_header(p); }, +[](const fs::path& p) { validate_shared_object(p); },
          +[](const fs::path& p) { Library::open(p); }}) {
        Error e = expect_error([&] { call(missing); });
        CHECK(e.code() == ErrorCode::not_found);
        CHECK_THAT(e.message(), Catch::Contains("shared object " + missing.string() + " does not exist"));
        CHECK_THAT(e.message(), Catch::Contains("; fetch it again (Client::fetch)"));
        CHECK(e.hint().kind == kernhub::ErrorHint::Kind::action);
        CHECK(e.hint().name == "fetch");
    }
}

TEST_CASE("every truncated header length is a verification error", "[loader]") {
    TempDir dir;
    const std::vector<unsigned char> good = read_bytes(k_good);
    for (std::size_t length = 0; length < sizeof(Elf64_Ehdr); ++length) {
        CAPTURE(length);
        const fs::path cut =
            write_bytes(dir.path() / "libcut.so", {good.begin(), good.begin() + static_cast<std::ptrdiff_t>(length)});
        Error e = expect_error([&] { read_elf_header(cut); });
        CHECK(e.code() == ErrorCode::verification);
        CHECK_THAT(e.message(), Catch::StartsWith(cut.string() + " is not an ELF file ("));
        if (length >= SELFMAG) {
            CHECK_THAT(e.message(), Catch::Contains("truncated after " + std::to_string(length)));
        }
        CHECK(expect_error([&] { Library::open(cut); }).code() == ErrorCode::verification);
    }
}

TEST_CASE("non-ELF inputs are verification errors naming the path", "[loader]") {
    TempDir dir;
    SECTION("a text file") {
        const std::string text(200, 'x');
        const fs::path file = write_bytes(dir.path() / "README.so", {text.begin(), text.end()});
        Error e = expect_error([&] { read_elf_header(file); });
        CHECK(e.code() == ErrorCode::verification);
        CHECK(e.message() == file.string() +
                                 " is not an ELF file (no ELF magic number); the download is damaged or is "
                                 "not a kernel build: fetch it again, or check what it is (kernhub::inspect_file)");
    }
    SECTION("a directory") {
        Error e = expect_error([&] { read_elf_header(dir.path()); });
        CHECK(e.code() == ErrorCode::verification);
        CHECK_THAT(e.message(), Catch::Contains("not a regular file"));
    }
    SECTION("an unknown EI_CLASS or EI_DATA") {
        std::vector<unsigned char> bytes = read_bytes(k_good);
        const std::size_t field = GENERATE(std::size_t{EI_CLASS}, std::size_t{EI_DATA});
        bytes.at(field) = 7;
        const fs::path file = write_bytes(dir.path() / "libodd.so", bytes);
        Error e = expect_error([&] { read_elf_header(file); });
        CHECK(e.code() == ErrorCode::verification);
        CHECK_THAT(e.message(), Catch::Contains(field == EI_CLASS ? "EI_CLASS 7" : "EI_DATA 7"));
    }
}

// ---- validating patched copies ---------------------------------------------

TEST_CASE("a shared object for another machine is rejected before dlopen", "[loader]") {
    TempDir dir;
    std::vector<unsigned char> bytes = read_bytes(k_good);
    put_u16_le(bytes, offsetof(Elf64_Ehdr, e_machine), foreign_machine());
    const fs::path file = write_bytes(dir.path() / "libforeign.so", bytes);

    CHECK(read_elf_header(file).machine == foreign_machine());
    Error e = expect_error([&] { validate_shared_object(file); });
    CHECK(e.code() == ErrorCode::verification);
    CHECK_THAT(e.message(), Catch::StartsWith(file.string() + " is built for "));
    CHECK_THAT(e.message(), Catch::Contains("(e_machine " + std::to_string(foreign_machine()) + ")"));
#if defined(__x86_64__)
    CHECK_THAT(e.message(), Catch::Contains("built for aarch64 (e_machine 183), this host is x86_64"));
#endif
    CHECK(expect_error([&] { Library::open(file); }).code() == ErrorCode::verification);
}

TEST_CASE("a CUDA cubin header is named as such", "[loader]") {
    TempDir dir;
    std::vector<unsigned char> bytes = read_bytes(k_good);
    put_u16_le(bytes, offsetof(Elf64_Ehdr, e_machine), EM_CUDA);
    const fs::path file = write_bytes(dir.path() / "kernel.cubin", bytes);
    Error e = expect_error([&] { validate_shared_object(file); });
    CHECK(e.code() == ErrorCode::verification);
    CHECK_THAT(e.message(), Catch::Contains("built for CUDA (e_machine 190)"));
}

TEST_CASE("a 32-bit ELF object is rejected", "[loader]") {
    TempDir dir;
    std::vector<unsigned char> bytes = read_bytes(k_good);
    bytes.at(EI_CLASS) = ELFCLASS32;
    const fs::path file = write_bytes(dir.path() / "lib32.so", bytes);

    CHECK(read_elf_header(file).elf_class == ELFCLASS32);
    Error e = expect_error([&] { validate_shared_object(file); });
    CHECK(e.code() == ErrorCode::verification);
    CHECK_THAT(e.message(), Catch::StartsWith(file.string() + " is a 32-bit ELF object (EI_CLASS 1)"));
    CHECK_THAT(e.message(), Catch::Contains("only 64-bit"));
}

TEST_CASE("a big-endian ELF object is rejected and its fields read big-endian", "[loader]") {
    TempDir dir;
    std::vector<unsigned char> bytes = read_bytes(k_good);
    bytes.at(EI_DATA) = ELFDATA2MSB;
    const fs::path file = write_bytes(dir.path() / "libbig.so", bytes);

    const ElfHeaderFacts facts = read_elf_header(file);
    CHECK_FALSE(facts.little_endian);
    // The little-endian bytes of ET_DYN (03 00) read big-endian are 0x0300.
    CHECK(facts.type == 0x0300);
    Error e = expect_error([&] { validate_shared_object(file); });
    CHECK(e.code() == ErrorCode::verification);
    CHECK_THAT(e.message(), Catch::StartsWith(file.string() + " is a big-endian ELF object"));
    CHECK_THAT(e.message(), Catch::Contains("needs little-endian"));
}

TEST_CASE("an executable (ET_EXEC) is not a loadable kernel", "[loader]") {
    TempDir dir;
    std::vector<unsigned char> bytes = read_bytes(k_good);
    put_u16_le(bytes, offsetof(Elf64_Ehdr, e_type), ET_EXEC);
    const fs::path file = write_bytes(dir.path() / "libexec.so", bytes);

    CHECK(read_elf_header(file).type == ET_EXEC);
    Error e = expect_error([&] { validate_shared_object(file); });
    CHECK(e.code() == ErrorCode::verification);
    CHECK_THAT(e.message(), Catch::StartsWith(file.string() + " is not a shared object (e_type 2"));
    CHECK_THAT(e.message(), Catch::Contains("ET_EXEC"));
    CHECK_THAT(e.message(), Catch::Contains("expected ET_DYN 3"));
}

// ---- dlopen and dlsym -------------------------------------------------------

TEST_CASE("the good fixture loads and its entry points can be called", "[loader]") {
    const Library library = Library::open(k_good);
    CHECK(library.path() == k_good);

    auto add = reinterpret_cast<int (*)(int, int)>(library.symbol("kh_add_i32"));
    auto id = reinterpret_cast<int (*)()>(library.symbol("kh_fixture_id"));
    REQUIRE(add != nullptr);
    REQUIRE(id != nullptr);
    CHECK(add(40, 2) == 42);
    CHECK(add(-7, 7) == 0);
    CHECK(id() == 42);

    // dlopen deduplicates by inode, so a second open resolves the same code.
    CHECK(Library::open(k_good).symbol("kh_add_i32") == library.symbol("kh_add_i32"));
}

TEST_CASE("a bare file name loads the file in the current directory", "[loader]") {
    // Without a slash dlopen would search the library path instead.
    TempDir dir;
    fs::copy_file(k_good, dir.path() / "libkh_cwd_only.so");
    const fs::path previous = fs::current_path();
    fs::current_path(dir.path());
    struct RestoreCwd {
        fs::path path;
        ~RestoreCwd() {
            std::error_code ignored;
            fs::current_path(path, ignored);
        }
    } restore{previous};

    const Library library = Library::open("libkh_cwd_only.so");
    CHECK(library.path() == "libkh_cwd_only.so");
    auto id = reinterpret_cast<int (*)()>(library.symbol("kh_fixture_id"));
    CHECK(id() == 42);
}

TEST_CASE("a FIFO or a device at the library path is refused without blocking", "[loader]") {
    // dlopen would wait forever for a writer on the FIFO.
    kernhub::test::TempDir dir;
    const fs::path fifo = dir.path() / "libkh_fifo.so";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    Error e = expect_error([&] { Library::open(fifo); });
    CHECK(e.code() == ErrorCode::load);
    CHECK_THAT(e.message(), Catch::Contains("not a regular file"));
    Error device = expect_error([&] { Library::open("/dev/zero"); });
    CHECK(device.code() == ErrorCode::load);
    CHECK_THAT(device.message(), Catch::Contains("/dev/zero is not a regular file"));
}

TEST_CASE("a missing symbol is not_found and names the symbol and file", "[loader]") {
    const Library library = Library::open(k_good);
    Error e = expect_error([&] { library.symbol("kh_no_such_symbol"); });
    CHECK(e.code() == ErrorCode::not_found);
    CHECK(e.message() == "symbol 'kh_no_such_symbol' not found in " + k_good.string() +
                             "; check the registry's \"symbol\" (or the symbol given to the load)");
    CHECK_THAT(e.context(), Catch::Contains("kh_no_such_symbol"));
}

TEST_CASE("an object with an undefined symbol fails to load with the loader's reason", "[loader]") {
    // It is a well-formed ELF object: only the dynamic loader can refuse it.
    CHECK_NOTHROW(validate_shared_object(k_undefined));
    Error e = expect_error([&] { Library::open(k_undefined); });
    CHECK(e.code() == ErrorCode::load);
    CHECK_THAT(e.message(), Catch::StartsWith("cannot load " + k_undefined.string()));
    CHECK_THAT(e.message(), Catch::Contains("needs a library or symbol this host lacks"));
    CHECK_THAT(e.context(), Catch::Contains("undefined symbol"));
    CHECK_THAT(e.context(), Catch::Contains("kh_symbol_nobody_defines"));
}

// ---- the resolved table -----------------------------------------------------

namespace {

kernhub::LoadResult resolved_at(void* address) {
    kernhub::LoadResult result;
    result.kind = kernhub::LoadKind::function;
    result.address = address;
    return result;
}

void* address_in(const ResolvedTable& table, const std::string& key) {
    const std::optional<kernhub::LoadResult> found = table.find(key);
    return found ? found->address : nullptr;
}

}  // namespace

TEST_CASE("a resolved table inserts, finds and replaces, and each table is its own", "[loader]") {
    ResolvedTable table;
    ResolvedTable other;
    static int first_slot = 0;
    static int second_slot = 0;
    CHECK(table.size() == 0);
    CHECK_FALSE(table.find("test/put-find"));

    table.publish("test/put-find", resolved_at(&first_slot), table.start());
    CHECK(address_in(table, "test/put-find") == &first_slot);
    CHECK(table.size() == 1);
    CHECK_FALSE(other.find("test/put-find"));

    table.publish("test/put-find", resolved_at(&second_slot), table.start());
    CHECK(address_in(table, "test/put-find") == &second_slot);
    CHECK(table.size() == 1);
    CHECK_FALSE(table.find("test/put-find-other"));
}

TEST_CASE("a resolved table keeps the load that started last, not the one that ended last", "[loader]") {
    ResolvedTable table;
    static int earlier_slot = 0;
    static int later_slot = 0;
    const std::uint64_t earlier = table.start();
    const std::uint64_t later = table.start();
    CHECK(later > earlier);
    CHECK(earlier > 0);
    table.publish("test/overlap", resolved_at(&later_slot), later);
    table.publish("test/overlap", resolved_at(&earlier_slot), earlier);  // ends last, started first
    CHECK(address_in(table, "test/overlap") == &later_slot);
}

TEST_CASE("the resolved table takes concurrent publishes and finds", "[loader]") {
    constexpr int k_threads = 8;
    constexpr int k_keys_per_thread = 250;
    static unsigned char slots[k_threads][k_keys_per_thread];
    ResolvedTable table;

    auto key = [](int t, int k) { return "test/concurrent/" + std::to_string(t) + "/" + std::to_string(k); };
    // Catch2 assertions are not thread-safe, so workers only count misses.
    std::atomic<int> misses{0};
    std::vector<std::thread> workers;
    for (int t = 0; t < k_threads; ++t) {
        workers.emplace_back([&, t] {
            for (int k = 0; k < k_keys_per_thread; ++k) {
                table.publish(key(t, k), resolved_at(&slots[t][k]), table.start());
                // A reader interleaved with other threads' writers.
                if (address_in(table, key(t, k)) != &slots[t][k]) ++misses;
            }
        });
    }
    for (std::thread& worker : workers) worker.join();
    CHECK(misses == 0);

    CHECK(table.size() == std::size_t{k_threads * k_keys_per_thread});
    int wrong = 0;
    for (int t = 0; t < k_threads; ++t) {
        for (int k = 0; k < k_keys_per_thread; ++k) wrong += address_in(table, key(t, k)) != &slots[t][k];
    }
    CHECK(wrong == 0);
}

TEST_CASE("a resolved kernel is called through the table", "[loader]") {
    const Library library = Library::open(k_good);
    ResolvedTable table;
    table.publish("test/fixture-add", resolved_at(library.symbol("kh_add_i32")), table.start());
    auto add = reinterpret_cast<int (*)(int, int)>(address_in(table, "test/fixture-add"));
    REQUIRE(add != nullptr);
    CHECK(add(20, 22) == 42);
}
