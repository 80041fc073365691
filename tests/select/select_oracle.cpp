// kernhub's variant selection as a filter, for the differential test
// against the Python `kernels` library (kernels_differential.py). Reads
// lines "HOST<TAB>VARIANT VARIANT ..." on stdin, where HOST is a host
// description as --host takes it, and prints for each one line: the
// chosen variant, or "-" when none fits, then a tab and every variant of
// the kernels families that fits, in kernels' preference order (from the
// rules select_variant applies: kernels_reason, tvm_ffi_reason and
// kernels_key, over all candidates). A description that does not parse
// prints "error: <message>". Nothing but select_variant, its rules and
// parse_host_spec runs: no hub, cache or runtime.
// --plant abi3t-first: kernhub's own preference key with one rule changed
// (abi3t ranked before abi3), for the differential test to show that a
// kernhub-side rule change fails it; the accepted order is printed by the
// changed key (the chosen variant stays select_variant's).
#include <algorithm>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "deptree/metadata.hpp"
#include "kernhub/error.hpp"
#include "select/rules.hpp"
#include "select/variant.hpp"

// --cuda-archs: lines "ARCH ARCH ...<TAB>MAJOR.MINOR"; prints 1 or 0 for
// deptree::supports_cuda_capability (kernels' device arch check).
int cuda_archs() {
    std::string line;
    while (std::getline(std::cin, line)) {
        const std::size_t tab = line.find('\t');
        const std::string capability = tab == std::string::npos ? "" : line.substr(tab + 1);
        const std::size_t dot = capability.find('.');
        if (dot == std::string::npos) {
            std::cout << "error: no capability\n";
            continue;
        }
        std::vector<std::string> archs;
        std::istringstream words(line.substr(0, tab));
        for (std::string arch; words >> arch;) archs.push_back(arch);
        const std::pair<int, int> cc{std::stoi(capability.substr(0, dot)), std::stoi(capability.substr(dot + 1))};
        std::cout << (kernhub::deptree::supports_cuda_capability(archs, cc) ? "1" : "0") << '\n';
    }
    return 0;
}

int main(int argc, char** argv) {
    using namespace kernhub;
    std::ios::sync_with_stdio(false);
    if (argc > 1 && std::string(argv[1]) == "--cuda-archs") return cuda_archs();
    const bool abi3t_first = argc > 2 && std::string(argv[1]) == "--plant" && std::string(argv[2]) == "abi3t-first";
    if (argc > 1 && !abi3t_first) {
        std::cerr << "select_oracle: unknown arguments; it takes --cuda-archs or --plant abi3t-first\n";
        return 2;
    }
    std::string line;
    while (std::getline(std::cin, line)) {
        const std::size_t tab = line.find('\t');
        if (tab == std::string::npos) {
            std::cout << "error: no tab in the line\n";
            continue;
        }
        try {
            const select::HostFacts host = select::parse_host_spec(line.substr(0, tab));
            std::vector<select::Candidate> candidates;
            std::istringstream names(line.substr(tab + 1));
            for (std::string name; names >> name;) candidates.push_back({name, {"kernel.so"}});
            const select::Selection selection = select::select_variant(host, candidates);
            std::vector<std::pair<select::rules::KernelsKey, std::string>> fits;
            const select::Backend backend = select::selected_backend(host);
            const select::RuntimeProbe runtime = host.tvm_ffi();
            for (const select::Candidate& candidate : candidates) {
                const std::optional<select::Variant> variant = select::parse_variant(candidate.name);
                if (!variant || variant->family == select::Family::native) continue;
                if (select::rules::kernels_reason(host, backend, *variant)) continue;
                if (variant->family == select::Family::tvm_ffi && select::rules::tvm_ffi_reason(runtime, *variant)) {
                    continue;
                }
                select::rules::KernelsKey key = select::rules::kernels_key(*variant);
                if (abi3t_first) key[4] = -key[4];  // the abi order (rules::kernels_key)
                fits.emplace_back(key, candidate.name);
            }
            std::stable_sort(fits.begin(), fits.end(),
                             [](const auto& a, const auto& b) { return a.first < b.first; });
            std::cout << (selection.chosen ? *selection.chosen : std::string("-")) << '\t';
            for (std::size_t i = 0; i < fits.size(); ++i) std::cout << (i ? " " : "") << fits[i].second;
            std::cout << '\n';
        } catch (const Error& error) {
            std::cout << "error: " << error.what() << '\n';
        }
    }
    return 0;
}
