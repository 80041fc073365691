// Host facts from uname(2), and their one-line description for messages.
#include <sys/utsname.h>

#include <cerrno>
#include <cstring>

#include "common/hint.hpp"
#include "common/text.hpp"
#include "kernhub/error.hpp"
#include "select/variant.hpp"

namespace kernhub::select {
namespace {

// Variant names spell the CPU the way Linux does; macOS reports "arm64" and
// the BSDs "amd64" for the same machines.
std::string normalise_cpu(std::string_view machine) {
    if (machine == "arm64" || machine == "aarch64") {
        return "aarch64";
    }
    if (machine == "amd64" || machine == "x86_64") {
        return "x86_64";
    }
    return ascii_lowercase(machine);
}

std::string normalise_os(std::string_view sysname) {
    std::string lower = ascii_lowercase(sysname);
    if (lower.rfind("mingw", 0) == 0 || lower.rfind("msys", 0) == 0 || lower.rfind("cygwin", 0) == 0) {
        return "windows";
    }
    return lower;  // "Linux" -> linux, "Darwin" -> darwin
}

}  // namespace

HostFacts host_from_uname(std::string_view sysname, std::string_view machine) {
    HostFacts host;
    host.cpu = normalise_cpu(machine);
    host.os = normalise_os(sysname);
    return host;
}

HostFacts detect_host() {
    struct utsname names {};
    if (uname(&names) != 0) {
        throw Error(ErrorCode::internal,
                    "cannot read the host's CPU and OS with uname(); name the variant to use as the target",
                    hint::setting("targets"), std::strerror(errno));
    }
    return host_from_uname(names.sysname, names.machine);
}

Backend selected_backend(const HostFacts& host) {
    if (host.backend) return *host.backend;
    Backend backend;
    backend.kind = BackendKind::cpu;
    if (host.cuda) {
        backend.kind = BackendKind::cuda;
        backend.major = host.cuda->first;
        backend.minor = host.cuda->second;
        backend.versioned = true;
    }
    return backend;
}

std::string describe(const HostFacts& host) {
    const auto text_of = [](const std::pair<int, int>& v) {
        return std::to_string(v.first) + "." + std::to_string(v.second);
    };
    std::string text = host.cpu + "-" + host.os;
    text += host.cuda ? ", CUDA " + text_of(*host.cuda) : std::string(", no CUDA");
    if (host.torch) {
        text += ", torch " + text_of(*host.torch);
        if (host.torch_cxx11_abi) text += *host.torch_cxx11_abi ? " (cxx11 ABI)" : " (cxx98 ABI)";
    }
    if (host.macos) text += ", macOS " + text_of(*host.macos);
    if (host.python) text += ", Python " + text_of(*host.python) + (host.free_threaded ? " (free-threaded)" : "");
    const Backend backend = selected_backend(host);
    if (host.backend) text += ", backend " + backend_spelling(backend);
    return text;
}

}  // namespace kernhub::select
