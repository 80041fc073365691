// What a variant's metadata.json says about other kernels and about the
// Python `kernels` library (docs/registry.md, "Kernel dependencies"):
// its "kernel-depends" list and its "kernels-minver". Pure: parsing and
// version comparison, no I/O.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace kernhub::deptree {

// The `kernels` release whose formats kernhub follows (metadata.json,
// kernels.lock, the cache layout): a variant whose "kernels-minver" is
// newer needs something kernhub does not know.
inline constexpr const char* k_kernels_release = "0.19.1";

// Bounds on what one metadata.json may declare.
inline constexpr std::size_t k_max_metadata_bytes = 4u << 20;
inline constexpr std::size_t k_max_kernel_depends = 64;  // entries of one "kernel-depends"
inline constexpr std::size_t k_max_metadata_depth = 32;  // nesting of objects and arrays

// A variant's metadata.json as a document, read strictly (a key twice, or
// nesting over k_max_metadata_depth, is refused, and "kernel-depends" is
// bounded as it is read): the one reading both this module and the digest
// check use. Error(verification) naming `where` (the repo and variant) when
// it is larger than k_max_metadata_bytes, not JSON (with the position), or
// not an object.
nlohmann::json metadata_document(const std::string& text, const std::string& where);

// One entry of "kernel-depends": a repo and exactly one of a version (a
// "vN" branch) or a revision (a branch, tag or commit).
struct KernelDependency {
    std::string repo_id;
    std::optional<int> version;
    std::string revision;
    // "vN" for a version, else the revision: what a fetch asks the hub for.
    std::string ref() const { return version ? "v" + std::to_string(*version) : revision; }
    // "org/x@v1", for messages and lock entries.
    std::string label() const { return repo_id + "@" + ref(); }
    bool operator<(const KernelDependency& other) const {
        return std::tie(repo_id, version, revision) < std::tie(other.repo_id, other.version, other.revision);
    }
    bool operator==(const KernelDependency& other) const {
        return repo_id == other.repo_id && version == other.version && revision == other.revision;
    }
};

struct VariantMetadata {
    std::vector<KernelDependency> depends;
    std::optional<std::string> kernels_minver;  // "0.18.0", as written
    // "build-layout": "files" (also when absent) or "zip", as kernels 0.19
    // knows them; another value is kept as written, and loading refuses it
    // (layout_problem).
    std::string build_layout = "files";
    // "id": the variant's package name, which names the zip of the "zip"
    // layout (<id>.zip); empty when absent.
    std::string id;
    // "backend": {"type", "archs"}. The type as written ("cuda", "rocm",
    // "cpu", "agnostic", or one kernhub does not know, kept as written;
    // empty when absent). kernels 0.19.1 reads the type only for its device
    // arch check, and so does kernhub (arch_check). archs: the device
    // architectures the build declares ("9.0", "10.0a", "8.0+PTX",
    // "gfx90a"), as written whatever the type, at most k_max_backend_archs
    // of at most 64 bytes each.
    std::string backend_type;
    std::vector<std::string> backend_archs;
    // "python-depends" and "provenance" as JSON text (compact), for info;
    // empty when absent. Neither is enforced for a C++ load.
    std::string python_depends;
    std::string provenance;
};

inline constexpr std::size_t k_max_backend_archs = 256;

// Whether a build declaring `archs` runs on a CUDA device of compute
// capability `capability`, as kernels 0.19.1's archs.py decides it: "X.Y"
// runs on X.Z for Z >= Y; "X.Ya" only on X.Y; "X.Yf" on X.Z for Z >= Y;
// "X.Y+PTX" on any capability from X.Y up. When no arch is in one of these
// forms the answer is true (the build is newer than the rules).
bool supports_cuda_capability(const std::vector<std::string>& archs, std::pair<int, int> capability);

// The device arch check kernels 0.19.1 makes of a build (archs.py's
// _check_arch_incompatibility over its Rust metadata reader): none, the
// CUDA device's compute capability, or the ROCm device's gfx arch.
enum class ArchCheck { none, cuda, rocm };

// Which check `metadata` gets, as 0.19.1 decides it. Its reader keeps
// "archs" for the types "cuda" and "rocm" only: every other type, one it
// knows ("cpu", "xpu", "metal", "cann", "neuron", "tpu", "agnostic") or one
// it does not ("foo", "CUDA": types are matched case-sensitively), reads as
// no archs, so the check returns before it reads the type (whose getter
// raises for an unknown one). No archs, or an empty list, is no check
// either. Pure.
ArchCheck arch_check(const VariantMetadata& metadata);

// Why kernhub cannot load a variant of this layout, or "" when it can:
// "has the build layout \"tar\" (its metadata.json's build-layout), which
// kernels 0.19.1, the release kernhub follows, does not know (it knows
// files and zip)...".
std::string layout_problem(const VariantMetadata& metadata);

// Reads the fields above from a metadata.json document; every other field
// is left alone. "build-layout" must be a string and "id" a string; with
// the zip layout the id must be a file name ([A-Za-z0-9_.-], no leading
// dot, at most 255 bytes). What `kernels` refuses is refused: "kernel-depends" must be a
// list (not null) of objects with "repo-id" and exactly one of "version" (a
// number 0 or more) or "revision" (a string), and no other key;
// "kernels-minver" must be three dot-separated numbers (or null). kernhub
// refuses more: an unsafe repo id or revision (they reach URLs and cache
// paths), a repo named twice (which would leave a kernel two versions of
// one dependency), more than k_max_kernel_depends entries, more than
// k_max_metadata_bytes. Each is Error(verification) naming `where` (the
// repo and variant) and the field: it is the hub's data.
VariantMetadata parse_variant_metadata(const std::string& json, const std::string& where);

// Every kernel the variants' metadata name, each once (by label()), in
// label order: what a kernel needs over all its variants.
std::vector<KernelDependency> merged_depends(const std::vector<VariantMetadata>& variants);

// Compares dotted numeric versions ("0.17", "0.17.0.0" equal): negative,
// zero or positive. nullopt when either is not dotted numbers.
std::optional<int> compare_versions(const std::string& a, const std::string& b);

// Why `metadata` asks for a newer `kernels` than k_kernels_release, or ""
// when it does not: "needs kernels>=0.18.0 (its kernels-minver), and kernhub
// follows kernels 0.19.1".
std::string minver_problem(const VariantMetadata& metadata);

}  // namespace kernhub::deptree
