// kernhub's variant selection as a filter, for the differential test
// against the Python `kernels` library (kernels_differential.py). Reads
// lines "HOST<TAB>VARIANT VARIANT ..." on stdin, where HOST is a host
// description as --host takes it, and prints for each one line: the
// chosen variant, or "-" when none fits. A description that does not
// parse prints "error: <message>". Nothing but select_variant and
// parse_host_spec runs: no hub, cache or runtime.
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "kernhub/error.hpp"
#include "select/variant.hpp"

int main() {
    using namespace kernhub;
    std::ios::sync_with_stdio(false);
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
            std::cout << (selection.chosen ? *selection.chosen : std::string("-")) << '\n';
        } catch (const Error& error) {
            std::cout << "error: " << error.what() << '\n';
        }
    }
    return 0;
}
