// Torch facts from files. version.py is a generated file of a few
// assignments (`__version__ = '2.15.0+cu132'`, `cuda: Optional[str] =
// '13.2'`, `hip = None`); a LibTorch root has build-version
// ("2.15.0+cu130") and the version header. The C++11 ABI flag is read from
// libc10.so's exported symbols: a cxx11 build mangles std::string as
// std::__cxx11::basic_string, which a cxx98 build never does.
#include "torchenv/torch_facts.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <regex>

#include "common/python_env.hpp"
#include "common/text.hpp"
#include "elf/elf_inspect.hpp"

namespace kernhub::torchenv {
namespace {

namespace fs = std::filesystem;

// version.py and build-version are a few hundred bytes; more is not torch's.
constexpr std::size_t k_max_version_file = std::size_t{64} * 1024;

bool is_file(const fs::path& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// The first k_max_version_file bytes; nullopt when unreadable or longer.
std::optional<std::string> read_small(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return std::nullopt;
    std::string text(k_max_version_file + 1, '\0');
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<std::size_t>(in.gcount()));
    if (text.size() > k_max_version_file) return std::nullopt;
    return text;
}

// version.py's lines are short; a longer one is not an assignment of
// torch's, and skipping it keeps std::regex (which recurses per character)
// to bounded input.
constexpr std::size_t k_max_line = 256;

// The string assigned to `name` in version.py; "" for None or absent.
std::string assigned(const std::string& text, const std::string& name) {
    const std::regex pattern(name + R"re((?:\s*:[^=]*)?\s*=\s*(?:'([^']*)'|"([^"]*)")\s*)re");
    std::size_t start = 0;
    while (start < text.size()) {
        std::size_t end = text.find('\n', start);
        if (end == std::string::npos) end = text.size();
        if (end - start <= k_max_line && text.compare(start, name.size(), name) == 0) {
            const std::string line = text.substr(start, end - start);
            std::smatch match;
            if (std::regex_match(line, match, pattern)) return match[1].matched ? match[1].str() : match[2].str();
        }
        start = end + 1;
    }
    return {};
}

// The ABI flag from libc10.so's exports; nullopt when there is no such
// library or it exports nothing to tell by.
std::optional<bool> cxx11_abi(const fs::path& lib_dir, std::string& source) {
    const fs::path c10 = lib_dir / "libc10.so";
    if (!is_file(c10)) return std::nullopt;
    try {
        const elf::ElfFacts facts = elf::inspect_elf_file(c10);
        if (facts.exported_functions.empty()) return std::nullopt;
        source = c10.string();
        return std::any_of(facts.exported_functions.begin(), facts.exported_functions.end(),
                           [](const std::string& name) { return name.find("St7__cxx11") != std::string::npos; });
    } catch (const Error&) {
        return std::nullopt;
    }
}

Error unreadable(const fs::path& file, const std::string& named_by, const std::string& what) {
    return Error(ErrorCode::usage, named_by + " names " + quoted_name(file.parent_path().string()) + ", but its " +
                                       file.filename().string() + " " + what);
}

FoundTorch read_package(const fs::path& dir, const std::string& named_by) {
    const fs::path file = dir / "version.py";
    const std::optional<std::string> text = read_small(file);
    if (!text) throw unreadable(file, named_by, "cannot be read (or is over 64 KiB)");
    const auto version = major_minor(assigned(*text, "__version__"));
    if (!version) throw unreadable(file, named_by, "has no __version__ of the form X.Y");
    FoundTorch found;
    found.info.major = version->first;
    found.info.minor = version->second;
    found.info.cuda = assigned(*text, "cuda");
    found.info.hip = assigned(*text, "hip");
    found.info.xpu = assigned(*text, "xpu");
    found.info.source = file.string();
    found.lib_dir = dir / "lib";
    found.info.cxx11_abi = cxx11_abi(found.lib_dir, found.abi_source);
    return found;
}

// build-version "2.15.0+cu130": CUDA 13.0; "+rocm6.3": ROCm 6.3; "+cpu": neither.
FoundTorch read_libtorch(const fs::path& root, const std::string& named_by) {
    const fs::path file = root / "build-version";
    const std::optional<std::string> text = read_small(file);
    if (!text) throw unreadable(file, named_by, "cannot be read (or is over 64 KiB)");
    const std::string version = trim(*text);
    const auto numbers = version.size() <= k_max_line ? major_minor(version) : std::nullopt;
    if (!numbers) throw unreadable(file, named_by, "does not start with a version X.Y");
    FoundTorch found;
    found.info.major = numbers->first;
    found.info.minor = numbers->second;
    std::smatch match;
    static const std::regex k_cuda(R"(\+cu(\d{1,3})(\d)$)");
    static const std::regex k_rocm(R"(\+rocm(\d+\.\d+).*$)");
    if (std::regex_search(version, match, k_cuda)) found.info.cuda = match[1].str() + "." + match[2].str();
    if (std::regex_search(version, match, k_rocm)) found.info.hip = match[1].str();
    found.info.source = file.string();
    found.lib_dir = root / "lib";
    found.info.cxx11_abi = cxx11_abi(found.lib_dir, found.abi_source);
    return found;
}

}  // namespace

std::optional<std::pair<int, int>> major_minor(const std::string& version) {
    if (version.size() > 64) return std::nullopt;  // not a version; bounds std::regex's recursion
    static const std::regex k_version(R"(^(\d{1,4})\.(\d{1,4})(?:[.+\-a-z].*)?$)");
    std::smatch match;
    if (!std::regex_match(version, match, k_version)) return std::nullopt;
    return std::make_pair(std::stoi(match[1]), std::stoi(match[2]));
}

FoundTorch read_torch_dir(const fs::path& dir, const std::string& named_by) {
    if (is_file(dir / "version.py")) return read_package(dir, named_by);
    if (is_file(dir / "build-version")) return read_libtorch(dir, named_by);
    throw Error(ErrorCode::usage, named_by + " names " + quoted_name(dir.string()) +
                                      ", which is neither a torch package folder (with version.py) nor a LibTorch "
                                      "root (with build-version)");
}

std::optional<FoundTorch> find_in_python_envs(std::string& problem) {
    for (const std::string& folder : python_env::package_folders()) {
        const fs::path dir = fs::path(folder) / "torch";
        if (!is_file(dir / "version.py")) continue;
        try {
            return read_package(dir, "the torch package at " + quoted_name(dir.string()));
        } catch (const Error& error) {
            problem = error.plain_message();
        }
    }
    return std::nullopt;
}

std::optional<FoundTorch> find_torch(const std::optional<TorchInfo>& stated, const std::string& dir,
                                     const std::string& named_by, std::string& problem) {
    if (stated) {
        FoundTorch found;
        found.info = *stated;
        if (found.info.source.empty()) found.info.source = "Options::torch";
        return found;
    }
    if (!dir.empty()) return read_torch_dir(dir, named_by);
    return find_in_python_envs(problem);
}

}  // namespace kernhub::torchenv
