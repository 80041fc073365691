// verify_on_load loads exactly the verified bytes, and the warm path checks
// the links and the record it trusts (docs/cache.md "Loading exactly the verified bytes" and
// "Trust in cached blobs"), against a real loopback hub.
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "hub/hub_env.hpp"
#include "kernhub/kernhub.hpp"
#include "support/kernel_hub.hpp"

using namespace kernhub;
using namespace kernhub::test;
using namespace kernhub::test::hub_env;
namespace fs = std::filesystem;

namespace {

using AddFn = void (*)(const float*, const float*, float*, std::size_t);

float add_first(void* address) {
    const float a[2] = {1, 2}, b[2] = {10, 20};
    float out[2] = {0, 0};
    reinterpret_cast<AddFn>(address)(a, b, out, 2);
    return out[0];
}

// The /proc/self/maps line of the mapping that holds `address`.
std::string mapping_of(const void* address) {
    std::ifstream maps("/proc/self/maps");
    const auto at = reinterpret_cast<std::uintptr_t>(address);
    for (std::string line; std::getline(maps, line);) {
        unsigned long long begin = 0, end = 0;
        if (std::sscanf(line.c_str(), "%llx-%llx", &begin, &end) == 2 && at >= begin && at < end) return line;
    }
    return {};
}

// Writes bytes at `offset` of a (read-only) cached file in place, as the
// cache's owner can.
void overwrite(const fs::path& file, std::streamoff offset, const std::string& bytes) {
    fs::permissions(file, fs::perms::owner_write, fs::perm_options::add);
    std::fstream io(file, std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(offset);
    io.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string read_text(const fs::path& file) {
    std::ifstream in(file);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

}  // namespace

TEST_CASE("verify_on_load maps a sealed copy: changing the blob afterwards changes nothing loaded", "[hub][loader]") {
    KernelHub hub;
    Env env;
    Client client(env.options(hub.server().endpoint(), true));
    LoadResult loaded = client.load("vector-add");
    REQUIRE(loaded.address != nullptr);
    CHECK(add_first(loaded.address) == 11.0f);
    // Messages and results name the cached file, never /proc/self/fd.
    CHECK(loaded.file.find("/proc/") == std::string::npos);

    const std::string mapping = mapping_of(loaded.address);
    INFO(mapping);
    CHECK(mapping.find("/memfd:kernhub:libvector_add.so") != std::string::npos);
    Dl_info info{};
    REQUIRE(::dladdr(loaded.address, &info) != 0);
    const std::string name = info.dli_fname;
    REQUIRE(name.rfind("/proc/self/fd/", 0) == 0);
    // Sealed: not even this process can write the copy.
    const int fd = std::stoi(name.substr(14));
    const int seals = ::fcntl(fd, F_GET_SEALS);
    CHECK((seals & F_SEAL_WRITE) != 0);
    CHECK((seals & F_SEAL_SHRINK) != 0);
    CHECK((seals & F_SEAL_GROW) != 0);
    CHECK((seals & F_SEAL_SEAL) != 0);
    const int writable = ::open(name.c_str(), O_WRONLY | O_CLOEXEC);
    if (writable >= 0) {
        CHECK(::pwrite(writable, "x", 1, 0) < 0);
        CHECK(errno == EPERM);
        ::close(writable);
    }

    // Overwrite the function's first instruction in the blob with a return,
    // where a mapping of the file itself would see it.
    unsigned long long begin = 0, end = 0, offset = 0;
    REQUIRE(std::sscanf(mapping.c_str(), "%llx-%llx %*s %llx", &begin, &end, &offset) == 3);
    const auto file_offset =
        static_cast<std::streamoff>(reinterpret_cast<std::uintptr_t>(loaded.address) - begin + offset);
#if defined(__x86_64__)
    const std::string ret("\xc3", 1);
#elif defined(__aarch64__)
    const std::string ret("\xc0\x03\x5f\xd6", 4);
#else
    const std::string ret;
#endif
    REQUIRE_FALSE(ret.empty());
    const fs::path blob = fs::canonical(fs::path(loaded.file));
    overwrite(blob, file_offset, ret);
    CHECK(add_first(loaded.address) == 11.0f);

    // Loading again reads the changed blob and refuses it (exit 4).
    std::string message;
    CHECK(code_of([&] { client.load("vector-add"); }, &message) == ErrorCode::verification);
    CHECK(message.find("changed since it was verified") != std::string::npos);
    CHECK(message.find(blob.filename().string()) != std::string::npos);
}

TEST_CASE("verify_on_load: the same bytes loaded twice share one handle", "[hub][loader]") {
    KernelHub hub;
    Env env;
    Client client(env.options(hub.server().endpoint(), true));
    LoadResult first = client.load("vector-add");
    LoadResult again = client.load("vector-add");
    CHECK(first.address == again.address);
}

TEST_CASE("verify_on_load refuses a blob replaced after the fetch", "[hub][loader]") {
    KernelHub hub;
    Env env;
    Client client(env.options(hub.server().endpoint(), true));
    FetchResult fetched = client.fetch("vector-add");
    const fs::path link = fs::path(fetched.path) / "libvector_add.so";
    const fs::path blob = fs::canonical(link);
    // The owner replaces the 0444 blob by rename, with a file of the same size.
    const fs::path other = env.dir.path() / "other.so";
    fs::copy_file(blob, other);
    overwrite(other, 200, "changed!");
    fs::rename(other, blob);
    std::string message;
    CHECK(code_of([&] { client.load("vector-add"); }, &message) == ErrorCode::verification);
    CHECK(message.find("changed since it was verified") != std::string::npos);
    CHECK(message.find(link.string()) != std::string::npos);
}

TEST_CASE("a snapshot folder linked outside the repo folder is rebuilt, never loaded", "[hub][loader]") {
    KernelHub hub;
    Env env;
    const bool verify = GENERATE(false, true);
    const bool offline = GENERATE(false, true);
    INFO("verify_on_load " << verify << ", offline " << offline);
    FetchResult fetched = Client(env.options(hub.server().endpoint(), verify)).fetch("vector-add");
    const fs::path variant_dir = fetched.path;
    const fs::path link = variant_dir / "libvector_add.so";
    const std::string target = fs::read_symlink(link).string();
    const fs::path blob = fs::canonical(link);

    // Outside the cache: the same folder depth, the same relative link, and
    // a "blob" of the right name and size holding other bytes.
    const fs::path outside = env.dir.path() / "outside";
    const fs::path fake_variant = outside / "a" / "b" / "c" / variant_dir.filename();
    fs::create_directories(fake_variant);
    fs::create_directories(outside / "blobs");
    std::ofstream(outside / "blobs" / blob.filename(), std::ios::binary)
        << std::string(static_cast<std::size_t>(fs::file_size(blob)), 'E');
    fs::create_symlink(target, fake_variant / "libvector_add.so");
    fs::remove_all(variant_dir);
    fs::create_directory_symlink(fake_variant, variant_dir);
    REQUIRE(read_text(link).substr(0, 4) == "EEEE");

    Options o = env.options(hub.server().endpoint(), verify);
    o.offline = offline;
    LoadResult loaded = Client(o).load("vector-add");
    CHECK(add_first(loaded.address) == 11.0f);
    CHECK_FALSE(fs::is_symlink(variant_dir));
    CHECK(fs::read_symlink(link).string() == target);
    CHECK(fs::exists(fake_variant / "libvector_add.so"));  // what it pointed to is left alone
    CHECK(read_text(outside / "blobs" / blob.filename()).substr(0, 4) == "EEEE");
}

TEST_CASE("a blobs/ folder linked outside the repo folder is replaced, never loaded from", "[hub][loader]") {
    KernelHub hub;
    Env env;
    const bool verify = GENERATE(false, true);
    INFO("verify_on_load " << verify);
    FetchResult fetched = Client(env.options(hub.server().endpoint(), verify)).fetch("vector-add");
    const fs::path link = fs::path(fetched.path) / "libvector_add.so";
    const fs::path blob = fs::canonical(link);
    const fs::path blobs = env.folder() / "blobs";
    const auto size = static_cast<std::size_t>(fs::file_size(blob));

    // blobs/ moved out and linked back, its library blob rewritten there.
    const fs::path outside = env.dir.path() / "outside-blobs";
    fs::rename(blobs, outside);
    fs::create_directory_symlink(outside, blobs);
    const fs::path fake = outside / blob.filename();
    fs::permissions(fake, fs::perms::owner_write, fs::perm_options::add);
    std::ofstream(fake, std::ios::binary | std::ios::trunc) << std::string(size, 'E');
    REQUIRE(read_text(link).substr(0, 4) == "EEEE");

    SECTION("online: fetched again into a real blobs/ folder") {
        LoadResult loaded = Client(env.options(hub.server().endpoint(), verify)).load("vector-add");
        CHECK(add_first(loaded.address) == 11.0f);
        CHECK_FALSE(fs::is_symlink(blobs));
        CHECK(fs::is_directory(blobs));
        CHECK(read_text(fake).substr(0, 4) == "EEEE");  // what the link pointed to is left alone
    }
    SECTION("offline: refused, nothing loaded") {
        Options o = env.options(hub.server().endpoint(), verify);
        o.offline = true;
        std::string message;
        CHECK(code_of([&] { (void)Client(o).load("vector-add"); }, &message) != ErrorCode::ok);
        INFO(message);
        CHECK(fs::exists(fake));
    }
}

TEST_CASE("a fetch writes nothing through a linked .kernhub/, refs/ or blobs/: the links go", "[hub]") {
    KernelHub hub;
    Env env;
    FetchResult first = Client(env.options(hub.server().endpoint(), false)).fetch("vector-add");
    const std::string folder_name = GENERATE(".kernhub", "refs", "blobs");
    const bool offline = GENERATE(false, true);
    INFO(folder_name << ", offline " << offline);
    const fs::path folder = env.folder() / folder_name;
    const fs::path outside = env.dir.path() / "outside";
    fs::create_directories(outside);
    fs::remove_all(folder);
    fs::create_directory_symlink(outside, folder);

    Options o = env.options(hub.server().endpoint(), false);
    o.offline = offline;
    std::string message;
    const ErrorCode code = code_of([&] { (void)Client(o).fetch("vector-add"); }, &message);
    INFO(message);
    // Online the fetch completes; offline, what was only behind the link
    // (the blobs, the ref naming main) is missing, and .kernhub/ is rebuilt
    // from the snapshot.
    CHECK(code == (offline && folder_name != ".kernhub" ? ErrorCode::offline : ErrorCode::ok));
    CHECK_FALSE(fs::is_symlink(folder));
    CHECK(fs::is_empty(outside));
}

TEST_CASE("a snapshot link to a file outside the repo folder is replaced", "[hub]") {
    KernelHub hub;
    Env env;
    const bool offline = GENERATE(false, true);
    FetchResult fetched = Client(env.options(hub.server().endpoint(), false)).fetch("vector-add");
    const fs::path link = fs::path(fetched.path) / "libvector_add.so";
    const std::string target = fs::read_symlink(link).string();
    const fs::path outside = env.dir.path() / "evil.so";
    std::ofstream(outside) << "not a kernel";
    fs::remove(link);
    fs::create_symlink(outside, link);

    Options o = env.options(hub.server().endpoint(), true);
    o.offline = offline;
    LoadResult loaded = Client(o).load("vector-add");
    CHECK(add_first(loaded.address) == 11.0f);
    CHECK(fs::read_symlink(link).string() == target);
}

TEST_CASE("a malformed variant record means: verify the variant again", "[hub]") {
    KernelHub hub;
    Env env;
    FetchResult first = Client(env.options(hub.server().endpoint(), false)).fetch("vector-add");
    const fs::path record = env.folder() / ".kernhub" / "variants" / first.commit / (first.variant + ".json");
    REQUIRE(fs::exists(record));
    const std::string good = read_text(record);

    std::string so_sha;
    for (const auto& f : first.files) {
        if (f.path == "libvector_add.so") so_sha = f.sha256;
    }
    REQUIRE(so_sha.size() == 64);
    // {what, text in the record, its replacement (JSON text)}
    const std::vector<std::array<std::string, 3>> cases = {
        {"a path with '..'", "\"libvector_add.so\"", "\"../x/libvector_add.so\""},
        {"an absolute path", "\"libvector_add.so\"", "\"/tmp/libvector_add.so\""},
        {"a hash with control characters", so_sha, "\\u001b[31m" + std::string(59, 'a')},
        {"a well-formed hash that is not the listed one", so_sha, std::string(64, 'b')},
    };
    const auto& c = cases.at(static_cast<std::size_t>(GENERATE(0, 1, 2, 3)));
    INFO(c[0]);
    std::string bad = good;
    const auto at = bad.find(c[1]);
    REQUIRE(at != std::string::npos);
    bad.replace(at, c[1].size(), c[2]);
    fs::permissions(record, fs::perms::owner_write, fs::perm_options::add);
    std::ofstream(record, std::ios::trunc) << bad;

    const bool offline = GENERATE(false, true);
    Options o = env.options(hub.server().endpoint(), true);
    o.offline = offline;
    LoadResult loaded = Client(o).load("vector-add");
    CHECK(add_first(loaded.address) == 11.0f);
    REQUIRE(loaded.fetch.files.size() == first.files.size());
    for (std::size_t i = 0; i < first.files.size(); ++i) {
        CHECK(loaded.fetch.files[i].path == first.files[i].path);
        CHECK(loaded.fetch.files[i].sha256 == first.files[i].sha256);
    }
    // Online the record is written again from what was verified.
    if (!offline) CHECK(read_text(record).find(so_sha) != std::string::npos);
}

TEST_CASE("verify_on_load checks a fatbin's bytes before the CUDA driver sees them", "[hub][cuda][needs:nvcc]") {
    KernelHub hub;
    Env env;
    Options o = env.options(hub.server().endpoint(), true);
    o.targets = {"native-cuda"};
    Client client(o);
    FetchResult fetched = client.fetch("vector-add-cuda");
    const fs::path link = fs::path(fetched.path) / "vector_add.fatbin";
    overwrite(fs::canonical(link), 40, "changed");
    std::string message;
    CHECK(code_of([&] { client.load("vector-add-cuda"); }, &message) == ErrorCode::verification);
    CHECK(message.find("changed since it was verified") != std::string::npos);
    CHECK(message.find(link.string()) != std::string::npos);
}

TEST_CASE("verify_on_load without CUDA: an intact fatbin reaches the driver step (exit 7 naming the file)",
          "[hub][cuda][needs:nvcc][needs:no-cuda]") {
    KernelHub hub;
    Env env;
    Options o = env.options(hub.server().endpoint(), true);
    o.targets = {"native-cuda"};
    Client client(o);
    std::string message;
    CHECK(code_of([&] { client.load("vector-add-cuda"); }, &message) == ErrorCode::load);
    CHECK(message.find("CUDA") != std::string::npos);
    CHECK(message.find("vector_add.fatbin") != std::string::npos);
}
