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

std::string describe(const HostFacts& host) {
    std::string text = host.cpu + "-" + host.os;
    if (host.cuda) {
        text += ", CUDA " + std::to_string(host.cuda->first) + "." + std::to_string(host.cuda->second);
    } else {
        text += ", no CUDA";
    }
    if (host.torch) {
        text += ", torch " + std::to_string(host.torch->first) + "." + std::to_string(host.torch->second);
    }
    return text;
}

}  // namespace kernhub::select
