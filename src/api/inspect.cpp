// kernhub::inspect_file: what a kernel artifact holds and what runs where.
#include <algorithm>
#include <cctype>
#include <filesystem>

#include "api/head_first_file.hpp"
#include "elf/elf_inspect.hpp"
#include "fatbin/fatbin.hpp"
#include "kernhub/error.hpp"
#include "kernhub/inspect.hpp"
#include "loader/torch_ops.hpp"
#include "tvmffi/runtime.hpp"

namespace kernhub {

namespace {

BinaryEntry to_public(const fatbin::Entry& entry) {
    return BinaryEntry{entry.kind == fatbin::EntryKind::sass ? BinaryEntry::Kind::sass : BinaryEntry::Kind::ptx,
                       entry.arch_name(), entry.compressed, entry.size};
}

// Enough of the start of a file for fatbin::detect_format: the fatbin magic
// or the ELF identification up to e_machine.
constexpr std::size_t k_header_bytes = 64;

void fill_elf(InspectResult& result, const std::uint8_t* data, std::size_t size, const std::atomic<bool>* cancel) {
    elf::ElfFacts facts = elf::inspect_elf(data, size, result.path);
    result.format = InspectResult::Format::elf;
    ElfInfo& elf = result.elf.emplace();
    elf.elf_class = facts.elf_class;
    elf.machine = facts.machine_name;
    elf.type = facts.type;
    elf.glibc_versions = facts.glibc_versions;
    elf.max_glibc = facts.max_glibc;
    elf.needed = facts.needed;
    elf.exported_functions = facts.exported_functions;
    elf.tvm_ffi_functions = tvmffi::function_names(facts.exported_functions);
    const loader::TorchOpListing ops = loader::list_torch_ops(data, size, result.path, cancel);
    elf.torch_ops = ops.ops;
    elf.torch_schemas = ops.schemas;
    elf.torch_namespaces.assign(ops.defined_namespaces.begin(), ops.defined_namespaces.end());
}

}  // namespace

ComputeCapability parse_compute_capability(const std::string& text) {
    std::string digits = text.rfind("sm_", 0) == 0 ? text.substr(3) : text;
    ComputeCapability cc;
    auto dot = digits.find('.');
    auto all_digits = [](const std::string& s) {
        return !s.empty() && s.size() <= 3 &&
               std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
    };
    if (dot != std::string::npos && all_digits(digits.substr(0, dot)) && all_digits(digits.substr(dot + 1))) {
        cc.major = std::stoi(digits.substr(0, dot));
        cc.minor = std::stoi(digits.substr(dot + 1));
    } else if (dot == std::string::npos && all_digits(digits) && digits.size() >= 2) {
        cc.major = std::stoi(digits.substr(0, digits.size() - 1));
        cc.minor = digits.back() - '0';
    } else {
        throw Error(ErrorCode::usage, "invalid compute capability '" + text + "': write it as 9.0, 10.3 or sm_90");
    }
    if (cc.major < 1 || cc.minor > 9) {
        throw Error(ErrorCode::usage, "invalid compute capability '" + text + "': write it as 9.0, 10.3 or sm_90");
    }
    return cc;
}

InspectResult inspect_file(const std::string& path, const std::optional<ComputeCapability>& cc) {
    return inspect_file(path, cc, nullptr);
}

InspectResult inspect_file(const std::string& path, const std::optional<ComputeCapability>& cc,
                           const std::atomic<bool>* cancel) {
    // The magic decides before the rest is touched: a large file of another
    // kind is refused after one small read.
    api::HeadFirstFile file(path);
    const std::vector<std::uint8_t> header = file.head(k_header_bytes);
    InspectResult result;
    result.path = path;
    fatbin::Format format = fatbin::detect_format(header.data(), header.size());
    if (format == fatbin::Format::unknown) {
        throw Error(ErrorCode::verification, path + " is neither a CUDA fatbin, a cubin nor an ELF shared object");
    }
    const std::vector<std::uint8_t>& bytes = file.read_all();
    const std::uint8_t* data = bytes.data();
    const std::size_t size = bytes.size();
    if (format == fatbin::Format::elf) {
        fill_elf(result, data, size, cancel);
        return result;
    }
    fatbin::Fatbin parsed = format == fatbin::Format::fatbin ? fatbin::parse_fatbin(data, size, path)
                                                             : fatbin::parse_cubin(data, size, path);
    result.format = format == fatbin::Format::fatbin ? InspectResult::Format::fatbin : InspectResult::Format::cubin;
    FatbinInfo& info = result.fatbin.emplace();
    info.containers = parsed.containers;
    for (const auto& entry : parsed.entries) info.entries.push_back(to_public(entry));
    if (cc) {
        auto chosen = fatbin::select_entry(parsed, cc->major, cc->minor);
        if (!chosen) {
            throw Error(ErrorCode::load, "no binary in " + path + " runs on compute capability " +
                                             std::to_string(cc->major) + "." + std::to_string(cc->minor) + " (it has " +
                                             fatbin::describe_archs(parsed) + "); use a build for this GPU");
        }
        info.selected = to_public(*chosen);
    }
    return result;
}

}  // namespace kernhub
