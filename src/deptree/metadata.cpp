#include "deptree/metadata.hpp"

#include <map>
#include <nlohmann/json.hpp>

#include "common/repo.hpp"
#include "common/strict_json.hpp"
#include "common/text.hpp"
#include "kernhub/error.hpp"

namespace kernhub::deptree {

using json = nlohmann::json;

namespace {

Error malformed(const std::string& where, const std::string& why) {
    return Error(ErrorCode::verification,
                 "metadata.json of " + where + " is malformed: " + why + "; the publisher must fix the repo");
}

// "1.2.3" -> {1, 2, 3}; nullopt unless non-empty dot-separated digit runs
// of at most 9 digits each.
std::optional<std::vector<long>> numeric_parts(const std::string& text) {
    std::vector<long> parts;
    std::size_t start = 0;
    for (;;) {
        const std::size_t dot = text.find('.', start);
        const std::string part = text.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
        if (part.empty() || part.size() > 9 || part.find_first_not_of("0123456789") != std::string::npos) {
            return std::nullopt;
        }
        parts.push_back(std::stol(part));
        if (dot == std::string::npos) return parts;
        start = dot + 1;
    }
}

KernelDependency parse_dependency(const json& entry, const std::string& where, std::size_t index) {
    const std::string at = "\"kernel-depends\" entry " + std::to_string(index + 1);
    if (!entry.is_object()) throw malformed(where, at + " is not an object");
    for (const auto& [key, value] : entry.items()) {
        (void)value;
        if (key != "repo-id" && key != "version" && key != "revision") {
            throw malformed(where, at + " has the unknown key \"" + key + "\" (repo-id, version, revision)");
        }
    }
    KernelDependency dep;
    if (!entry.contains("repo-id") || !entry["repo-id"].is_string()) {
        throw malformed(where, at + " needs a string \"repo-id\"");
    }
    dep.repo_id = entry["repo-id"].get<std::string>();
    try {
        validate_repo_id(dep.repo_id);
    } catch (const Error&) {
        throw malformed(where, at + " has the repo-id \"" + dep.repo_id + "\", which is not ORG/NAME");
    }
    const bool has_version = entry.contains("version");
    const bool has_revision = entry.contains("revision");
    if (has_version == has_revision) {
        throw malformed(where, at + " (" + dep.repo_id + ") needs exactly one of \"version\" and \"revision\"");
    }
    if (has_version) {
        const json& version = entry["version"];
        if (!version.is_number_unsigned() || version.get<std::uint64_t>() > 1'000'000'000) {
            throw malformed(where, at + " (" + dep.repo_id + ") has a \"version\" that is not a whole number");
        }
        dep.version = static_cast<int>(version.get<std::uint64_t>());
    } else {
        if (!entry["revision"].is_string()) {
            throw malformed(where, at + " (" + dep.repo_id + ") has a \"revision\" that is not a string");
        }
        dep.revision = entry["revision"].get<std::string>();
        if (const std::string problem = revision_problem(dep.revision); !problem.empty()) {
            throw malformed(where, at + " (" + dep.repo_id + ") has an unusable revision: " + problem);
        }
    }
    return dep;
}

}  // namespace

nlohmann::json metadata_document(const std::string& text, const std::string& where) {
    if (text.size() > k_max_metadata_bytes) {
        throw malformed(where,
                        "it is larger than k_max_metadata_bytes (" + std::to_string(k_max_metadata_bytes) + " bytes)");
    }
    // kernels refuses a key twice, and a second "kernels-minver" must not
    // quietly replace the first; "kernel-depends" is bounded as it is read.
    strict_json::Limits limits;
    limits.max_depth = k_max_metadata_depth;
    limits.depth_name = "k_max_metadata_depth";
    limits.cap_at = [](const std::vector<strict_json::Step>& path) -> std::optional<strict_json::MemberCap> {
        if (path.size() == 1 && path[0].object && path[0].key == "kernel-depends") {
            return strict_json::MemberCap{k_max_kernel_depends, "k_max_kernel_depends", "\"kernel-depends\""};
        }
        return std::nullopt;
    };
    strict_json::Parsed parsed = strict_json::parse(text, limits);
    if (parsed.problem && parsed.problem->kind == strict_json::Problem::Kind::syntax) {
        throw malformed(where, "not valid JSON " + strict_json::syntax_position(*parsed.problem, text));
    }
    if (parsed.problem) throw malformed(where, strict_json::describe(*parsed.problem, text));
    if (!parsed.document.is_object()) throw malformed(where, "not a JSON object");
    return std::move(parsed.document);
}

namespace {

// A name a zip in the variant folder may have: <id>.zip.
bool is_file_name(const std::string& name) {
    if (name.empty() || name.size() > 250 || name.front() == '.') return false;
    return name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") ==
           std::string::npos;
}

}  // namespace

VariantMetadata parse_variant_metadata(const std::string& text, const std::string& where) {
    const json doc = metadata_document(text, where);
    VariantMetadata out;
    if (auto it = doc.find("kernel-depends"); it != doc.end()) {
        if (!it->is_array()) throw malformed(where, "\"kernel-depends\" is not a list");
        for (std::size_t i = 0; i < it->size(); ++i) {
            KernelDependency dep = parse_dependency((*it)[i], where, i);
            for (const KernelDependency& earlier : out.depends) {
                if (earlier.repo_id == dep.repo_id) {
                    throw malformed(where, "\"kernel-depends\" names " + dep.repo_id + " twice");
                }
            }
            out.depends.push_back(std::move(dep));
        }
    }
    if (auto it = doc.find("kernels-minver"); it != doc.end() && !it->is_null()) {
        const std::optional<std::vector<long>> parts =
            it->is_string() ? numeric_parts(it->get<std::string>()) : std::nullopt;
        if (!parts || parts->size() != 3) {
            throw malformed(where, "\"kernels-minver\" is not a version of three numbers (like \"0.17.0\")");
        }
        out.kernels_minver = it->get<std::string>();
    }
    if (auto it = doc.find("build-layout"); it != doc.end()) {
        if (!it->is_string()) throw malformed(where, "\"build-layout\" is not a string");
        out.build_layout = it->get<std::string>();
    }
    if (auto it = doc.find("id"); it != doc.end()) {
        if (!it->is_string()) throw malformed(where, "\"id\" is not a string");
        out.id = it->get<std::string>();
    }
    if (auto it = doc.find("backend"); it != doc.end() && it->is_object()) {
        if (auto type = it->find("type"); type != it->end() && type->is_string()) {
            out.backend_type = type->get<std::string>();
        }
        if (auto archs = it->find("archs"); archs != it->end() && !archs->is_null()) {
            if (!archs->is_array() || archs->size() > k_max_backend_archs) {
                throw malformed(where, "\"backend\".\"archs\" is not a list of at most k_max_backend_archs (" +
                                           std::to_string(k_max_backend_archs) + ") strings");
            }
            for (const json& arch : *archs) {
                if (!arch.is_string() || arch.get<std::string>().size() > 64) {
                    throw malformed(where,
                                    "\"backend\".\"archs\" holds an entry that is not a string of at most 64 bytes");
                }
                out.backend_archs.push_back(arch.get<std::string>());
            }
        }
    }
    for (const auto& [key, field] : {std::pair<const char*, std::string*>{"python-depends", &out.python_depends},
                                     std::pair<const char*, std::string*>{"provenance", &out.provenance}}) {
        if (auto it = doc.find(key); it != doc.end() && !it->is_null()) *field = it->dump();
    }
    if (out.build_layout == "zip" && !is_file_name(out.id)) {
        throw malformed(where, "the zip build layout needs an \"id\" that is a file name, and it is " +
                                   (out.id.empty() ? std::string("missing") : quoted_name(out.id)));
    }
    return out;
}

namespace {

struct CudaArch {
    int major = 0;
    int minor = 0;
    char suffix = 0;  // 'a', 'f' or 0
    bool ptx = false;
};

bool all_digits(const std::string& text) {
    return !text.empty() && text.size() <= 9 && text.find_first_not_of("0123456789") == std::string::npos;
}

// "9.0", "10.0a", "12.0f", "8.0+PTX"; nullopt for any other form.
std::optional<CudaArch> parse_cuda_arch(std::string arch) {
    CudaArch out;
    const std::string ptx = "+PTX";
    if (arch.size() >= ptx.size() && arch.compare(arch.size() - ptx.size(), ptx.size(), ptx) == 0) {
        out.ptx = true;
        arch.resize(arch.size() - ptx.size());
    }
    if (!arch.empty() && (arch.back() == 'a' || arch.back() == 'f')) {
        out.suffix = arch.back();
        arch.pop_back();
    }
    const std::size_t dot = arch.find('.');
    if (dot == std::string::npos) return std::nullopt;
    const std::string major = arch.substr(0, dot);
    const std::string minor = arch.substr(dot + 1);
    if (!all_digits(major) || !all_digits(minor)) return std::nullopt;
    out.major = std::stoi(major);
    out.minor = std::stoi(minor);
    return out;
}

}  // namespace

bool supports_cuda_capability(const std::vector<std::string>& archs, std::pair<int, int> capability) {
    bool any_known = false;
    for (const std::string& text : archs) {
        const std::optional<CudaArch> arch = parse_cuda_arch(text);
        if (!arch) continue;
        any_known = true;
        const std::pair<int, int> built{arch->major, arch->minor};
        bool fits = false;
        if (arch->suffix == 'a') {
            fits = capability == built;
        } else if (arch->suffix == 'f' || !arch->ptx) {
            fits = capability.first == built.first && capability.second >= built.second;
        } else {
            fits = capability >= built;
        }
        if (fits) return true;
    }
    return !any_known;
}

ArchCheck arch_check(const VariantMetadata& metadata) {
    if (metadata.backend_archs.empty()) return ArchCheck::none;
    if (metadata.backend_type == "cuda") return ArchCheck::cuda;
    if (metadata.backend_type == "rocm") return ArchCheck::rocm;
    return ArchCheck::none;
}

std::string layout_problem(const VariantMetadata& metadata) {
    if (metadata.build_layout == "files" || metadata.build_layout == "zip") return {};
    return "has the build layout " + quoted_name(metadata.build_layout) +
           " (its metadata.json's build-layout), which kernels " + k_kernels_release +
           ", the release kernhub follows, does not know (it knows files and zip); use a kernhub that follows "
           "the kernels release that writes this layout";
}

std::vector<KernelDependency> merged_depends(const std::vector<VariantMetadata>& variants) {
    std::map<std::string, KernelDependency> found;
    for (const VariantMetadata& variant : variants) {
        for (const KernelDependency& dep : variant.depends) found.emplace(dep.label(), dep);
    }
    std::vector<KernelDependency> out;
    out.reserve(found.size());
    for (auto& [label, dep] : found) out.push_back(std::move(dep));
    return out;
}

std::optional<int> compare_versions(const std::string& a, const std::string& b) {
    std::optional<std::vector<long>> left = numeric_parts(a);
    std::optional<std::vector<long>> right = numeric_parts(b);
    if (!left || !right) return std::nullopt;
    const std::size_t n = std::max(left->size(), right->size());
    left->resize(n, 0);
    right->resize(n, 0);
    if (*left < *right) return -1;
    if (*right < *left) return 1;
    return 0;
}

std::string minver_problem(const VariantMetadata& metadata) {
    if (!metadata.kernels_minver) return {};
    const std::optional<int> order = compare_versions(k_kernels_release, *metadata.kernels_minver);
    if (!order || *order >= 0) return {};
    return "needs kernels>=" + *metadata.kernels_minver +
           " (its metadata.json's kernels-minver), and kernhub follows kernels " + k_kernels_release;
}

}  // namespace kernhub::deptree
